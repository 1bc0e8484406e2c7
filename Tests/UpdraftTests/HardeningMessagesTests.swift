import XCTest
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// Issue 13, finding 10: each message names the file or field and the way out (no Swift
/// internals, no NSCocoaErrorDomain, no blame on an option nobody gave).
final class HardeningMessagesTests: FolderTestCase {
    private var classifier: CoreMLModel { get throws { try CoreMLModel(contentsOf: Fixtures.url("dense_sgd_classifier.mlmodel")) } }

    /// `{'descr': '<f4', 'fortran_order': False, 'shape': SHAPE, }` and `count` float32 zeros.
    private func npy(shape: String, descr: String = "<f4", count: Int) -> Data {
        var header = "{'descr': '\(descr)', 'fortran_order': False, 'shape': \(shape), }"
        header += String(repeating: " ", count: 127 - (10 + header.count) % 128) + "\n"
        var d = Data([0x93] + Array("NUMPY".utf8) + [1, 0, UInt8(header.utf8.count & 0xFF), UInt8(header.utf8.count >> 8)])
        d += Data(header.utf8)
        d += Data(count: count * 4)
        return d
    }

    private func floats(_ values: [Float]) -> Data {
        var d = npy(shape: "(\(values.count),)", count: 0)
        for v in values { withUnsafeBytes(of: v.bitPattern.littleEndian) { d += Data($0) } }
        return d
    }

    func testNegativeNpyDimensionIsWrittenAsPython() throws {
        try npy(shape: "(-8, 4)", count: 0).write(to: folder.appendingPathComponent("inputs.npy"))
        try floats([0, 1]).write(to: folder.appendingPathComponent("targets.npy"))
        XCTAssertThrowsError(try ModelDataset(model: try classifier, path: folder)) { e in
            XCTAssertTrue("\(e)".contains("inputs.npy: the .npy shape (-8, 4) is not a tuple of non-negative integers"), "\(e)")
            XCTAssertFalse("\(e)".contains("PythonLiteralParser"), "\(e)")
        }
    }

    func testFractionalClassTargetIsRefusedWhenLoading() throws {
        try npy(shape: "(3, 4)", count: 12).write(to: folder.appendingPathComponent("inputs.npy"))
        try floats([1, 0.5, 2]).write(to: folder.appendingPathComponent("targets.npy"))
        XCTAssertThrowsError(try ModelDataset(model: try classifier, path: folder)) { e in
            XCTAssertTrue("\(e)".contains("targets.npy: target 1 is 0.5, not a class index"), "\(e)")
        }
        // Whole floats are class indices.
        try floats([1, 0, 2]).write(to: folder.appendingPathComponent("targets.npy"))
        let ds = try ModelDataset(model: try classifier, path: folder)
        XCTAssertEqual(try ds.provider.target(at: 2), .classIndex(2))
    }

    func testTargetsFolderIsNamed() throws {
        try npy(shape: "(3, 4)", count: 12).write(to: folder.appendingPathComponent("inputs.npy"))
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("targets.npy"), withIntermediateDirectories: true)
        XCTAssertThrowsError(try ModelDataset(model: try classifier, path: folder)) { e in
            XCTAssertTrue("\(e)".contains("targets.npy: it is a folder, not a file"), "\(e)")
            XCTAssertFalse("\(e)".contains("NSCocoaErrorDomain"), "\(e)")
        }
    }

    func testNonUTF8FileNameIsNamedAsSuch() throws {
        // "caf\xE9.mlmodel": Latin-1, not UTF-8. Swift sees the name with U+FFFD.
        let bytes: [UInt8] = Array(folder.path.utf8) + Array("/caf".utf8) + [0xE9] + Array(".mlmodel".utf8) + [0]
        let fd = bytes.withUnsafeBufferPointer { open(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), O_WRONLY | O_CREAT, 0o644) }
        XCTAssertGreaterThanOrEqual(fd, 0)
        close(fd)
        let seen = String(decoding: bytes.dropLast(), as: UTF8.self)
        XCTAssertThrowsError(try CoreMLModel(contentsOf: URL(fileURLWithPath: seen))) { e in
            XCTAssertTrue("\(e)".contains("its name is not valid UTF-8"), "\(e)")
            XCTAssertFalse("\(e)".contains("doesn’t exist") || "\(e)".contains("No such file"), "\(e)")
        }
        XCTAssertThrowsError(try CoreMLModel(contentsOf: folder.appendingPathComponent("missing.mlmodel"))) { e in
            XCTAssertTrue("\(e)".contains("it does not exist"), "\(e)")
        }
    }

    func testEmptyClassFolderIsAWarning() throws {
        for label in ["no", "yes"] {
            try FileManager.default.createDirectory(at: folder.appendingPathComponent(label), withIntermediateDirectories: true)
        }
        let png = try ImageEncoder.png(width: 16, height: 16, colorType: .rgb, samples: [UInt8](repeating: 9, count: 768))
        XCTAssertTrue(FileManager.default.createFile(atPath: folder.appendingPathComponent("no/a.png").path, contents: Data(png)))
        let ds = try ModelDataset(model: try CoreMLModel(contentsOf: Fixtures.url("conv_image_classifier.mlmodel")), path: folder)
        XCTAssertTrue(ds.warnings.contains { $0.contains("class folder 'yes'") && $0.contains("has no images") }, "\(ds.warnings)")
    }
}
