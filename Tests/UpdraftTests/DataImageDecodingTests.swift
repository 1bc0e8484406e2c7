import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftData
@testable import UpdraftTraining

/// Files for the data tests: a fresh temporary folder per test case, removed afterwards.
final class DataTestFolder {
    let url: URL

    init(_ name: String = #function) throws {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("updraft-data-tests-\(safe)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    /// Writes `bytes` at `relativePath`, creating folders as needed, and returns its URL.
    @discardableResult
    func write(_ bytes: [UInt8], to relativePath: String) throws -> URL {
        let file = url.appendingPathComponent(relativePath)
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(bytes).write(to: file)
        return file
    }
}

/// `count` bytes (i * step + offset) mod 256: a pattern with every value distinguishable.
func bytePattern(_ count: Int, step: Int, offset: Int = 0) -> [UInt8] {
    (0..<count).map { (i: Int) -> UInt8 in UInt8((i * step + offset) % 256) }
}

/// round(x * a / 255), the compositing over black the decoder documents.
func premultiplied(_ x: Int, _ a: Int) -> UInt8 { UInt8((Double(x * a) / 255).rounded()) }

final class DataImageDecodingTests: XCTestCase {
    private func decode(_ bytes: [UInt8]) throws -> DecodedImage { try DecodedImage(bytes: bytes, name: "test.png") }

    func testGray8PNGRoundTrips() throws {
        let samples: [UInt8] = [0, 1, 2, 127, 128, 255]
        let image = try decode(try ImageEncoder.png(width: 3, height: 2, colorType: .gray, samples: samples))
        XCTAssertEqual(image.width, 3)
        XCTAssertEqual(image.height, 2)
        XCTAssertEqual(image.channels, 1)
        XCTAssertEqual(image.pixels, samples)
        XCTAssertEqual(image.format, .png)
        XCTAssertFalse(image.hadAlpha)
        XCTAssertEqual(image[2, 1, 0], 255)
    }

    func testRGB8PNGRoundTrips() throws {
        let samples = bytePattern(4 * 3 * 3, step: 37)
        let image = try decode(try ImageEncoder.png(width: 4, height: 3, colorType: .rgb, samples: samples))
        XCTAssertEqual(image.channels, 3)
        XCTAssertEqual(image.pixels, samples)
        XCTAssertEqual(image[1, 2, 2], samples[(2 * 4 + 1) * 3 + 2])
    }

    func testInterlacedPNGDecodesLikeNonInterlaced() throws {
        let samples = bytePattern(9 * 7 * 3, step: 91, offset: 7)
        let image = try decode(try ImageEncoder.png(width: 9, height: 7, colorType: .rgb, samples: samples, interlaced: true))
        XCTAssertEqual(image.pixels, samples)
    }

    func testRGBAPNGIsCompositedOverBlack() throws {
        let rgba: [UInt8] = [200, 100, 50, 255, 200, 100, 50, 128, 200, 100, 50, 0, 10, 250, 33, 77]
        let image = try decode(try ImageEncoder.png(width: 2, height: 2, colorType: .rgba, samples: rgba))
        XCTAssertEqual(image.channels, 3)
        XCTAssertTrue(image.hadAlpha)
        var expected: [UInt8] = []
        for p in 0..<4 {
            for c in 0..<3 { expected.append(premultiplied(Int(rgba[4 * p + c]), Int(rgba[4 * p + 3]))) }
        }
        XCTAssertEqual(image.pixels, expected)
        XCTAssertEqual(Array(image.pixels[0..<3]), [200, 100, 50], "opaque pixels are unchanged")
        XCTAssertEqual(Array(image.pixels[6..<9]), [0, 0, 0], "transparent pixels become black")
    }

    func testGrayAlphaPNGBecomesGray() throws {
        let samples: [UInt8] = [255, 255, 255, 51, 90, 0]
        let image = try decode(try ImageEncoder.png(width: 3, height: 1, colorType: .grayAlpha, samples: samples))
        XCTAssertEqual(image.channels, 1)
        XCTAssertEqual(image.pixels, [255, premultiplied(255, 51), 0])
    }

