import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftData
@testable import UpdraftTraining

final class DataImageFolderTests: XCTestCase {
    private let gray1x1 = ImagePreprocessing(width: 1, height: 1, colorSpace: .grayscale)

    /// A 1x1 gray PNG whose one pixel is `value`, so each example is identifiable from its tensor.
    private func pixelPNG(_ value: UInt8) throws -> [UInt8] {
        try ImageEncoder.png(width: 1, height: 1, colorType: .gray, samples: [value])
    }

    private func pixelJPEG(_ value: UInt8) throws -> [UInt8] {
        // 8x8 flat, so the JPEG keeps the value; the dataset resizes it to 1x1.
        try ImageEncoder.jpeg(DecodedImage(width: 8, height: 8, channels: 1, pixels: [UInt8](repeating: value, count: 64)), quality: 100)
    }

    func testOrderingFilteringAndLabelMapping() throws {
        let folder = try DataTestFolder()
        // Written out of order; names chosen so byte-wise order differs from numeric or case-folded order.
        try folder.write(try pixelPNG(30), to: "b/2.png")
        try folder.write(try pixelPNG(10), to: "b/10.png")
        try folder.write(try pixelPNG(20), to: "b/1.PNG")
        try folder.write(try pixelJPEG(40), to: "b/x.JPeG")
        try folder.write(try pixelPNG(50), to: "a/only.jpg")  // a PNG named .jpg: decoded by content
        try folder.write(try pixelPNG(60), to: "c/A.png")
        try folder.write(try pixelPNG(70), to: "c/a.png")
        try folder.write(try pixelPNG(99), to: "b/.hidden.png")
        try folder.write(try pixelPNG(99), to: ".hiddenclass/z.png")
        try folder.write(Array("notes".utf8), to: "b/notes.txt")
        try folder.write(Array("readme".utf8), to: "README.md")
        try folder.write(try pixelPNG(99), to: "c/nested/deep.png")

        let dataset = try ImageFolderDataset(root: folder.url, preprocessing: gray1x1, classLabels: ["c", "a", "b", "unused"])
        XCTAssertEqual(dataset.files.map { "\($0.deletingLastPathComponent().lastPathComponent)/\($0.lastPathComponent)" },
                       ["a/only.jpg", "b/1.PNG", "b/10.png", "b/2.png", "b/x.JPeG", "c/A.png", "c/a.png"])
        XCTAssertEqual(dataset.classIndices, [1, 2, 2, 2, 2, 0, 0])
        XCTAssertEqual(dataset.countsPerClass, [2, 1, 4, 0])
        XCTAssertEqual(dataset.count, 7)

        let values = try (0..<dataset.count).map { try dataset.example(at: $0).input.data[0] }
        XCTAssertEqual(Array(values.prefix(4)), [50, 20, 10, 30])
        XCTAssertEqual(values[4], 40, accuracy: 2)
        XCTAssertEqual(Array(values.suffix(2)), [60, 70])
        XCTAssertEqual(try dataset.example(at: 2).target, .classIndex(2))
        XCTAssertThrowsError(try dataset.example(at: 7))

        let warnings = dataset.warnings.joined(separator: "\n")
        XCTAssertTrue(warnings.contains("notes.txt"), warnings)
        XCTAssertTrue(warnings.contains("README.md"), warnings)
        XCTAssertTrue(warnings.contains("nested"), warnings)
        XCTAssertFalse(warnings.contains("hidden"), "hidden entries are ignored silently")
        XCTAssertEqual(dataset.warnings.count, 3)
    }

    func testLabelsDefaultToSortedFolderNames() throws {
        let folder = try DataTestFolder()
        for (name, value) in [("zebra", 1), ("Ant", 2), ("bee", 3)] {
            try folder.write(try pixelPNG(UInt8(value)), to: "\(name)/0.png")
        }
        let dataset = try ImageFolderDataset(root: folder.url, preprocessing: gray1x1)
        XCTAssertEqual(dataset.classLabels, ["Ant", "bee", "zebra"])
        XCTAssertEqual(dataset.classIndices, [0, 1, 2])
        XCTAssertTrue(dataset.summary.contains("3 images in 3 classes"), dataset.summary)
    }

