import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftData
@testable import UpdraftTraining

/// A unique folder under the system's temporary directory, `<prefix>-<UUID>` (not yet created).
func temporaryFolder(_ prefix: String) -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
}

/// A unique temporary folder, created; the test removes it in its tear-down.
func makeTemporaryFolder(_ prefix: String) throws -> URL {
    let folder = temporaryFolder(prefix)
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    return folder
}

/// An image folder of two classes, "no" (dark) and "yes" (bright), each of `perLabel` noisy 16x16
/// RGB PNGs drawn from `seed`: the data of the command-line training tests.
func writeNoisyImageFolder(_ data: URL, perLabel: Int, seed: UInt64) {
    let fm = FileManager.default
    var rng = SplitMix64(seed: seed)
    for (label, base) in [("no", 40), ("yes", 200)] {
        let dir = data.appendingPathComponent(label)
        try? fm.createDirectory(at: dir, withIntermediateDirectories: true)
        for i in 0..<perLabel {
            let pixels = (0..<16 * 16 * 3).map { _ in UInt8(clamping: base + Int(rng.next() % 50)) }
            if let png = try? ImageEncoder.png(width: 16, height: 16, colorType: .rgb, samples: pixels) {
                _ = fm.createFile(atPath: dir.appendingPathComponent("\(i).png").path, contents: Data(png))
            }
        }
    }
}

/// The files of a command-line training test, under one temporary folder: `data` (an image
/// folder), `cache` (the calibration cache) and `noOpenCL` (an empty ICD vendors folder: with
/// OCL_ICD_VENDORS pointed at it, OpenCL has no platform); `model` is the tiny image classifier.
struct CommandTestFiles {
    let root: URL
    init(_ prefix: String) { root = temporaryFolder(prefix) }
    var data: URL { root.appendingPathComponent("data") }
    var cache: URL { root.appendingPathComponent("cache") }
    var noOpenCL: URL { root.appendingPathComponent("no-icd") }
    var model: String { Fixtures.url("conv_image_classifier.mlmodel").path }
    /// `<root>/<name>`.
    func file(_ name: String) -> URL { root.appendingPathComponent(name) }
    func remove() { try? FileManager.default.removeItem(at: root) }
}

/// A test case with a fresh temporary folder for each test (`folder`, named after the class),
/// removed after the test.
class FolderTestCase: XCTestCase {
    var folder: URL!
    override func setUpWithError() throws {
        try super.setUpWithError()
        folder = try makeTemporaryFolder("updraft-\(String(describing: Self.self))")
    }
    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: folder)
        try super.tearDownWithError()
    }
}
