import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// Ranged upload/download and `copyRows` (the feature cache's gathers and scatters) on the CPU and
/// OpenCL backends, against the host-side default implementations on `ReferenceBackend` (the
/// definition), on awkward row lengths and row lists; and bad arguments, which must throw an
/// `UpdraftError` on every backend and leave the buffers as they were.
final class BackendRowsTests: XCTestCase {
    /// The backends under test, each with a label for messages. The CPU backend with 3 threads takes
    /// the multi-threaded path on the large cases.
    private func fastBackends() throws -> [(String, Backend)] {
        [("cpu", CPUBackend(threads: 1)), ("cpu x3", CPUBackend(threads: 3)),
         ("opencl", OpenCLBackend(context: try OpenCLTestSupport.context()))]
    }

    private func allBackends() throws -> [(String, Backend)] {
        [("reference", ReferenceBackend())] + (try fastBackends())
    }

    /// Distinct, exactly representable values (below 2^24), different for each `seed`.
    private func values(_ count: Int, seed: Int) -> [Float] {
        (0..<count).map { Float(($0 * 7 + seed * 1_000_003) % 16_000_000) }
    }

    // MARK: Ranges

    func testRangedUploadAndDownloadMatchTheDefault() throws {
        let n = 4097
        let ranges: [(offset: Int, count: Int)] = [(0, n), (0, 1), (n - 1, 1), (n, 0), (0, 0), (1, n - 1), (100, 3),
                                                    (2048, 2049), (5, 1023)]
        for (label, backend) in try fastBackends() {
            let reference = ReferenceBackend()
            let b = try backend.makeBuffer(values(n, seed: 1)), r = try reference.makeBuffer(values(n, seed: 1))
            for (i, range) in ranges.enumerated() {
                let update = values(range.count, seed: 10 + i)
                try backend.upload(update, to: b, offset: range.offset)
                try reference.upload(update, to: r, offset: range.offset)
                XCTAssertEqual(try backend.download(b), try reference.download(r), "\(label): upload \(range)")
                for (offset, count) in ranges {
                    XCTAssertEqual(try backend.download(b, offset: offset, count: count),
                                   try reference.download(r, offset: offset, count: count),
                                   "\(label): download \(offset), \(count) after upload \(range)")
                }
            }
        }
    }

    func testRangesOnAnEmptyBuffer() throws {
        for (label, backend) in try allBackends() {
            let b = try backend.makeBuffer(count: 0)
            try backend.upload([], to: b, offset: 0)
            XCTAssertEqual(try backend.download(b, offset: 0, count: 0), [], label)
            XCTAssertThrowsError(try backend.upload([1], to: b, offset: 0), label) { assertUpdraftError($0, label) }
            XCTAssertThrowsError(try backend.download(b, offset: 0, count: 1), label) { assertUpdraftError($0, label) }
        }
    }

    // MARK: Rows

    /// One gather or scatter: buffers of `sourceRowCount` / `destinationRowCount` rows plus a few
    /// trailing floats that are not a whole row (they must not change), and the row lists.
    private struct RowCase {
        var rowLength: Int
        var sourceRowCount: Int, destinationRowCount: Int
        var sourceRows: [Int], destinationRows: [Int]
        var sourceTail = 2, destinationTail = 3
    }

