import XCTest
@testable import UpdraftCore
@testable import UpdraftData
@testable import UpdraftTraining

final class DataAugmentationTests: XCTestCase {
    /// [2, 2, 3]: two planes of 2 rows x 3 columns, values 0...11.
    private let tensor = Tensor(shape: [2, 2, 3], data: (0..<12).map(Float.init))

    func testFlipsMirrorEveryPlane() {
        let h = ImageAugmentation.flipped(tensor, horizontal: true, vertical: false)
        XCTAssertEqual(h.data, [2, 1, 0, 5, 4, 3, 8, 7, 6, 11, 10, 9])
        let v = ImageAugmentation.flipped(tensor, horizontal: false, vertical: true)
        XCTAssertEqual(v.data, [3, 4, 5, 0, 1, 2, 9, 10, 11, 6, 7, 8])
        let both = ImageAugmentation.flipped(tensor, horizontal: true, vertical: true)
        XCTAssertEqual(both.data, [5, 4, 3, 2, 1, 0, 11, 10, 9, 8, 7, 6])
        XCTAssertEqual(both.shape, tensor.shape)
    }

    func testDeterministicForSeedEpochAndIndex() throws {
        let a = ImageAugmentation(horizontalFlip: true, verticalFlip: true, seed: 42)
        let b = ImageAugmentation(horizontalFlip: true, verticalFlip: true, seed: 42)
        for epoch in 0..<3 {
            for index in 0..<50 {
                XCTAssertEqual(try a.apply(to: tensor, epoch: epoch, index: index),
                               try b.apply(to: tensor, epoch: epoch, index: index))
            }
        }
        // Drawing in another order gives the same answers.
        let forward = (0..<100).map { a.flips(epoch: 1, index: $0).horizontal }
        let backward = (0..<100).reversed().map { a.flips(epoch: 1, index: $0).horizontal }
        XCTAssertEqual(forward, backward.reversed())
    }

    func testChoicesVaryWithSeedEpochAndIndexAndAreFair() {
        let aug = ImageAugmentation(horizontalFlip: true, verticalFlip: true, seed: 1)
        let pattern = { (aug: ImageAugmentation, epoch: Int) in (0..<200).map { aug.flips(epoch: epoch, index: $0).horizontal } }
        XCTAssertNotEqual(pattern(aug, 0), pattern(aug, 1), "epochs differ")
        XCTAssertNotEqual(pattern(aug, 0), pattern(ImageAugmentation(horizontalFlip: true, seed: 2), 0), "seeds differ")
        let draws = (0..<2000).map { aug.flips(epoch: 3, index: $0) }
        let horizontal = draws.filter(\.horizontal).count, vertical = draws.filter(\.vertical).count
        let both = draws.filter { $0.horizontal && $0.vertical }.count
        XCTAssertTrue((900...1100).contains(horizontal), "\(horizontal) horizontal flips of 2000")
        XCTAssertTrue((900...1100).contains(vertical), "\(vertical) vertical flips of 2000")
        XCTAssertTrue((400...600).contains(both), "\(both) double flips of 2000: the coins are independent")
    }

    func testDisabledFlipsNeverHappenAndDoNotShiftTheOthers() {
        let both = ImageAugmentation(horizontalFlip: true, verticalFlip: true, seed: 9)
        let verticalOnly = ImageAugmentation(horizontalFlip: false, verticalFlip: true, seed: 9)
        for index in 0..<100 {
            XCTAssertFalse(verticalOnly.flips(epoch: 0, index: index).horizontal)
            XCTAssertEqual(verticalOnly.flips(epoch: 0, index: index).vertical, both.flips(epoch: 0, index: index).vertical)
            XCTAssertFalse(ImageAugmentation.none.flips(epoch: 0, index: index).vertical)
        }
    }

    func testAugmentedProviderFlipsInputsAndKeepsTargets() throws {
        let base = try ArrayBatchProvider(inputs: [tensor, tensor, tensor, tensor], targets: (0..<4).map { .classIndex($0) })
        let aug = ImageAugmentation(horizontalFlip: true, verticalFlip: true, seed: 5)
        let provider = AugmentedBatchProvider(base, augmentation: aug).forEpoch(2)
        XCTAssertEqual(provider.count, 4)
        for index in 0..<4 {
            let example = try provider.example(at: index)
            let flips = aug.flips(epoch: 2, index: index)
            XCTAssertEqual(example.input, ImageAugmentation.flipped(tensor, horizontal: flips.horizontal, vertical: flips.vertical))
            XCTAssertEqual(example.target, .classIndex(index))
        }
        // A vector cannot be flipped: an error, not a crash, when a flip is drawn for it.
        let flipped = (0..<64).first { aug.flips(epoch: 0, index: $0) != (false, false) }
        let index = try XCTUnwrap(flipped)
        XCTAssertThrowsError(try aug.apply(to: Tensor(shape: [3], data: [1, 2, 3]), epoch: 0, index: index))
    }
}
