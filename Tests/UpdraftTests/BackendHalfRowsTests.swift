import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// `copyRows(..., toHalf:)`, the feature cache's fp16 storage: the CPU backend, the OpenCL kernels
/// (vstore_half / vload_half, no cl_khr_fp16 needed) and the protocol's host default all round to
/// nearest even like Swift's Float16, on odd row lengths (rows that start mid-float), scattered
/// rows, and values at half's edges; bad rows throw.
final class BackendHalfRowsTests: XCTestCase {
    /// Values where rounding matters: ties, subnormal halves, past the largest half, negative zero.
    let special: [Float] = [0, -0.0, 1, -1, 1.0 / 3, 65504, 65520, 70000, -1e6, 6e-8, 3e-5, 1.00048828125,
                            1.00146484375, 2049, 0.1, -123.456]

    func values(_ count: Int, seed: UInt64) -> [Float] {
        var rng = SplitMix64(seed: seed)
        return (0..<count).map { i in i < special.count ? special[i] : rng.nextFloat(in: -8...8) }
    }

    /// Scatters source rows into a half arena, then gathers them back in another order; returns the
    /// arena's raw halves and the floats gathered.
    func roundTrip(_ be: Backend, rowLength: Int) throws -> (halves: [UInt16], back: [Float], source: [Float]) {
        let rows = 5, arenaRows = 9
        let source = values(rows * rowLength, seed: UInt64(rowLength))
        let src = try be.makeBuffer(source)
        let arena = try be.makeBuffer(count: (arenaRows * rowLength + 1) / 2)
        try be.fill(arena, with: 0)
        try be.copyRows(src, rows: [0, 1, 2, 3, 4], to: arena, rows: [8, 0, 3, 7, 4], rowLength: rowLength, toHalf: true)
        let out = try be.makeBuffer([Float](repeating: 9, count: 4 * rowLength))
        try be.copyRows(arena, rows: [3, 8, 4, 7], to: out, rows: [2, 0, 3, 1], rowLength: rowLength, toHalf: false)
        let raw = try be.download(arena)
        let halves = raw.flatMap { f -> [UInt16] in [UInt16(truncatingIfNeeded: f.bitPattern), UInt16(f.bitPattern >> 16)] }
        return (halves, try be.download(out), source)
    }

    func testEveryBackendRoundsLikeFloat16() throws {
        let cl = OpenCLBackend(context: try OpenCLTestSupport.context())
        for rowLength in [1, 3, 7, 33] {
            let expected = try roundTrip(ReferenceBackend(), rowLength: rowLength)
            // Row r of the source went to arena row [8, 0, 3, 7, 4][r]; out row j came from arena row [3, 8, 4, 7][j].
            let arenaRowOfSource = [8, 0, 3, 7, 4], outFrom = [3: 2, 8: 0, 4: 4, 7: 3]  // arena row -> source row
            for (j, arenaRow) in [3, 8, 4, 7].enumerated() {
                let s = outFrom[arenaRow]!
                XCTAssertEqual(arenaRowOfSource[s], arenaRow)
                for i in 0..<rowLength {
                    let want = Float(Float16(expected.source[s * rowLength + i]))
                    let got = expected.back[([2, 0, 3, 1][j]) * rowLength + i]
                    XCTAssertTrue(got == want || (got.isNaN && want.isNaN), "row length \(rowLength): \(got) vs \(want)")
                }
            }
            for be in [CPUBackend() as Backend, cl] {
                let r = try roundTrip(be, rowLength: rowLength)
                XCTAssertEqual(r.halves, expected.halves, "\(be.name), row length \(rowLength): the arena's halves")
                XCTAssertEqual(r.back.map(\.bitPattern), expected.back.map(\.bitPattern), "\(be.name), row length \(rowLength)")
            }
        }
    }

    func testRowsOutsideTheHalfArenaThrow() throws {
        for be in [CPUBackend() as Backend, OpenCLBackend(context: try OpenCLTestSupport.context()), ReferenceBackend()] {
            let floats = try be.makeBuffer(count: 14), arena = try be.makeBuffer(count: 7)  // 14 halves: 2 rows of 7
            try be.copyRows(floats, rows: [1], to: arena, rows: [1], rowLength: 7, toHalf: true)
            for (rows, toHalf) in [([2], true), ([-1], true), ([2], false)] {
                XCTAssertThrowsError(try toHalf
                    ? be.copyRows(floats, rows: [0], to: arena, rows: rows, rowLength: 7, toHalf: true)
                    : be.copyRows(arena, rows: rows, to: floats, rows: [0], rowLength: 7, toHalf: false)) { e in
                    XCTAssertTrue(e is UpdraftError, "\(be.name): \(e)")
                }
            }
        }
    }

    /// `--feature-cache-fp16` with `--no-feature-cache` is refused before any data is read.
    func testTrainRefusesHalfPrecisionWithoutTheCache() throws {
        let dir = try makeTemporaryFolder("updraft-fp16")
        defer { try? FileManager.default.removeItem(at: dir) }
        let model = dir.appendingPathComponent("m.mlmodel").path
        XCTAssertEqual(try runUpdraft(["create", "squeezenet", "--classes", "3", "--out", model], cacheDirectory: dir).status, 0)
        let r = try runUpdraft(["train", model, "--train", dir.appendingPathComponent("no-such-data").path,
                                "--feature-cache-fp16", "--no-feature-cache"], cacheDirectory: dir)
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("--feature-cache-fp16"), r.stderr)
        XCTAssertFalse(r.stderr.contains("no-such-data"), "refused before the data: \(r.stderr)")
    }
}