    private let rowCases: [RowCase] = [
        RowCase(rowLength: 1, sourceRowCount: 10, destinationRowCount: 7, sourceRows: [9, 0, 3, 3], destinationRows: [6, 0, 2, 5]),
        RowCase(rowLength: 3, sourceRowCount: 8, destinationRowCount: 8, sourceRows: Array((0..<8).reversed()),
                destinationRows: Array(0..<8)),
        RowCase(rowLength: 3, sourceRowCount: 8, destinationRowCount: 8, sourceRows: [2, 5, 7, 0, 1, 6, 4, 3],
                destinationRows: [4, 0, 7, 6, 2, 1, 3, 5], sourceTail: 0, destinationTail: 0),
        RowCase(rowLength: 5, sourceRowCount: 20, destinationRowCount: 4, sourceRows: [19, 0, 11, 7], destinationRows: [3, 1, 0, 2]),
        RowCase(rowLength: 4, sourceRowCount: 6, destinationRowCount: 9, sourceRows: [5, 0, 2], destinationRows: [8, 0, 4]),
        RowCase(rowLength: 64, sourceRowCount: 5, destinationRowCount: 5, sourceRows: [4, 3], destinationRows: [0, 4],
                sourceTail: 4, destinationTail: 0),
        RowCase(rowLength: 1023, sourceRowCount: 3, destinationRowCount: 9, sourceRows: [2, 0, 1], destinationRows: [8, 0, 4]),
        RowCase(rowLength: 4097, sourceRowCount: 6, destinationRowCount: 6, sourceRows: [5, 0, 2], destinationRows: [0, 5, 3]),
        RowCase(rowLength: 4096, sourceRowCount: 4, destinationRowCount: 2, sourceRows: [3, 1], destinationRows: [1, 0]),
        // Empty row lists and zero-length rows copy nothing (rows are not even checked when rows are empty).
        RowCase(rowLength: 5, sourceRowCount: 4, destinationRowCount: 4, sourceRows: [], destinationRows: []),
        RowCase(rowLength: 0, sourceRowCount: 0, destinationRowCount: 0, sourceRows: [3, 7], destinationRows: [1, 1]),
        // Large enough (over 2 x 2^17 floats) for the CPU backend to split over its threads, with the
        // split (at half the total) inside a row: a few long rows, and many short ones.
        RowCase(rowLength: 40_003, sourceRowCount: 12, destinationRowCount: 9, sourceRows: [11, 0, 5, 6, 2, 9, 1],
                destinationRows: [0, 8, 1, 7, 2, 6, 3]),
        RowCase(rowLength: 3, sourceRowCount: 120_000, destinationRowCount: 100_001,
                sourceRows: (0..<100_001).map { ($0 * 7919) % 120_000 }, destinationRows: (0..<100_001).map { ($0 * 31) % 100_001 }),
    ]

    /// Runs `c` on `backend` and on the reference default and compares both buffers.
    private func check(_ c: RowCase, on backend: Backend, _ label: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let reference = ReferenceBackend()
        let sourceValues = values(c.sourceRowCount * c.rowLength + c.sourceTail, seed: 1)
        let destinationValues = values(c.destinationRowCount * c.rowLength + c.destinationTail, seed: 2)
        let s = try backend.makeBuffer(sourceValues), d = try backend.makeBuffer(destinationValues)
        let rs = try reference.makeBuffer(sourceValues), rd = try reference.makeBuffer(destinationValues)
        try backend.copyRows(s, rows: c.sourceRows, to: d, rows: c.destinationRows, rowLength: c.rowLength)
        try reference.copyRows(rs, rows: c.sourceRows, to: rd, rows: c.destinationRows, rowLength: c.rowLength)
        let what = "\(label): row length \(c.rowLength), \(c.sourceRows.count) rows"
        XCTAssertEqual(try backend.download(s), sourceValues, "\(what): source changed", file: file, line: line)
        let got = try backend.download(d), expected = try reference.download(rd)
        XCTAssertEqual(got.count, expected.count, "\(what): destination size", file: file, line: line)
        if let i = zip(got, expected).enumerated().first(where: { $0.element.0 != $0.element.1 })?.offset {
            XCTFail("\(what): destination[\(i)] is \(got[i]), expected \(expected[i])", file: file, line: line)
        }
        // The reference's own result, worked out independently of the default implementation.
        if c.rowLength > 0, c.sourceRows.count < 100 {
            var direct = destinationValues
            for (from, to) in zip(c.sourceRows, c.destinationRows) {
                for j in 0..<c.rowLength { direct[to * c.rowLength + j] = sourceValues[from * c.rowLength + j] }
            }
            XCTAssertEqual(expected, direct, "\(what): reference", file: file, line: line)
        }
    }

    func testCopyRowsMatchesTheDefault() throws {
        for (label, backend) in try fastBackends() {
            for c in rowCases { try check(c, on: backend, label) }
        }
    }