    func testPalettePNGExpandsToRGBWithTransparency() throws {
        let palette: [UInt8] = [255, 0, 0, 0, 255, 0, 0, 0, 255, 12, 34, 56]
        let alpha: [UInt8] = [255, 128]  // entries 2 and 3 are opaque
        let indices: [UInt8] = [0, 1, 2, 3, 3, 2, 1, 0]
        let image = try decode(try ImageEncoder.png(width: 4, height: 2, colorType: .palette, samples: indices,
                                                    palette: palette, paletteAlpha: alpha))
        XCTAssertEqual(image.channels, 3)
        XCTAssertTrue(image.hadAlpha)
        var expected: [UInt8] = []
        for i in indices.map(Int.init) {
            let a = i < alpha.count ? Int(alpha[i]) : 255
            for c in 0..<3 { expected.append(premultiplied(Int(palette[3 * i + c]), a)) }
        }
        XCTAssertEqual(image.pixels, expected)
    }

    func testTwoBitPalettePNG() throws {
        let palette: [UInt8] = [0, 0, 0, 10, 20, 30, 40, 50, 60, 250, 240, 230]
        let indices: [UInt8] = [3, 2, 1, 0, 0, 1, 2, 3, 1]  // 9 wide: a partial last byte per row
        let image = try decode(try ImageEncoder.png(width: 9, height: 1, colorType: .palette, bitDepth: 2,
                                                    samples: indices, palette: palette))
        XCTAssertFalse(image.hadAlpha)
        XCTAssertEqual(image.pixels, indices.flatMap { Array(palette[3 * Int($0)..<3 * Int($0) + 3]) })
    }

    func testSubByteGrayExpandsToFullRange() throws {
        for depth in [1, 2, 4] {
            let maxValue = (1 << depth) - 1
            let samples = (0..<11).map { UInt8($0 % (maxValue + 1)) }
            let image = try decode(try ImageEncoder.png(width: 11, height: 1, colorType: .gray, bitDepth: depth, samples: samples))
            XCTAssertEqual(image.pixels, samples.map { UInt8(Int($0) * 255 / maxValue) }, "gray at \(depth) bits")
        }
    }

    func testSixteenBitPNGScalesWithRounding() throws {
        let values: [UInt16] = [0, 1, 128, 129, 257, 32767, 32768, 40000, 65278, 65535]
        let bigEndian = values.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
        let expected = values.map { UInt8((Double($0) * 255 / 65535).rounded()) }
        let gray = try decode(try ImageEncoder.png(width: 10, height: 1, colorType: .gray, bitDepth: 16, samples: bigEndian))
        XCTAssertEqual(gray.pixels, expected)
        // Two RGB pixels made of the same values (the last two are dropped to fill whole pixels).
        let rgbSamples = Array(bigEndian.prefix(12))
        let rgb = try decode(try ImageEncoder.png(width: 2, height: 1, colorType: .rgb, bitDepth: 16, samples: rgbSamples))
        XCTAssertEqual(rgb.channels, 3)
        XCTAssertEqual(rgb.pixels, Array(expected.prefix(6)))
        // 16-bit RGBA: colour scaled, then composited with the scaled alpha.
        let rgba16: [UInt16] = [65535, 32768, 0, 32768]
        let rgba = try decode(try ImageEncoder.png(width: 1, height: 1, colorType: .rgba, bitDepth: 16,
                                                   samples: rgba16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }))
        let a = Int((Double(32768) * 255 / 65535).rounded())
        XCTAssertEqual(rgba.pixels, [premultiplied(255, a), premultiplied(Int((32768.0 * 255 / 65535).rounded()), a), 0])
    }

    func testJPEGDecodesKnownBlocks() throws {
        // 16x8 RGB: two flat 8x8 blocks, so a high-quality JPEG keeps their colours to within rounding.
        let colors: [[UInt8]] = [[200, 30, 90], [20, 140, 250]]
        var pixels: [UInt8] = []
        for _ in 0..<8 { for x in 0..<16 { pixels += colors[x / 8] } }
        let jpeg = try ImageEncoder.jpeg(DecodedImage(width: 16, height: 8, channels: 3, pixels: pixels), quality: 100)
        XCTAssertEqual(DecodedImage.detectFormat(Data(jpeg)), .jpeg)
        let image = try DecodedImage(bytes: jpeg, name: "blocks.jpg")
        XCTAssertEqual(image.format, .jpeg)
        XCTAssertEqual([image.width, image.height, image.channels], [16, 8, 3])
        for (got, want) in zip(image.pixels, pixels) { XCTAssertEqual(Int(got), Int(want), accuracy: 2) }

        let gray = (0..<64).map { UInt8($0 < 32 ? 60 : 180) }  // 8x8: top half 60, bottom half 180
        let grayJPEG = try ImageEncoder.jpeg(DecodedImage(width: 8, height: 8, channels: 1, pixels: gray), quality: 100)
        let decodedGray = try DecodedImage(bytes: grayJPEG, name: "gray.jpg")
        XCTAssertEqual(decodedGray.channels, 1)
        for (got, want) in zip(decodedGray.pixels, gray) { XCTAssertEqual(Int(got), Int(want), accuracy: 3) }
    }

