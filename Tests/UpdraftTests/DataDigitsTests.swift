import Foundation
import XCTest
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// The committed demo dataset (Tests/Data/digits, written by Tests/Scripts/make_digits.py).
final class DataDigitsTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Data/digits", isDirectory: true)
    /// Images per digit in sklearn's load_digits() (numpy.bincount(load_digits().target)).
    static let sklearnCounts = [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    static let labels = (0...9).map(String.init)

    func testSplitsHaveTheDocumentedCountsPerClass() throws {
        let pre = ImagePreprocessing(width: 8, height: 8, colorSpace: .grayscale)
        let train = try ImageFolderDataset(root: Self.root.appendingPathComponent("train"), preprocessing: pre, classLabels: Self.labels)
        let validation = try ImageFolderDataset(root: Self.root.appendingPathComponent("validation"), preprocessing: pre,
                                                classLabels: Self.labels)
        XCTAssertEqual(train.warnings, [])
        XCTAssertEqual(validation.warnings, [])
        // The script puts round(0.2 * n) of each class in validation.
        let expectedValidation = Self.sklearnCounts.map { Int((0.2 * Double($0)).rounded()) }
        XCTAssertEqual(validation.countsPerClass, expectedValidation)
        XCTAssertEqual(train.countsPerClass, zip(Self.sklearnCounts, expectedValidation).map { $0 - $1 })
        XCTAssertEqual(train.count + validation.count, 1797)

        // No image is in both splits (file names are the sklearn index).
        let trainNames = Set(train.files.map(\.lastPathComponent))
        XCTAssertTrue(trainNames.isDisjoint(with: validation.files.map(\.lastPathComponent)))
        XCTAssertEqual(trainNames.count, train.count)

        // Pixels are sklearn's 0...16 scaled by 255/16: only those 17 levels appear, and both ends do.
        let levels = Set((0...16).map { UInt8((Double($0) * 255 / 16).rounded()) })
        var seen = Set<UInt8>()
        for i in stride(from: 0, to: train.count, by: 7) { seen.formUnion(try train.preparedImage(at: i).samples) }
        XCTAssertTrue(seen.isSubset(of: levels), "unexpected levels \(seen.subtracting(levels).sorted())")
        XCTAssertTrue(seen.contains(0) && seen.contains(255))
    }

    func testLoadsForTheDemoSqueezeNetInput() throws {
        // The demo's path: the model says what it wants (RGB, scaled by 1/255), the folders map to its labels.
        let model = try SqueezeNet.build(.init(labels: (0...9).map(String.init), inputSize: 40))
        let pre = try ImagePreprocessing(model: model)
        XCTAssertEqual(pre.colorSpace, .rgb)
        XCTAssertEqual(pre.tensorShape, [3, 40, 40])
        XCTAssertEqual(pre.scaler.channelScale, 1 / 255.0, accuracy: 1e-9)
        let labels = try XCTUnwrap(model.classLabels).asStrings
        let validation = try ImageFolderDataset(root: Self.root.appendingPathComponent("validation"), preprocessing: pre,
                                                classLabels: labels)
        XCTAssertEqual(validation.count, 359)
        let example = try validation.example(at: 0)
        XCTAssertEqual(example.input.shape, [3, 40, 40])
        XCTAssertEqual(example.target, .classIndex(0))
        XCTAssertEqual(Array(example.input.data[0..<1600]), Array(example.input.data[1600..<3200]), "gray fills every channel")
        XCTAssertTrue(example.input.data.allSatisfy { $0 >= 0 && $0 <= 1 })
        XCTAssertTrue(example.input.data.contains { $0 > 0.5 }, "the digit's strokes are there")
        let batch = try validation.batch(at: 0..<4)
        XCTAssertEqual(batch.inputs.shape, [4, 3, 40, 40])
    }
}