    /// copy_rows' 2-D work-groups for other sizes than the tuned one: 1, an odd 3, 16 and 256.
    func testOpenCLCopyRowsWithOtherWorkGroupSizes() throws {
        let ctx = try OpenCLTestSupport.context()
        for size in [1, 3, 16, 256] where size <= ctx.device.info.maxWorkGroupSize {
            let b = OpenCLBackend(context: ctx, tuning: OpenCLTuning(workGroupSize: size))
            for c in rowCases.prefix(9) { try check(c, on: b, "opencl work-group \(size)") }
        }
    }

    /// Gathers that are never synchronized hold a bounded number of index buffers, and
    /// `synchronize` lets them all go; every gather still lands.
    func testOpenCLIndexBuffersAreReleased() throws {
        let b = OpenCLBackend(context: try OpenCLTestSupport.context())
        let n = 16, length = 5
        let s = try b.makeBuffer(values(n * length, seed: 1)), d = try b.makeBuffer(count: n * length)
        for i in 0..<(OpenCLInFlightBuffers.limit * 2) {
            try b.copyRows(s, rows: [i % n], to: d, rows: [(i * 3) % n], rowLength: length)
            XCTAssertLessThanOrEqual(b.inFlight.count, OpenCLInFlightBuffers.limit)
        }
        try b.synchronize()
        XCTAssertEqual(b.inFlight.count, 0)
        let sourceValues = try b.download(s), got = try b.download(d)
        for i in 0..<n {
            // Gather i + k*n repeats gather i: source row i to destination row 3i mod n (3 is coprime to n).
            let to = (i * 3) % n
            XCTAssertEqual(Array(got[to * length..<(to + 1) * length]), Array(sourceValues[i * length..<(i + 1) * length]))
        }
    }

    // MARK: Bad arguments

    private func assertUpdraftError(_ error: Error, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(error is UpdraftError, "\(what): threw \(type(of: error)): \(error)", file: file, line: line)
    }

    func testBadRangesThrow() throws {
        for (label, backend) in try allBackends() {
            let n = 10
            let b = try backend.makeBuffer(values(n, seed: 1))
            let uploads: [(Int, Int)] = [(n - 1, 2), (n + 1, 0), (-1, 1), (-1, 0), (Int.max, 1), (Int.max, 0), (Int.min, 3), (0, n + 1)]
            for (offset, count) in uploads {
                XCTAssertThrowsError(try backend.upload(values(count, seed: 3), to: b, offset: offset)) {
                    assertUpdraftError($0, "\(label): upload \(count) at \(offset)")
                }
            }
            let downloads: [(Int, Int)] = uploads + [(0, -1), (5, -1), (-1, Int.min), (Int.max, Int.max), (1, Int.max)]
            for (offset, count) in downloads {
                XCTAssertThrowsError(try backend.download(b, offset: offset, count: count)) {
                    assertUpdraftError($0, "\(label): download \(count) at \(offset)")
                }
            }
            XCTAssertEqual(try backend.download(b), values(n, seed: 1), "\(label): buffer changed by a rejected upload")
        }
    }

