import CImageIO
import Foundation
import UpdraftCore

/// PNG and JPEG encoding through the same C shim as decoding. Used to write test images and previews;
/// training itself only decodes.
public enum ImageEncoder {
    /// PNG color types, numbered as in the PNG specification.
    public enum PNGColorType: Int32, Sendable {
        /// Gray (0), RGB (2), indexed palette (3), gray with alpha (4) and RGBA (6), the IHDR color-type byte.
        case gray = 0, rgb = 2, palette = 3, grayAlpha = 4, rgba = 6

        /// Samples per pixel for the color type: 1 (gray, palette indices), 2 (gray + alpha), 3 (RGB), 4 (RGBA).
        public var samplesPerPixel: Int {
            switch self {
            case .gray, .palette: return 1
            case .grayAlpha: return 2
            case .rgb: return 3
            case .rgba: return 4
            }
        }
    }

    /// PNG's row filter types, numbered as in the specification: each row's bytes are stored as the
    /// difference from a prediction (none, the left, the upper, their mean, or Paeth's choice).
    public enum PNGFilter: Int32, Sendable, CaseIterable {
        /// Filter types 0 (None), 1 (Sub), 2 (Up), 3 (Average) and 4 (Paeth).
        case none = 0, sub, up, average, paeth
    }

    /// Encodes a PNG of any color type and bit depth PNG allows.
    /// - Parameters:
    ///   - samples: rows of `width * colorType.samplesPerPixel` samples, no padding; one byte per sample
    ///     for bit depths 1...8 (values below 2^bitDepth, or palette indices), two bytes big-endian per
    ///     sample for bit depth 16.
    ///   - palette: RGB triples, for `.palette` only; `paletteAlpha` gives the first entries' alpha.
    ///   - interlaced: write Adam7 interlacing.
    ///   - filters: the row filters libpng may choose from (nil: all five, its default; one: every row
    ///     uses it).
    ///   - idatChunkBytes: the most image-data bytes per IDAT chunk (0: libpng's 8,192).
    /// - Throws: `UpdraftError(.invalidArgument)` for a layout PNG does not allow or samples out of range.
    public static func png(width: Int, height: Int, colorType: PNGColorType, bitDepth: Int = 8,
                           samples: [UInt8], palette: [UInt8] = [], paletteAlpha: [UInt8] = [],
                           interlaced: Bool = false, filters: Set<PNGFilter>? = nil, idatChunkBytes: Int = 0) throws -> [UInt8] {
        let bytesPerSample = bitDepth == 16 ? 2 : 1
        guard width > 0, height > 0, width <= Int(UInt32.max), height <= Int(UInt32.max),
              samples.count == width * height * colorType.samplesPerPixel * bytesPerSample else {
            throw UpdraftError(.invalidArgument,
                               "PNG \(width)x\(height) \(colorType) at \(bitDepth) bits needs \(max(0, width * height) * colorType.samplesPerPixel * bytesPerSample) sample bytes, got \(samples.count)")
        }
        guard idatChunkBytes == 0 || (6...Int(Int32.max)).contains(idatChunkBytes) else {
            throw UpdraftError(.invalidArgument, "an IDAT chunk holds 6...2^31-1 bytes; got \(idatChunkBytes)")
        }
        guard filters?.isEmpty != true else {
            throw UpdraftError(.invalidArgument, "a PNG needs at least one filter type to choose from; got none")
        }
        guard palette.count % 3 == 0 else {
            throw UpdraftError(.invalidArgument, "a PNG palette holds RGB triples; got \(palette.count) bytes")
        }
        var out: UnsafeMutablePointer<UInt8>?
        var size = 0
        var message = [CChar](repeating: 0, count: 512)
        let status = samples.withUnsafeBufferPointer { samplePointer in
            palette.withUnsafeBufferPointer { palettePointer in
                paletteAlpha.withUnsafeBufferPointer { alphaPointer in
                    var spec = uimg_png_spec()
                    spec.width = UInt32(width)
                    spec.height = UInt32(height)
                    spec.color_type = colorType.rawValue
                    spec.bit_depth = Int32(bitDepth)
                    spec.samples = samplePointer.baseAddress
                    spec.palette = palettePointer.baseAddress
                    spec.palette_count = Int32(palette.count / 3)
                    spec.palette_alpha = alphaPointer.baseAddress
                    spec.palette_alpha_count = Int32(paletteAlpha.count)
                    spec.interlaced = interlaced ? 1 : 0
                    spec.filters = filters.map { $0.reduce(0) { $0 | Int32(1) << $1.rawValue } } ?? 0
                    spec.idat_bytes = UInt32(idatChunkBytes)
                    return uimg_encode_png(&spec, &out, &size, &message, message.count)
                }
            }
        }
        return try takeBuffer(out, size: size, status: status, message: message, what: "PNG")
    }

    /// Encodes a gray or RGB image as an 8-bit PNG.
    public static func png(_ image: DecodedImage) throws -> [UInt8] {
        try png(width: image.width, height: image.height, colorType: image.channels == 1 ? .gray : .rgb,
                samples: image.pixels)
    }

    /// Encodes a gray or RGB image as a baseline JPEG without chroma subsampling.
    public static func jpeg(_ image: DecodedImage, quality: Int = 95) throws -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        var size = 0
        var message = [CChar](repeating: 0, count: 512)
        let status = image.pixels.withUnsafeBufferPointer { pixels in
            uimg_encode_jpeg(pixels.baseAddress, UInt32(image.width), UInt32(image.height), UInt32(image.channels),
                             Int32(clamping: quality), &out, &size, &message, message.count)
        }
        return try takeBuffer(out, size: size, status: status, message: message, what: "JPEG")
    }

    private static func takeBuffer(_ buffer: UnsafeMutablePointer<UInt8>?, size: Int, status: Int32,
                                   message: [CChar], what: String) throws -> [UInt8] {
        defer { uimg_free(buffer) }
        guard status == Int32(UIMG_OK), let buffer else {
            let kind: UpdraftError.Kind = status == Int32(UIMG_ERR_ARGUMENT) ? .invalidArgument : .io
            throw UpdraftError(kind, "cannot encode \(what): \(String(cString: message))")
        }
        return Array(UnsafeBufferPointer(start: buffer, count: size))
    }
}
