import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftData
@testable import UpdraftTraining

/// Issue 13, findings 6 and 7: decompression bombs are refused on their header, decode memory is
/// bounded across threads, and only regular files are read (a FIFO never blocks).
final class DataDecodingLimitsTests: XCTestCase {
    /// A PNG that declares `width` x `height` RGB pixels: a valid IHDR (with its CRC) and nothing
    /// more, so a decoder that trusted it would allocate width * height * 3 bytes.
    static func pngHeader(width: UInt32, height: UInt32) -> [UInt8] {
        func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        let body: [UInt8] = Array("IHDR".utf8) + be32(width) + be32(height) + [8, 2, 0, 0, 0]
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in body {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + be32(13) + body + be32(crc ^ 0xFFFF_FFFF)
    }

    /// A baseline JPEG that declares `width` x `height` (SOI, SOF0 with three components, EOI).
    static func jpegHeader(width: UInt16, height: UInt16) -> [UInt8] {
        [0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08, UInt8(height >> 8), UInt8(height & 0xFF), UInt8(width >> 8), UInt8(width & 0xFF),
         0x03, 0x01, 0x22, 0x00, 0x02, 0x11, 0x01, 0x03, 0x11, 0x01, 0xFF, 0xD9]
    }

    func testBombsAreRefusedOnTheirHeaderAndTheCapCanBeRaised() throws {
        let folder = try DataTestFolder()
        // The bomb: 18900 x 18900 = 357 M pixels, over Pillow's 89.5 M.
        let png = try folder.write(Self.pngHeader(width: 18900, height: 18900), to: "bomb.png")
        let jpeg = try folder.write(Self.jpegHeader(width: 60000, height: 60000), to: "bomb.jpg")
        for url in [png, jpeg] {
            XCTAssertThrowsError(try DecodedImage(contentsOfFile: url.path, limits: .default)) { error in
                XCTAssertEqual((error as? UpdraftError)?.kind, .unsupported)
                XCTAssertTrue("\(error)".contains("over the cap of 89478485"), "\(error)")
                XCTAssertTrue("\(error)".contains("--max-image-pixels"), "the way out is named: \(error)")
                XCTAssertTrue("\(error)".contains(url.path), "\(error)")
            }
            XCTAssertThrowsError(try ImageHeader(contentsOfFile: url.path)) { error in
                XCTAssertTrue("\(error)".contains("over the cap"), "\(error)")
            }
            // The in-memory and legacy entry points apply the same default cap.
            XCTAssertThrowsError(try DecodedImage(contentsOf: url)) { XCTAssertTrue("\($0)".contains("over the cap"), "\($0)") }
        }
        // Raised, the header passes and the decoder then finds the data missing (no pixels were allocated).
        let raised = ImageDecodingLimits(maxPixels: 400_000_000)
        XCTAssertEqual(try ImageHeader(contentsOfFile: png.path, limits: raised).width, 18900)
        XCTAssertThrowsError(try DecodedImage(contentsOfFile: png.path, limits: raised)) { error in
            XCTAssertEqual((error as? UpdraftError)?.kind, .data, "\(error)")
        }
        // A small cap refuses an ordinary image when the data set reads it (or, skipping unreadable
        // images, at listing).
        let small = try ImageEncoder.png(width: 10, height: 10, colorType: .gray, samples: [UInt8](repeating: 9, count: 100))
        try folder.write(small, to: "set/a/0.png")
        let pre = ImagePreprocessing(width: 2, height: 2, colorSpace: .grayscale)
        let set = folder.url.appendingPathComponent("set")
        XCTAssertThrowsError(try ImageFolderDataset(root: set, preprocessing: pre, limits: ImageDecodingLimits(maxPixels: 99))
            .example(at: 0)) { error in
            XCTAssertTrue("\(error)".contains("over the cap of 99"), "\(error)")
        }
        XCTAssertThrowsError(try ImageFolderDataset(root: set, preprocessing: pre, skipUnreadable: true,
                                                    limits: ImageDecodingLimits(maxPixels: 99))) { error in
            XCTAssertTrue("\(error)".contains("could be decoded"), "\(error)")
        }
        XCTAssertEqual(try ImageFolderDataset(root: set, preprocessing: pre, limits: ImageDecodingLimits(maxPixels: 100))
            .example(at: 0).input.count, 4)
        XCTAssertThrowsError(try ImageDecodingLimits(maxPixels: 0).validate())
    }

    /// A FIFO named x.png, and links to /dev/zero and to a folder, are skipped with one warning each
    /// while listing (nothing opens them), with or without skipUnreadable; decoding one directly is
    /// refused at once rather than blocking.
    func testOnlyRegularFilesAreRead() throws {
        let folder = try DataTestFolder()
        let good = try ImageEncoder.png(width: 1, height: 1, colorType: .gray, samples: [5])
        try folder.write(good, to: "a/0.png")
        let fifo = folder.url.appendingPathComponent("a/x.png")
        XCTAssertEqual(mkfifo(fifo.path, 0o600), 0)
        try FileManager.default.createSymbolicLink(atPath: folder.url.appendingPathComponent("a/zero.png").path,
                                                   withDestinationPath: "/dev/zero")
        let pre = ImagePreprocessing(width: 1, height: 1, colorSpace: .grayscale)
        for skip in [false, true] {
            let dataset = try ImageFolderDataset(root: folder.url, preprocessing: pre, skipUnreadable: skip)
            XCTAssertEqual(dataset.count, 1)
            XCTAssertEqual(try dataset.example(at: 0).input.data, [5])
            XCTAssertEqual(dataset.warnings.count, 2, "\(dataset.warnings)")
            XCTAssertTrue(dataset.warnings.contains { $0.contains("'a/x.png': a FIFO") }, "\(dataset.warnings)")
            XCTAssertTrue(dataset.warnings.contains { $0.contains("'a/zero.png': a character device") }, "\(dataset.warnings)")
        }
        for path in [fifo.path, "/dev/zero", folder.url.path] {
            XCTAssertThrowsError(try DecodedImage(contentsOfFile: path, limits: .default)) { error in
                XCTAssertEqual((error as? UpdraftError)?.kind, .io)
                XCTAssertTrue("\(error)".contains("not a regular file"), "\(error)")
            }
            XCTAssertThrowsError(try DecodedImage(contentsOfFile: path)) { XCTAssertTrue("\($0)".contains("not a regular file")) }
        }
    }

    /// Decodes reserve their header's estimate of a shared budget: never more than the budget at once,
    /// and a reservation larger than the budget runs alone instead of failing.
    func testDecodeMemoryBudgetBoundsConcurrentReservations() {
        let budget = DecodeMemoryBudget(bytes: 1000)
        let load = Locked((inside: 0, peak: 0))
        DispatchQueue.concurrentPerform(iterations: 24) { i in
            let amount = i % 6 == 0 ? 5000 : 400
            budget.withReservation(amount) {
                load.mutate { $0.inside += min(amount, 1000); $0.peak = max($0.peak, $0.inside) }
                usleep(2000)
                load.mutate { $0.inside -= min(amount, 1000) }
            }
        }
        XCTAssertLessThanOrEqual(load.value.peak, 1000)
        XCTAssertLessThanOrEqual(budget.peakReserved, 1000)
        XCTAssertGreaterThan(budget.peakReserved, 0)
    }

    /// JPEG DCT scaling: a 64x48 photo wanted at 16x12 or more decodes at 1/4, and still looks like it.
    func testJPEGDecodesAtAReducedScaleWhenThatCoversTheTarget() throws {
        var pixels = [UInt8](repeating: 0, count: 64 * 48 * 3)
        for y in 0..<48 { for x in 0..<64 { for c in 0..<3 { pixels[(y * 64 + x) * 3 + c] = UInt8((x * 4 + c * 40) % 256) } } }
        let jpeg = try ImageEncoder.jpeg(DecodedImage(width: 64, height: 48, channels: 3, pixels: pixels), quality: 95)
        let full = try DecodedImage(data: Data(jpeg), name: "photo", limits: .default)
        XCTAssertEqual([full.width, full.height], [64, 48])
        let quarter = try DecodedImage(data: Data(jpeg), name: "photo", limits: .default, atLeast: (16, 12))
        XCTAssertEqual([quarter.width, quarter.height], [16, 12])
        let half = try DecodedImage(data: Data(jpeg), name: "photo", limits: .default, atLeast: (20, 12))
        XCTAssertEqual([half.width, half.height], [32, 24])
        // Column 8 at 1/4 covers source columns 32...35 (red 128...140).
        XCTAssertEqual(Double(quarter[8, 6, 0]), 134, accuracy: 8)
    }
}
