import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// The strided copy every layout op that moves values runs as (Ops/Layout.swift `StridedCopy`):
/// its simplification, its reference, and each backend writing exactly its view.
final class LayoutStridedCopyTests: XCTestCase {
    func testSimplifiedDropsOnesSortsByDestinationAndMerges() {
        // concatND's part for input 1 of [4, (2 + 3), 5]: the channel and inner axes merge on both sides.
        let part = StridedCopy(dims: [4, 3, 5], source: .contiguous([4, 3, 5]), destination: .init(offset: 10, strides: [25, 5, 1]))
        let s = part.simplified
        XCTAssertEqual(s.dims, [4, 15])
        XCTAssertEqual(s.source, .init(offset: 0, strides: [15, 1]))
        XCTAssertEqual(s.destination, .init(offset: 10, strides: [25, 1]))
        // A transpose reversed walks its (scattered) destination in order: the inverse permutation.
        let t = TransposeGeometry(batch: 2, dims: [3, 4], perm: [1, 0]).stridedCopy
        XCTAssertEqual(t.dims, [2, 4, 3])
        XCTAssertEqual(t.source.strides, [12, 1, 4])
        let back = t.reversed.simplified
        XCTAssertEqual(back.dims, [2, 3, 4])
        XCTAssertEqual(back.destination.strides, [12, 4, 1])
        XCTAssertEqual(back.source.strides, [12, 1, 3])
        // Only size-1 axes: one axis of one value.
        XCTAssertEqual(StridedCopy(dims: [1, 1], source: .contiguous([1, 1], offset: 3), destination: .contiguous([1, 1])).simplified.dims, [1])
        XCTAssertEqual(part.sourceExtent, 60)
        XCTAssertEqual(part.destinationExtent, 10 + 3 * 25 + 2 * 5 + 4 + 1)
        XCTAssertThrowsError(try StridedCopy(dims: [2], source: .contiguous([2]), destination: .init(strides: [1, 1])).validate("bad")) { e in
            XCTAssertTrue("\(e)".contains("strides"), "\(e)")
        }
    }

    func testReferenceWritesOnlyTheView() throws {
        // A [2, 2] box into every other column of a [2, 5] buffer from column 1.
        let g = StridedCopy(dims: [2, 2], source: .contiguous([2, 2]), destination: .init(offset: 1, strides: [5, 2]))
        var y = [Double](repeating: -1, count: 10)
        try Reference.stridedCopy(g, source: [1, 2, 3, 4], into: &y)
        XCTAssertEqual(y, [-1, 1, -1, 2, -1, -1, 3, -1, 4, -1])
        var back = [Double](repeating: 0, count: 4)
        try Reference.stridedCopy(g.reversed, source: y, into: &back)
        XCTAssertEqual(back, [1, 2, 3, 4])
        var short = [Double](repeating: 0, count: 8)
        XCTAssertThrowsError(try Reference.stridedCopy(g, source: [1, 2, 3, 4], into: &short)) { e in
            XCTAssertTrue("\(e)".contains("reaches 9"), "\(e)")
        }
    }

    /// Each backend against the reference on copies that merge, permute, interleave and leave gaps;
    /// the destination starts at a sentinel that must survive outside the view.
    func testEveryBackendWritesExactlyItsView() throws {
        let copies = [
            StridedCopy(dims: [3, 4, 5], source: .contiguous([3, 4, 5]), destination: .init(offset: 2, strides: [41, 10, 2])),
            StridedCopy(dims: [2, 3, 4], source: .init(offset: 1, strides: [13, 1, 3]), destination: .contiguous([2, 3, 4])),
            StridedCopy(dims: [2, 3, 1, 7], source: .contiguous([2, 3, 1, 7]), destination: .init(offset: 0, strides: [63, 21, 0, 1])),
            TransposeGeometry(batch: 3, dims: [2, 7, 1, 9, 4, 3, 5], perm: [6, 0, 5, 2, 1, 4, 3]).stridedCopy,
        ]
        let backends: [Backend] = [ReferenceBackend(), CPUBackend(), OpenCLBackend(context: try OpenCLTestSupport.context())]
        for (n, g) in copies.enumerated() {
            var rng = SplitMix64(seed: UInt64(n + 1))
            let x = (0..<g.sourceExtent).map { _ in rng.nextFloat(in: -1...1) }
            var expected = [Double](repeating: 7.25, count: g.destinationExtent + 3)
            try Reference.stridedCopy(g, source: x.map(Double.init), into: &expected)
            for backend in backends {
                let y = try backend.makeBuffer([Float](repeating: 7.25, count: expected.count))
                try backend.stridedCopy(g, from: try backend.makeBuffer(x), to: y)
                XCTAssertEqual(try backend.download(y).map(Double.init), expected, "\(backend.name) copy \(n)")
            }
        }
    }
}