    func testFolderWithoutLabelIsAnErrorNamingItAndTheLabels() throws {
        let folder = try DataTestFolder()
        try folder.write(try pixelPNG(1), to: "cat/0.png")
        try folder.write(try pixelPNG(2), to: "Dog/0.png")
        XCTAssertThrowsError(try ImageFolderDataset(root: folder.url, preprocessing: gray1x1, classLabels: ["cat", "dog", "bird"])) { error in
            let text = "\(error)"
            XCTAssertEqual((error as? UpdraftError)?.kind, .data)
            XCTAssertTrue(text.contains("'Dog'"), text)
            XCTAssertFalse(text.contains("'cat' in"), "only the unmatched folder is named: \(text)")
            for label in ["'cat'", "'dog'", "'bird'"] { XCTAssertTrue(text.contains(label), text) }
            XCTAssertTrue(text.contains("case-sensitive"), text)
        }
    }

    /// Streaming: listing opens nothing, so a damaged file (past its header or inside it) is found
    /// when its example is read, naming it — unless `skipUnreadable`, which decodes every image once
    /// at listing and skips the bad ones with a warning.
    func testUnreadableImageThrowsOrIsSkipped() throws {
        let folder = try DataTestFolder()
        try folder.write(try pixelPNG(11), to: "a/0.png")
        let png = try pixelPNG(22)
        let broken = try folder.write(Array(png.prefix(png.count - 12)), to: "a/1-broken.png")
        try folder.write(try pixelPNG(33), to: "b/0.png")

        let streaming = try ImageFolderDataset(root: folder.url, preprocessing: gray1x1)
        XCTAssertEqual(streaming.count, 3)
        XCTAssertThrowsError(try streaming.example(at: 1)) { error in
            XCTAssertTrue("\(error)".contains(broken.path), "\(error)")
        }
        let dataset = try ImageFolderDataset(root: folder.url, preprocessing: gray1x1, skipUnreadable: true)
        XCTAssertEqual(dataset.count, 2)
        XCTAssertEqual(dataset.classIndices, [0, 1])
        XCTAssertEqual(try dataset.example(at: 1).input.data, [33])
        XCTAssertEqual(dataset.warnings.count, 1)
        XCTAssertTrue(dataset.warnings[0].contains(broken.path), dataset.warnings[0])

        let header = try folder.write(Array(png.prefix(20)), to: "b/2-header.png")
        let listed = try ImageFolderDataset(root: folder.url, preprocessing: gray1x1)
        XCTAssertEqual(listed.count, 4)
        XCTAssertThrowsError(try listed.example(at: 3)) { error in
            XCTAssertTrue("\(error)".contains(header.path), "\(error)")
        }
        XCTAssertEqual(try ImageFolderDataset(root: folder.url, preprocessing: gray1x1, skipUnreadable: true).count, 2)
    }

    func testEmptyAndMissingFoldersThrow() throws {
        let folder = try DataTestFolder()
        XCTAssertThrowsError(try ImageFolderDataset(root: folder.url, preprocessing: gray1x1)) { error in
            XCTAssertTrue("\(error)".contains("no class subfolders"), "\(error)")
        }
        try folder.write(Array("x".utf8), to: "a/notes.txt")
        XCTAssertThrowsError(try ImageFolderDataset(root: folder.url, preprocessing: gray1x1)) { error in
            XCTAssertTrue("\(error)".contains("no images"), "\(error)")
        }
        let missing = folder.url.appendingPathComponent("missing")
        XCTAssertThrowsError(try ImageFolderDataset(root: missing, preprocessing: gray1x1)) { error in
            XCTAssertEqual((error as? UpdraftError)?.kind, .io)
            XCTAssertTrue("\(error)".contains(missing.path))
        }
    }

    func testImagesArePreparedToTheModelInput() throws {
        let folder = try DataTestFolder()
        let rgb = DecodedImage(width: 2, height: 2, channels: 3, pixels: [255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30])
        try folder.write(try ImageEncoder.png(rgb), to: "x/0.png")
        let pre = ImagePreprocessing(width: 4, height: 3, colorSpace: .bgr, scaler: .init(channelScale: 2, blueBias: 1))
        let dataset = try ImageFolderDataset(root: folder.url, preprocessing: pre)
        let example = try dataset.example(at: 0)
        XCTAssertEqual(example.input, pre.tensor(from: rgb))
        XCTAssertEqual(example.input.shape, [3, 3, 4])
        XCTAssertEqual(try dataset.preparedImage(at: 0), pre.prepare(rgb))
    }
}