    func testBadRowsThrowAndChangeNothing() throws {
        let rowLength = 4
        // Source: 5 rows and 3 floats (not a whole row 5); destination: 3 rows.
        struct Bad { var what: String; var sourceRows: [Int]; var destinationRows: [Int]; var rowLength = 4; var sameBuffer = false }
        let bad: [Bad] = [
            Bad(what: "source row past the end", sourceRows: [0, 5], destinationRows: [0, 1]),
            Bad(what: "source row -1", sourceRows: [-1], destinationRows: [0]),
            Bad(what: "source row Int.max", sourceRows: [Int.max], destinationRows: [0]),
            Bad(what: "destination row past the end", sourceRows: [0], destinationRows: [3]),
            Bad(what: "destination row Int.min", sourceRows: [0], destinationRows: [Int.min]),
            Bad(what: "repeated destination rows", sourceRows: [0, 1, 2], destinationRows: [2, 0, 2]),
            Bad(what: "more source than destination rows", sourceRows: [0, 1], destinationRows: [0]),
            Bad(what: "more destination than source rows", sourceRows: [], destinationRows: [0]),
            Bad(what: "negative row length", sourceRows: [0], destinationRows: [0], rowLength: -4),
            Bad(what: "row longer than the buffers", sourceRows: [0], destinationRows: [0], rowLength: 24),
            Bad(what: "the same buffer", sourceRows: [0], destinationRows: [1], sameBuffer: true),
            Bad(what: "the same buffer, no rows", sourceRows: [], destinationRows: [], sameBuffer: true),
        ]
        for (label, backend) in try allBackends() {
            let sourceValues = values(5 * rowLength + 3, seed: 1), destinationValues = values(3 * rowLength, seed: 2)
            let s = try backend.makeBuffer(sourceValues), d = try backend.makeBuffer(destinationValues)
            for c in bad {
                let destination = c.sameBuffer ? s : d
                XCTAssertThrowsError(try backend.copyRows(s, rows: c.sourceRows, to: destination, rows: c.destinationRows,
                                                          rowLength: c.rowLength)) { assertUpdraftError($0, "\(label): \(c.what)") }
                XCTAssertEqual(try backend.download(s), sourceValues, "\(label): \(c.what) changed the source")
                XCTAssertEqual(try backend.download(d), destinationValues, "\(label): \(c.what) changed the destination")
            }
        }
    }

    /// A buffer of another backend is refused by the ranged calls and by copyRows.
    func testForeignBuffersThrow() throws {
        let backends = try allBackends()
        for (label, backend) in backends {
            let own = try backend.makeBuffer(count: 8)
            for (otherLabel, other) in backends where type(of: other) != type(of: backend) {
                let foreign = try other.makeBuffer(count: 8)
                let what = "\(label) given a \(otherLabel) buffer"
                XCTAssertThrowsError(try backend.upload([1, 2], to: foreign, offset: 0)) { assertUpdraftError($0, what) }
                XCTAssertThrowsError(try backend.download(foreign, offset: 0, count: 2)) { assertUpdraftError($0, what) }
                XCTAssertThrowsError(try backend.copyRows(foreign, rows: [0], to: own, rows: [1], rowLength: 2)) {
                    assertUpdraftError($0, what)
                }
                XCTAssertThrowsError(try backend.copyRows(own, rows: [0], to: foreign, rows: [1], rowLength: 2)) {
                    assertUpdraftError($0, what)
                }
            }
        }
    }

    // MARK: Failure injection

    /// FailingBackend passes the three calls through to its inner backend (not through the
    /// whole-buffer upload and download) and fails the chosen one on the chosen call.
    func testFailingBackendCoversRangesAndRows() throws {
        for op in [FailingBackend.Op.uploadRange, .downloadRange, .copyRows] {
            let failing = FailingBackend(CPUBackend(threads: 1), failing: op, onCall: 2)
            let s = try failing.makeBuffer((0..<8).map(Float.init)), d = try failing.makeBuffer(count: 8)
            let calls: [FailingBackend.Op: () throws -> Void] = [
                .uploadRange: { try failing.upload([5, 6], to: d, offset: 6) },
                .downloadRange: { _ = try failing.download(s, offset: 1, count: 3) },
                .copyRows: { try failing.copyRows(s, rows: [3], to: d, rows: [0], rowLength: 2) },
            ]
            for (_, call) in calls { try call() }
            XCTAssertThrowsError(try calls[op]!()) { XCTAssertTrue($0 is OpenCLError, "\(op): \($0)") }
            XCTAssertEqual(failing.failures, 1, "\(op)")
            XCTAssertEqual(failing.calls[op], 2, "\(op)")
            XCTAssertEqual(failing.calls[.upload], 1, "\(op): only makeBuffer's upload")
            XCTAssertNil(failing.calls[.download], "\(op)")
            XCTAssertEqual(try failing.download(d), [6, 7, 0, 0, 0, 0, 5, 6], "\(op): the calls went through")
            if op != .downloadRange { XCTAssertEqual(try failing.download(s, offset: 1, count: 3), [1, 2, 3], "\(op)") }
        }
    }
}
