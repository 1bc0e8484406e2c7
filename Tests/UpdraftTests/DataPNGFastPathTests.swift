import CImageIO
import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftData
@testable import UpdraftTraining

/// PNG's two decoders: the fast path (chunks walked here, libdeflate, our unfiltering) must give
/// libpng's pixels bit for bit on every file it takes, and leave every other file, damaged ones
/// included, to libpng, so the errors stay libpng's.
final class DataPNGFastPathTests: XCTestCase {
    private struct Outcome: Equatable {
        var status: Int32
        var width = 0, height = 0, channels = 0
        var hadAlpha = false
        var pixels: [UInt8] = []
        var message = ""
    }

    private typealias Decoder = (UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<uimg_image>?, UnsafeMutablePointer<CChar>?, Int) -> Int32

    private static func run(_ bytes: [UInt8], _ decoder: Decoder) -> Outcome {
        var image = uimg_image()
        var message = [CChar](repeating: 0, count: 512)
        let status = bytes.withUnsafeBufferPointer { decoder($0.baseAddress, $0.count, &image, &message, message.count) }
        guard status == Int32(UIMG_OK), let pixels = image.pixels else {
            return Outcome(status: status, message: String(cString: message))
        }
        defer { uimg_free(pixels) }
        let count = Int(image.width) * Int(image.height) * Int(image.channels)
        return Outcome(status: status, width: Int(image.width), height: Int(image.height), channels: Int(image.channels),
                       hadAlpha: image.had_alpha != 0, pixels: Array(UnsafeBufferPointer(start: pixels, count: count)))
    }

    private static func fast(_ bytes: [UInt8]) -> Outcome { run(bytes, uimg_decode_png_fast_only) }
    private static func libpng(_ bytes: [UInt8]) -> Outcome { run(bytes, uimg_decode_png_libpng_only) }
    private static let leftToLibpng = Int32(UIMG_PNG_LEFT_TO_LIBPNG)

    /// The public decoder's outcome (what users get), as an Outcome with libpng's message format.
    private static func decoded(_ bytes: [UInt8]) -> Outcome { run(bytes, uimg_decode_memory) }

    // MARK: - Building PNGs by hand

    static func crc32(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return crc ^ 0xFFFF_FFFF
    }

