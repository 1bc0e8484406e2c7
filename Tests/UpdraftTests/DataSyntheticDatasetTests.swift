import XCTest
@testable import UpdraftData
@testable import UpdraftTraining

/// `SyntheticImageDataset`: the seeded in-memory images behind `updraft-bench epochs`.
final class DataSyntheticDatasetTests: XCTestCase {
    func testShapesRangesAndLabels() throws {
        let data = try SyntheticImageDataset(count: 20, itemShape: [3, 5, 7], classes: 4, seed: 9)
        XCTAssertEqual(data.count, 20)
        XCTAssertEqual(data.byteCount, 20 * 3 * 5 * 7 * 4)
        var labelsSeen = Set<Int>()
        var pixelsSeen = Set<Float>()
        for i in 0..<data.count {
            let e = try data.example(at: i)
            XCTAssertEqual(e.input.shape, [3, 5, 7])
            XCTAssertEqual(e.input.count, 105)
            for p in e.input.data {
                XCTAssertTrue(p >= 0 && p <= 255 && p == p.rounded(), "pixel \(p) is not an 8-bit value")
                pixelsSeen.insert(p)
            }
            guard case let .classIndex(label) = e.target else { return XCTFail("example \(i) has no class index") }
            XCTAssertTrue((0..<4).contains(label))
            XCTAssertEqual(try data.target(at: i), e.target, "target(at:) must agree with example(at:)")
            labelsSeen.insert(label)
        }
        // 2,100 draws of 8-bit values and 20 of 4 labels: a broken generator (constant, stuck bits) shows here.
        XCTAssertGreaterThan(pixelsSeen.count, 200)
        XCTAssertGreaterThan(labelsSeen.count, 1)
        XCTAssertNotEqual(try data.example(at: 0).input, try data.example(at: 1).input)
    }

    func testSeededAndIndependentOfCount() throws {
        let a = try SyntheticImageDataset(count: 6, itemShape: [3, 4, 4], classes: 10, seed: 1)
        let b = try SyntheticImageDataset(count: 6, itemShape: [3, 4, 4], classes: 10, seed: 1)
        let longer = try SyntheticImageDataset(count: 9, itemShape: [3, 4, 4], classes: 10, seed: 1)
        let other = try SyntheticImageDataset(count: 6, itemShape: [3, 4, 4], classes: 10, seed: 2)
        for i in 0..<6 {
            XCTAssertEqual(try a.example(at: i), try b.example(at: i))
            XCTAssertEqual(try a.example(at: i), try longer.example(at: i))
            XCTAssertNotEqual(try a.example(at: i).input, try other.example(at: i).input)
        }
    }

    func testBatchesStackExamples() throws {
        let data = try SyntheticImageDataset(count: 5, itemShape: [1, 2, 3], classes: 3, seed: 4)
        let batch = try data.batch(at: [4, 1])
        XCTAssertEqual(batch.inputs.shape, [2, 1, 2, 3])
        XCTAssertEqual(batch.inputs.data, try data.example(at: 4).input.data + data.example(at: 1).input.data)
        XCTAssertEqual(batch.targets, [try data.target(at: 4), try data.target(at: 1)])
    }

    func testBadArgumentsAndIndicesThrow() throws {
        XCTAssertThrowsError(try SyntheticImageDataset(count: -1, itemShape: [3, 2, 2], classes: 2))
        XCTAssertThrowsError(try SyntheticImageDataset(count: 2, itemShape: [3, 0, 2], classes: 2))
        XCTAssertThrowsError(try SyntheticImageDataset(count: 2, itemShape: [], classes: 2))
        XCTAssertThrowsError(try SyntheticImageDataset(count: 2, itemShape: [3, 2, 2], classes: 0))
        let empty = try SyntheticImageDataset(count: 0, itemShape: [3, 2, 2], classes: 2)
        XCTAssertEqual(empty.count, 0)
        let data = try SyntheticImageDataset(count: 2, itemShape: [3, 2, 2], classes: 2)
        XCTAssertThrowsError(try data.example(at: 2))
        XCTAssertThrowsError(try data.example(at: -1))
        XCTAssertThrowsError(try data.target(at: 2))
    }
}
