import Foundation
import XCTest
@testable import Updraft

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

    func testLoadsForAnRGBModelInput() throws {
        // The demo's path: gray 8x8 digits into a larger RGB input with a scaler.
        let pre = ImagePreprocessing(width: 16, height: 16, colorSpace: .rgb, scaler: .init(channelScale: 1 / 255.0))
        let validation = try ImageFolderDataset(root: Self.root.appendingPathComponent("validation"), preprocessing: pre,
                                                classLabels: Self.labels)
        let example = try validation.example(at: 0)
        XCTAssertEqual(example.input.shape, [3, 16, 16])
        XCTAssertEqual(example.target, .classIndex(0))
        XCTAssertEqual(Array(example.input.data[0..<256]), Array(example.input.data[256..<512]), "gray fills every channel")
        XCTAssertTrue(example.input.data.allSatisfy { $0 >= 0 && $0 <= 1 })
        let batch = try validation.batch(at: 0..<4)
        XCTAssertEqual(batch.inputs.shape, [4, 3, 16, 16])
    }
}