    static func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }

    static func chunk(_ type: String, _ data: [UInt8], crcDelta: UInt32 = 0) -> [UInt8] {
        let body = Array(type.utf8) + data
        return be32(UInt32(data.count)) + body + be32(crc32(body[...]) ^ crcDelta)
    }

    /// A zlib stream of stored (uncompressed) deflate blocks, so tests control every inflated byte.
    static func zlibStored(_ data: [UInt8], adlerDelta: UInt32 = 0) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let n = min(65535, data.count - offset)
            let last: UInt8 = offset + n == data.count ? 1 : 0
            out += [last, UInt8(n & 0xFF), UInt8(n >> 8), UInt8(~n & 0xFF), UInt8((~n >> 8) & 0xFF)]
            out += data[offset..<offset + n]
            offset += n
        } while offset < data.count
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in data { a = (a + UInt32(byte)) % 65521; b = (b + a) % 65521 }
        return out + be32((b << 16 | a) ^ adlerDelta)
    }

    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    static func ihdr(width: Int, height: Int, colorType: UInt8, bitDepth: UInt8 = 8) -> [UInt8] {
        chunk("IHDR", be32(UInt32(width)) + be32(UInt32(height)) + [bitDepth, colorType, 0, 0, 0])
    }

    /// A 4x3 RGB PNG from filtered rows (`rows`: a filter byte, then 12 bytes, per row), the zlib stream
    /// split over IDAT chunks of `split` bytes, with `before`/`after` chunks around them.
    static func handmade(rows: [UInt8], split: Int = 1 << 20, before: [UInt8] = [], between: [UInt8] = [],
                         after: [UInt8] = [], adlerDelta: UInt32 = 0, stream: [UInt8]? = nil) -> [UInt8] {
        let z = stream ?? zlibStored(rows, adlerDelta: adlerDelta)
        var idats: [UInt8] = []
        var offset = 0
        repeat {
            let n = min(split, z.count - offset)
            idats += chunk("IDAT", Array(z[offset..<offset + n]))
            if offset == 0 { idats += between }
            offset += n
        } while offset < z.count
        return signature + ihdr(width: 4, height: 3, colorType: 2) + before + idats + after + chunk("IEND", [])
    }

    static let plainRows: [UInt8] = {
        var rows: [UInt8] = []
        for y in 0..<3 {
            rows.append(0)
            for i in 0..<12 { rows.append(UInt8((i * 19 + y * 7) % 256)) }
        }
        return rows
    }()

    // MARK: - Tests

    func testFastPathMatchesLibpngForEveryFilterLayoutAndWidth() throws {
        let layouts: [ImageEncoder.PNGColorType] = [.gray, .grayAlpha, .rgb, .rgba]
        let filterSets: [Set<ImageEncoder.PNGFilter>] = ImageEncoder.PNGFilter.allCases.map { [$0] } + [Set(ImageEncoder.PNGFilter.allCases)]
        var compared = 0
        for layout in layouts {
            for width in [1, 2, 3, 5, 257] {
                for height in [1, 4] {
                    let count = width * height * layout.samplesPerPixel
                    // Noise-like samples, with 0 and 255 so every predictor wraps around.
                    var rng = SplitMix64(seed: UInt64(width * 131 + height * 7 + Int(layout.rawValue)))
                    let samples = (0..<count).map { i -> UInt8 in i % 11 == 0 ? 255 : i % 13 == 0 ? 0 : UInt8(truncatingIfNeeded: rng.next()) }
                    for (f, filters) in filterSets.enumerated() {
                        // Several IDAT chunks for some (libpng writes one per idatChunkBytes of data).
                        let png = try ImageEncoder.png(width: width, height: height, colorType: layout, samples: samples,
                                                       filters: filters, idatChunkBytes: f % 2 == 0 ? 7 : 0)
                        let fast = Self.fast(png), reference = Self.libpng(png)
                        let what = "\(layout) \(width)x\(height) filters \(filters.map(\.rawValue).sorted())"
                        XCTAssertEqual(fast.status, Int32(UIMG_OK), "\(what): left to libpng (\(fast.message))")
                        XCTAssertEqual(reference.status, Int32(UIMG_OK), what)
                        XCTAssertEqual(fast, reference, what)
                        if layout == .gray || layout == .rgb { XCTAssertEqual(fast.pixels, samples, what) }
                        compared += 1
                    }
                }
            }
        }
        XCTAssertEqual(compared, 4 * 5 * 2 * 6)
    }

    func testEachFilterTypeOnEveryPixelSizeDecodesAlike() throws {
        // Files whose every row uses one filter (filtered here, as the specification defines it), so
        // each filter meets each pixel size whatever libpng's writer would choose.
        for (colorType, bpp) in [(UInt8(0), 1), (4, 2), (2, 3), (6, 4)] {
            for width in [1, 3, 33] {
                let height = 3
                let samples = (0..<(width * height * bpp)).map { (i: Int) -> UInt8 in UInt8((i * 53 + i / 5) % 256) }
                for filter in 0...4 {
                    let rows = Self.filtered(samples, width: width, height: height, bpp: bpp, filter: filter)
                    let png = Self.signature + Self.ihdr(width: width, height: height, colorType: colorType)
                        + Self.chunk("IDAT", Self.zlibStored(rows)) + Self.chunk("IEND", [])
                    let fast = Self.fast(png), reference = Self.libpng(png)
                    let what = "color type \(colorType) width \(width) filter \(filter)"
                    XCTAssertEqual(fast.status, Int32(UIMG_OK), what)
                    XCTAssertEqual(fast, reference, what)
                    if bpp == 1 || bpp == 3 { XCTAssertEqual(fast.pixels, samples, what) }
                }
            }
        }
        // And the encoder's filter choice is real: one file per single filter, all different.
        let samples = bytePattern(9 * 4 * 3, step: 53)
        let files = try ImageEncoder.PNGFilter.allCases.map {
            try ImageEncoder.png(width: 9, height: 4, colorType: .rgb, samples: samples, filters: [$0])
        }
        XCTAssertEqual(Set(files).count, files.count)
        XCTAssertThrowsError(try ImageEncoder.png(width: 9, height: 4, colorType: .rgb, samples: samples, filters: []))
        XCTAssertThrowsError(try ImageEncoder.png(width: 9, height: 4, colorType: .rgb, samples: samples, idatChunkBytes: 5))
    }

    /// PNG filtering as the specification defines it (the encoder's side), for handmade files.
    static func filtered(_ samples: [UInt8], width: Int, height: Int, bpp: Int, filter: Int) -> [UInt8] {
        let rowBytes = width * bpp
        var out: [UInt8] = []
        for y in 0..<height {
            out.append(UInt8(filter))
            for i in 0..<rowBytes {
                let x = Int(samples[y * rowBytes + i])
                let a = i >= bpp ? Int(samples[y * rowBytes + i - bpp]) : 0
                let b = y > 0 ? Int(samples[(y - 1) * rowBytes + i]) : 0
                let c = i >= bpp && y > 0 ? Int(samples[(y - 1) * rowBytes + i - bpp]) : 0
                let predicted: Int
                switch filter {
                case 1: predicted = a
                case 2: predicted = b
                case 3: predicted = (a + b) / 2
                case 4:
                    let pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - 2 * c)
                    predicted = pa <= pb && pa <= pc ? a : pb <= pc ? b : c
                default: predicted = 0
                }
                out.append(UInt8((x - predicted + 256) % 256))
            }
        }
        return out
    }

    func testOtherLayoutsAreLeftToLibpng() throws {
        let rgb = bytePattern(4 * 3 * 3, step: 29)
        let cases: [(String, [UInt8])] = [
            ("palette", try ImageEncoder.png(width: 4, height: 3, colorType: .palette, bitDepth: 2, samples: bytePattern(12, step: 1).map { $0 % 3 },
                                            palette: [255, 0, 0, 0, 255, 0, 0, 0, 255])),
            ("16-bit", try ImageEncoder.png(width: 2, height: 2, colorType: .gray, bitDepth: 16, samples: bytePattern(8, step: 77))),
            ("1-bit gray", try ImageEncoder.png(width: 9, height: 2, colorType: .gray, bitDepth: 1, samples: bytePattern(18, step: 1).map { $0 % 2 })),
            ("interlaced", try ImageEncoder.png(width: 4, height: 3, colorType: .rgb, samples: rgb, interlaced: true)),
            ("tRNS", Self.handmade(rows: Self.plainRows, before: Self.chunk("tRNS", [0, 1, 0, 2, 0, 3]))),
            ("PLTE in RGB", Self.handmade(rows: Self.plainRows, before: Self.chunk("PLTE", [1, 2, 3]))),
        ]
        for (name, png) in cases {
            XCTAssertEqual(Self.fast(png).status, Self.leftToLibpng, name)
            let reference = Self.libpng(png)
            XCTAssertEqual(reference.status, Int32(UIMG_OK), "\(name): \(reference.message)")
            XCTAssertEqual(Self.decoded(png), reference, name)
        }
    }

    func testHandmadeFilesDecodeAlikeWithSkippedChunksAndTrailingBytes() throws {
        let expected = Self.fast(Self.handmade(rows: Self.plainRows))
        XCTAssertEqual(expected.status, Int32(UIMG_OK))
        XCTAssertEqual(expected.pixels, Self.plainRows.enumerated().filter { $0.offset % 13 != 0 }.map(\.element))
        let cases: [(String, [UInt8])] = [
            ("ancillary chunks before and after", Self.handmade(rows: Self.plainRows, before: Self.chunk("gAMA", Self.be32(45455)) + Self.chunk("tEXt", Array("a\u{0}b".utf8)),
                                                                after: Self.chunk("zzZz", [1, 2, 3]))),
            ("one-byte IDAT chunks", Self.handmade(rows: Self.plainRows, split: 1)),
            ("bytes after IEND", Self.handmade(rows: Self.plainRows) + [1, 2, 3, 4, 5]),
        ]
        for (name, png) in cases {
            XCTAssertEqual(Self.fast(png), expected, name)
            XCTAssertEqual(Self.libpng(png), expected, name)
        }
    }

    func testDamagedFilesGetLibpngsVerdict() throws {
        var badFilter = Self.plainRows
        badFilter[13] = 5  // the second row's filter byte: no such filter
        let rows = Self.plainRows
        let good = Self.handmade(rows: rows, split: 9)
        var badIDATCRC = good
        badIDATCRC[33 + 10] ^= 0x40  // inside the first IDAT's data
        var badIENDCRC = good
        badIENDCRC[badIENDCRC.count - 1] ^= 1
        var cases: [(String, [UInt8])] = [
            ("bad filter type", Self.handmade(rows: badFilter)),
            ("too little image data", Self.handmade(rows: Array(rows.prefix(30)))),
            ("too much image data", Self.handmade(rows: rows + [0, 1, 2, 3])),
            ("bad Adler-32", Self.handmade(rows: rows, adlerDelta: 1)),
            ("broken deflate stream", Self.handmade(rows: rows, stream: [0x78, 0x01, 0x07, 0xFF, 0xFF, 0xFF])),
            ("bad IDAT CRC", badIDATCRC),
            ("bad IEND CRC", badIENDCRC),
            ("bad ancillary CRC", Self.handmade(rows: rows, before: Self.chunk("gAMA", Self.be32(45455), crcDelta: 1))),
            ("unknown critical chunk", Self.handmade(rows: rows, before: Self.chunk("ABCD", [1]))),
            ("invalid chunk type", Self.handmade(rows: rows, before: Self.chunk("a1cd", [1]))),
            ("chunk between IDATs", Self.handmade(rows: rows, split: 9, between: Self.chunk("tEXt", Array("k\u{0}v".utf8)))),
            ("second IHDR", Self.handmade(rows: rows, before: Self.ihdr(width: 4, height: 3, colorType: 2))),
            ("no IEND", Array(good.dropLast(12))),
            ("no IDAT", Self.signature + Self.ihdr(width: 4, height: 3, colorType: 2) + Self.chunk("IEND", [])),
        ]
        for cut in stride(from: 33, to: good.count, by: 5) { cases.append(("cut at \(cut)", Array(good.prefix(cut)))) }
        var refused = 0
        for (name, png) in cases {
            XCTAssertEqual(Self.fast(png).status, Self.leftToLibpng, name)
            let reference = Self.libpng(png), decoded = Self.decoded(png)
            XCTAssertEqual(decoded, reference, name)
            if reference.status != Int32(UIMG_OK) {
                refused += 1
                XCTAssertTrue(decoded.message.hasPrefix("invalid PNG data"), "\(name): \(decoded.message)")
            }
        }
        // libpng refuses most of them outright (a bad Adler-32 or ancillary CRC only warns there).
        XCTAssertGreaterThan(refused, cases.count - 4)
        XCTAssertThrowsError(try DecodedImage(bytes: Self.handmade(rows: badFilter), name: "bad.png")) { error in
            XCTAssertTrue("\(error)".contains("bad adaptive filter value"), "\(error)")
        }
    }

    func testMutatedFilesWithValidCRCsDecodeAlikeOrAreLeftToLibpng() throws {
        // Mutations with every chunk CRC then fixed, so they reach the zlib stream, the filters and the
        // chunk rules rather than stopping at a CRC.
        let seeds = try [ImageEncoder.PNGColorType.gray, .grayAlpha, .rgb, .rgba].enumerated().map { i, layout in
            try ImageEncoder.png(width: 5 + i, height: 4, colorType: layout,
                                 samples: bytePattern((5 + i) * 4 * layout.samplesPerPixel, step: 37 + i), idatChunkBytes: i % 2 == 0 ? 16 : 0)
        }
        var agreed = 0, left = 0
        for (s, seed) in seeds.enumerated() {
            var rng = SplitMix64(seed: 0xFA57 &+ UInt64(s))
            for i in 0..<2500 {
                var bytes = DataDecoderFuzzTests.mutate(seed, &rng)
                if rng.next() % 2 == 0 { Self.fixCRCs(&bytes) }
                let fast = Self.fast(bytes)
                if fast.status == Int32(UIMG_OK) {
                    XCTAssertEqual(fast, Self.libpng(bytes), "seed \(s) mutation \(i)")
                    agreed += 1
                } else {
                    XCTAssertNotEqual(fast.status, Int32(UIMG_ERR_MEMORY), "seed \(s) mutation \(i)")
                    left += 1
                }
            }
        }
        XCTAssertGreaterThan(agreed, 100)
        XCTAssertGreaterThan(left, 100)
    }

    static func fixCRCs(_ bytes: inout [UInt8]) {
        var p = 8
        while p + 12 <= bytes.count {
            let n = Int(UInt32(bytes[p]) << 24 | UInt32(bytes[p + 1]) << 16 | UInt32(bytes[p + 2]) << 8 | UInt32(bytes[p + 3]))
            guard n <= bytes.count - p - 12 else { return }
            let crc = be32(crc32(bytes[(p + 4)..<(p + 8 + n)]))
            bytes.replaceSubrange((p + 8 + n)..<(p + 12 + n), with: crc)
            p += 12 + n
        }
    }

    func testThreadBuffersAreReusedAndLargeOnesReleased() throws {
        let folder = try DataTestFolder()
        let small = try folder.write(try ImageEncoder.png(width: 40, height: 30, colorType: .rgb, samples: bytePattern(3600, step: 7)), to: "small.png")
        // 1700 x 1700 RGB: 8.7 MB of pixels, past the 8 MiB a thread keeps.
        let side = 1700
        let rgbLarge = try folder.write(try ImageEncoder.png(width: side, height: side, colorType: .rgb,
                                                             samples: [UInt8](repeating: 9, count: side * side * 3)), to: "rgb-large.png")
        uimg_scratch_release()
        XCTAssertEqual(uimg_scratch_bytes(), 0)
        _ = try DecodedImage(contentsOfFile: small.path)
        let held = uimg_scratch_bytes()
        XCTAssertGreaterThan(held, 3600)
        for _ in 0..<5 { _ = try DecodedImage(contentsOfFile: small.path) }
        XCTAssertEqual(uimg_scratch_bytes(), held, "decoding the same size again reuses the buffers")
        let image = try DecodedImage(contentsOfFile: rgbLarge.path)
        XCTAssertEqual(image.pixels.count, side * side * 3)
        XCTAssertEqual(image.pixels.first, 9)
        XCTAssertEqual(image.pixels.last, 9)
        XCTAssertLessThanOrEqual(uimg_scratch_bytes(), 4 * (8 << 20), "large buffers are let go after the copy")
        XCTAssertLessThan(uimg_scratch_bytes(), side * side * 3)
        uimg_scratch_release()
        XCTAssertEqual(uimg_scratch_bytes(), 0)
    }
}
