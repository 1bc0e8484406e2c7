import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftData
@testable import UpdraftTraining
import CImageIO

/// The decoders' half of the fuzz test (issue 13): mutated PNG, JPEG and .npy bytes through the
/// decoders, the header probe and the resampler. Every input must give an image or an `UpdraftError`
/// — no crash, no hang, no allocation past the pixel cap. Seeds are fixed, so a failure repeats.
/// `UPDRAFT_FUZZ_DECODER_ITERATIONS` sets the mutations per seed file (default 40,000, about three
/// seconds in all); `Tests/Scripts/fuzz.sh` runs it far longer.
final class DataDecoderFuzzTests: XCTestCase {
    private var iterations: Int {
        ProcessInfo.processInfo.environment["UPDRAFT_FUZZ_DECODER_ITERATIONS"].flatMap(Int.init) ?? 40000
    }

    private static func seedImages() throws -> [(String, [UInt8])] {
        var gradient = [UInt8](repeating: 0, count: 12 * 9 * 3)
        for i in gradient.indices { gradient[i] = UInt8((i * 37) % 251) }
        let rgb = DecodedImage(width: 12, height: 9, channels: 3, pixels: gradient)
        let gray = DecodedImage(width: 9, height: 7, channels: 1, pixels: Array(gradient.prefix(63)))
        return [
            ("rgb.png", try ImageEncoder.png(rgb)),
            ("interlaced.png", try ImageEncoder.png(width: 12, height: 9, colorType: .rgb, samples: gradient, interlaced: true)),
            ("palette.png", try ImageEncoder.png(width: 4, height: 3, colorType: .palette, bitDepth: 4,
                                                 samples: [0, 1, 2, 3, 3, 2, 1, 0, 1, 1, 2, 2],
                                                 palette: [255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9], paletteAlpha: [128, 255])),
            ("gray16.png", try ImageEncoder.png(width: 3, height: 2, colorType: .gray, bitDepth: 16, samples: Array(gradient.prefix(12)))),
            ("rgb.jpg", try ImageEncoder.jpeg(rgb, quality: 80)),
            ("gray.jpg", try ImageEncoder.jpeg(gray, quality: 50)),
        ]
    }

    /// One mutation of `seed`, chosen by `rng`: bit flips, interesting bytes, a cut, a repeated or
    /// removed run, random bytes inserted.
    static func mutate(_ seed: [UInt8], _ rng: inout SplitMix64) -> [UInt8] {
        var bytes = seed
        let edits = 1 + Int(rng.next() % 4)
        for _ in 0..<edits where !bytes.isEmpty {
            let at = Int(rng.next() % UInt64(bytes.count))
            switch rng.next() % 7 {
            case 0: bytes[at] ^= UInt8(1 << (rng.next() % 8))
            case 1: bytes[at] = [0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE][Int(rng.next() % 6)]
            case 2: bytes = Array(bytes.prefix(at))
            case 3:
                let n = min(bytes.count - at, 1 + Int(rng.next() % 16))
                bytes.insert(contentsOf: bytes[at..<at + n], at: at)
            case 4:
                let n = min(bytes.count - at, 1 + Int(rng.next() % 16))
                bytes.removeSubrange(at..<at + n)
            case 5:
                bytes.insert(contentsOf: (0..<(1 + Int(rng.next() % 8))).map { _ in UInt8(truncatingIfNeeded: rng.next()) }, at: at)
            default:
                // A big-endian size field made huge: what bombs and overflows look like.
                for k in 0..<min(4, bytes.count - at) { bytes[at + k] = k == 0 ? 0x7F : 0xFF }
            }
        }
        return bytes
    }

    func testMutatedImagesDecodeOrThrowUpdraftError() throws {
        let limits = ImageDecodingLimits(maxPixels: 1 << 20)
        let pre = ImagePreprocessing(width: 7, height: 5, colorSpace: .rgb, resize: .centerCrop(shorterSide: 6))
        var decoded = 0, refused = 0
        for (s, (name, seed)) in try Self.seedImages().enumerated() {
            XCTAssertNoThrow(try DecodedImage(data: Data(seed), name: name, limits: limits), name)
            var rng = SplitMix64(seed: 0xF022 &+ UInt64(s))
            for i in 0..<iterations {
                let bytes = Self.mutate(seed, &rng)
                do {
                    let image = try DecodedImage(data: Data(bytes), name: name, limits: limits)
                    XCTAssertLessThanOrEqual(image.width * image.height, 1 << 20)
                    XCTAssertEqual(pre.prepare(image).samples.count, 3 * 7 * 5)
                    decoded += 1
                } catch let error as UpdraftError {
                    XCTAssertFalse(error.message.isEmpty, "\(name) mutation \(i)")
                    refused += 1
                } catch {
                    XCTFail("\(name) mutation \(i): not an UpdraftError: \(error)")
                }
                let probe = bytes.withUnsafeBufferPointer { raw -> Int32 in
                    var header = uimg_header()
                    var message = [CChar](repeating: 0, count: 256)
                    return uimg_probe_memory(raw.baseAddress, raw.count, 1 << 20, &header, &message, message.count)
                }
                XCTAssertTrue((0...6).contains(probe), "\(name) mutation \(i): probe status \(probe)")
            }
        }
        // Both outcomes happen, so the mutations reach past the signature checks.
        XCTAssertGreaterThan(decoded, 0)
        XCTAssertGreaterThan(refused, 0)
    }

    func testMutatedNpyParsesOrThrowsUpdraftError() throws {
        let seeds: [(String, String)] = [
            ("f4", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }"),
            ("i8", "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }"),
            ("u1", "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 2, 2), }"),
        ]
        var parsed = 0, refused = 0
        for (s, (kind, dict)) in seeds.enumerated() {
            var header = Array(dict.utf8)
            while (10 + header.count + 1) % 64 != 0 { header.append(0x20) }
            header.append(0x0A)
            let size = kind == "u1" ? 1 : kind == "f4" ? 4 : 8
            let count = kind == "f4" ? 6 : kind == "i8" ? 4 : 8
            let seed = [0x93] + Array("NUMPY".utf8) + [1, 0, UInt8(header.count & 0xFF), UInt8(header.count >> 8)] + header
                + (0..<(size * count)).map { UInt8(($0 * 29) % 256) }
            XCTAssertNoThrow(try NpyArray(data: Data(seed), name: kind), kind)
            var rng = SplitMix64(seed: 0x4E_5059 &+ UInt64(s))
            for i in 0..<iterations {
                do {
                    _ = try NpyArray(data: Data(Self.mutate(seed, &rng)), name: kind)
                    parsed += 1
                } catch is UpdraftError {
                    refused += 1
                } catch {
                    XCTFail("\(kind) mutation \(i): not an UpdraftError: \(error)")
                }
            }
        }
        XCTAssertGreaterThan(parsed, 0)
        XCTAssertGreaterThan(refused, 0)
    }
}