    /// An APP1 EXIF segment holding only an orientation tag, in either TIFF byte order.
    private func exifSegment(orientation: UInt16, littleEndian: Bool) -> [UInt8] {
        func u16(_ v: UInt16) -> [UInt8] { littleEndian ? [UInt8(v & 0xFF), UInt8(v >> 8)] : [UInt8(v >> 8), UInt8(v & 0xFF)] }
        func u32(_ v: UInt32) -> [UInt8] { littleEndian ? u16(UInt16(v & 0xFFFF)) + u16(UInt16(v >> 16)) : u16(UInt16(v >> 16)) + u16(UInt16(v & 0xFFFF)) }
        var tiff: [UInt8] = littleEndian ? [0x49, 0x49] : [0x4D, 0x4D]
        tiff += u16(42) + u32(8)                                  // header; IFD0 at offset 8
        tiff += u16(1) + u16(0x0112) + u16(3) + u32(1) + u16(orientation) + u16(0)  // one SHORT entry
        tiff += u32(0)                                            // no next IFD
        let payload: [UInt8] = Array("Exif".utf8) + [0, 0] + tiff
        let length = payload.count + 2
        return [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
    }

    func testJPEGExifOrientationIsApplied() throws {
        // 32x16 gray in four flat 16x8 quadrants (block-aligned, so the JPEG keeps them flat).
        let (tl, tr, bl, br): (UInt8, UInt8, UInt8, UInt8) = (20, 80, 140, 220)
        var pixels: [UInt8] = []
        for y in 0..<16 { for x in 0..<32 { pixels.append(y < 8 ? (x < 16 ? tl : tr) : (x < 16 ? bl : br)) } }
        let jpeg = try ImageEncoder.jpeg(DecodedImage(width: 32, height: 16, channels: 1, pixels: pixels), quality: 100)
        // Insert after SOI and the encoder's APP0 segment.
        XCTAssertEqual(Array(jpeg[0..<4]), [0xFF, 0xD8, 0xFF, 0xE0])
        let afterAPP0 = 4 + (Int(jpeg[4]) << 8 | Int(jpeg[5]))
        // Expected quadrants (top-left, top-right, bottom-left, bottom-right) once upright, worked out by
        // hand: e.g. 6 means "rotate 90 degrees clockwise to view", which brings bottom-left to top-left.
        let upright: [Int: [UInt8]] = [
            1: [tl, tr, bl, br], 2: [tr, tl, br, bl], 3: [br, bl, tr, tl], 4: [bl, br, tl, tr],
            5: [tl, bl, tr, br], 6: [bl, tl, br, tr], 7: [br, tr, bl, tl], 8: [tr, br, tl, bl],
        ]
        for orientation in 1...8 {
            for littleEndian in [true, false] {
                var tagged = jpeg
                tagged.insert(contentsOf: exifSegment(orientation: UInt16(orientation), littleEndian: littleEndian), at: afterAPP0)
                let image = try DecodedImage(bytes: tagged, name: "exif.jpg")
                let label = "orientation \(orientation), \(littleEndian ? "II" : "MM")"
                XCTAssertEqual(image.orientation, orientation, label)
                let (w, h) = orientation >= 5 ? (16, 32) : (32, 16)
                XCTAssertEqual([image.width, image.height], [w, h], label)
                let corners = [image[w / 4, h / 4, 0], image[3 * w / 4, h / 4, 0], image[w / 4, 3 * h / 4, 0], image[3 * w / 4, 3 * h / 4, 0]]
                for (got, want) in zip(corners, upright[orientation]!) { XCTAssertEqual(Int(got), Int(want), accuracy: 3, label) }
            }
        }
        // A malformed EXIF segment is ignored, not an error.
        var broken = jpeg
        var segment = exifSegment(orientation: 6, littleEndian: true)
        segment[12] = 0xEE  // the TIFF magic number 42 no longer matches
        broken.insert(contentsOf: segment, at: afterAPP0)
        XCTAssertEqual(try DecodedImage(bytes: broken, name: "broken-exif.jpg").orientation, 1)
    }

    func testDecodesFromFileWhateverTheExtension() throws {
        let folder = try DataTestFolder()
        let png = try ImageEncoder.png(width: 2, height: 1, colorType: .gray, samples: [9, 99])
        let file = try folder.write(png, to: "actually-a-png.jpg")
        XCTAssertEqual(try DecodedImage(contentsOf: file).pixels, [9, 99])
    }

    // MARK: - Errors

    private func assertThrows(_ bytes: [UInt8], kind: UpdraftError.Kind, mentioning text: String? = nil,
                              file: StaticString = #filePath, line: UInt = #line) throws {
        let folder = try DataTestFolder()
        let url = try folder.write(bytes, to: "broken-image.png")
        XCTAssertThrowsError(try DecodedImage(contentsOf: url), file: file, line: line) { error in
            guard let error = error as? UpdraftError else { return XCTFail("not an UpdraftError: \(error)", file: file, line: line) }
            XCTAssertEqual(error.kind, kind, "\(error)", file: file, line: line)
            XCTAssertTrue(error.message.contains(url.path), "names the file: \(error)", file: file, line: line)
            if let text { XCTAssertTrue(error.message.contains(text), "\(error)", file: file, line: line) }
        }
    }

    func testTruncatedPNGThrowsAtEveryLength() throws {
        let png = try ImageEncoder.png(width: 5, height: 4, colorType: .rgb, samples: [UInt8](repeating: 77, count: 60))
        for length in 0..<png.count {
            XCTAssertThrowsError(try decode(Array(png.prefix(length))), "cut at \(length) of \(png.count) bytes")
        }
        try assertThrows(Array(png.prefix(png.count - 5)), kind: .data, mentioning: "truncated")
    }

    func testCorruptPNGThrows() throws {
        var png = try ImageEncoder.png(width: 4, height: 4, colorType: .gray, samples: [UInt8](repeating: 3, count: 16))
        png[20] ^= 0xFF  // inside IHDR: its CRC no longer matches
        try assertThrows(png, kind: .data, mentioning: "invalid PNG data")
    }

    func testTruncatedJPEGThrows() throws {
        let jpeg = try ImageEncoder.jpeg(DecodedImage(width: 16, height: 16, channels: 3,
                                                      pixels: bytePattern(768, step: 1)))
        for length in stride(from: 0, to: jpeg.count, by: 7) {
            XCTAssertThrowsError(try decode(Array(jpeg.prefix(length))), "cut at \(length) of \(jpeg.count) bytes")
        }
        try assertThrows(Array(jpeg.prefix(jpeg.count - 2)), kind: .data, mentioning: "invalid JPEG data")
    }

    func testRandomBytesThrowNeverCrash() throws {
        var rng = SplitMix64(seed: 7)
        for trial in 0..<200 {
            let length = Int(rng.next() % 300)
            var bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            // Half the trials get a valid signature, so the codecs themselves see the garbage.
            if trial % 2 == 0 && length >= 8 {
                bytes.replaceSubrange(0..<8, with: trial % 4 == 0 ? [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
                                                                   : [0xFF, 0xD8, 0xFF, 0xE0, 0, 16, 0x4A, 0x46])
            }
            XCTAssertThrowsError(try decode(bytes), "trial \(trial)")
        }
        try assertThrows(bytePattern(64, step: 29, offset: 3), kind: .unsupported, mentioning: "not a PNG or JPEG")
    }

    func testOtherFormatsAndMissingFilesThrowNamingThem() throws {
        try assertThrows(Array("GIF89a\u{1}\u{0}\u{1}\u{0}".utf8), kind: .unsupported, mentioning: "GIF")
        try assertThrows([], kind: .data, mentioning: "empty")
        let missing = "/nonexistent/updraft/no-such-image.png"
        XCTAssertThrowsError(try DecodedImage(contentsOfFile: missing)) { error in
            XCTAssertEqual((error as? UpdraftError)?.kind, .io)
            XCTAssertTrue("\(error)".contains(missing))
        }
    }

    func testEncoderRejectsInvalidLayouts() {
        XCTAssertThrowsError(try ImageEncoder.png(width: 2, height: 1, colorType: .rgb, bitDepth: 4, samples: [UInt8](repeating: 0, count: 6)))
        XCTAssertThrowsError(try ImageEncoder.png(width: 2, height: 1, colorType: .gray, bitDepth: 2, samples: [0, 4]))
        XCTAssertThrowsError(try ImageEncoder.png(width: 2, height: 1, colorType: .palette, samples: [0, 1], palette: [1, 2, 3]))
        XCTAssertThrowsError(try ImageEncoder.png(width: 2, height: 2, colorType: .gray, samples: [1, 2, 3]))
    }
}
