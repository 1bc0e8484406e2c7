import CImageIO
import Foundation
import UpdraftCore

/// An image decoded from a PNG or JPEG file: 8 bits per sample, rows top to bottom, samples
/// interleaved, so pixel (x, y) channel c is `pixels[(y * width + x) * channels + c]`.
///
/// `channels` is 1 (gray) or 3 (RGB). The decoder normalises every file to one of these two:
/// palettes and 1/2/4-bit gray are expanded, 16-bit samples are scaled to 8 bits with rounding, and
/// alpha (an alpha channel or a PNG tRNS chunk) is composited over black, which is what drawing the
/// image into a premultiplied 8-bit pixel buffer gives on device. A JPEG's EXIF orientation is applied,
/// so the image is upright as image viewers show it. No gamma or color-profile conversion is applied:
/// the stored sample values are used as they are.
public struct DecodedImage: Equatable, Sendable {
    /// The file format an image was decoded from, recognised by its first bytes.
    public enum Format: String, Sendable {
        /// A PNG file (starting 89 'PNG') or a JPEG file (starting FF D8).
        case png, jpeg
    }

    /// Columns, in pixels (upright, after EXIF orientation).
    public var width: Int
    /// Rows, in pixels (upright, after EXIF orientation).
    public var height: Int
    /// Samples per pixel: 1 (gray) or 3 (RGB).
    public var channels: Int
    /// The `width * height * channels` samples, interleaved, rows top to bottom.
    public var pixels: [UInt8]
    /// The file format it came from; nil for an image built in memory.
    public var format: Format?
    /// Whether the file carried alpha (now composited over black).
    public var hadAlpha: Bool
    /// The EXIF orientation (1...8) the file carried, already applied to `pixels`; 1 for none.
    public var orientation: Int

    /// An image built in memory. `channels` must be 1 or 3 and `pixels` hold exactly
    /// `width * height * channels` samples (a programming error otherwise).
    public init(width: Int, height: Int, channels: Int, pixels: [UInt8]) {
        precondition(width > 0 && height > 0, "DecodedImage: \(width)x\(height) has no pixels")
        precondition(channels == 1 || channels == 3, "DecodedImage: channels must be 1 or 3, got \(channels)")
        precondition(pixels.count == width * height * channels,
                     "DecodedImage: \(width)x\(height)x\(channels) needs \(width * height * channels) samples, got \(pixels.count)")
        self.width = width
        self.height = height
        self.channels = channels
        self.pixels = pixels
        self.format = nil
        self.hadAlpha = false
        self.orientation = 1
    }

    /// Sample `channel` of the pixel in column `x`, row `y`.
    public subscript(x: Int, y: Int, channel: Int) -> UInt8 {
        pixels[(y * width + x) * channels + channel]
    }

    /// Decodes a PNG or JPEG file, recognised by its first bytes whatever its extension.
    /// - Throws: `UpdraftError` naming the file: `.io` when it cannot be read, `.unsupported` for
    ///   another format, `.data` for corrupt or truncated data.
    public init(contentsOfFile path: String) throws {
        try self.init(contentsOfFile: path, limits: .default)
    }

    /// As `init(contentsOfFile:)`, for a file URL.
    public init(contentsOf url: URL) throws {
        try self.init(contentsOfFile: url.path)
    }

    /// Decodes a file under `limits` (the pixel cap is applied to the header before decoding, and
    /// only regular files are read). With `atLeast`, a JPEG may be decoded at 1/2, 1/4 or 1/8 of its
    /// size (DCT-domain scaling) when that still covers the size given (upright, after EXIF rotation).
    public init(contentsOfFile path: String, limits: ImageDecodingLimits, atLeast size: (width: Int, height: Int)? = nil) throws {
        var image = uimg_image()
        var message = [CChar](repeating: 0, count: 512)
        var options = limits.options(atLeast: size)
        let status = uimg_decode_file_borrowed(path, &options, &image, &message, message.count)
        try self.init(copying: image, status: status, message: message, name: path)
    }

    /// Decodes bytes held in memory under `limits`, as `init(contentsOfFile:limits:atLeast:)` does.
    public init(data: Data, name: String, limits: ImageDecodingLimits, atLeast size: (width: Int, height: Int)? = nil) throws {
        var image = uimg_image()
        var message = [CChar](repeating: 0, count: 512)
        var options = limits.options(atLeast: size)
        let status = data.withUnsafeBytes { raw -> Int32 in
            let bytes = raw.bindMemory(to: UInt8.self)
            return uimg_decode_memory_borrowed(bytes.baseAddress, bytes.count, &options, &image, &message, message.count)
        }
        try self.init(copying: image, status: status, message: message, name: name)
    }

    /// Decodes PNG or JPEG bytes held in memory; `name` is used in error messages.
    public init(data: Data, name: String) throws {
        try self.init(data: data, name: name, limits: .default)
    }

    /// As `init(data:name:)`, from a byte array; `name` is used in error messages.
    public init(bytes: [UInt8], name: String) throws {
        try self.init(data: Data(bytes), name: name)
    }

    /// Copies the pixels a borrowed decode left in the thread's buffer into Swift storage (then lets a
    /// large buffer go), or turns the decoder's error into an `UpdraftError`.
    private init(copying image: uimg_image, status: Int32, message: [CChar], name: String) throws {
        defer { uimg_scratch_trim() }
        guard status == Int32(UIMG_OK), let buffer = image.pixels else {
            throw imageError(status: status, message: String(cString: message), name: name)
        }
        let count = Int(image.width) * Int(image.height) * Int(image.channels)
        self.width = Int(image.width)
        self.height = Int(image.height)
        self.channels = Int(image.channels)
        self.pixels = Array(UnsafeBufferPointer(start: buffer, count: count))
        self.format = image.format == Int32(UIMG_FORMAT_JPEG) ? .jpeg : .png
        self.hadAlpha = image.had_alpha != 0
        self.orientation = Int(image.orientation)
    }

    /// The format announced by the first bytes of `data`, if it is one this library decodes.
    public static func detectFormat(_ data: Data) -> Format? {
        let format = data.withUnsafeBytes { raw in
            uimg_detect_format(raw.bindMemory(to: UInt8.self).baseAddress, raw.count)
        }
        switch format {
        case Int32(UIMG_FORMAT_PNG): return .png
        case Int32(UIMG_FORMAT_JPEG): return .jpeg
        default: return nil
        }
    }
}

/// Maps a CImageIO status and message to an `UpdraftError` naming the file.
func imageError(status: Int32, message: String, name: String) -> UpdraftError {
    let text = "cannot decode image '\(name)': \(message)"
    switch status {
    case Int32(UIMG_ERR_IO):
        return UpdraftError(.io, text, hint: "check that the file exists and is readable")
    case Int32(UIMG_ERR_UNSUPPORTED):
        return UpdraftError(.unsupported, text, hint: "convert the image to PNG or JPEG (RGB or grayscale)")
    case Int32(UIMG_ERR_TOO_LARGE):
        return UpdraftError(.unsupported, text, hint: "downscale the image before training, or raise the cap with --max-image-pixels if the file is trusted")
    case Int32(UIMG_ERR_MEMORY):
        return UpdraftError(.io, text, hint: "free memory, or use smaller images")
    default:
        return UpdraftError(.data, text, hint: "re-export the image, or remove it from the dataset (or skip unreadable files)")
    }
}

/// What decoding may take: the pixel cap checked on each file's header before anything is decoded.
public struct ImageDecodingLimits: Equatable, Sendable {
    /// Pillow's `MAX_IMAGE_PIXELS` (89,478,485 pixels, about 9459x9459): a file Pillow opens without a
    /// decompression-bomb warning opens here.
    public static let defaultMaxPixels = Int(UIMG_DEFAULT_MAX_PIXELS)

    /// Largest `width * height` accepted.
    public var maxPixels: Int

    /// A limit of `maxPixels` pixels per image (default Pillow's 89,478,485).
    public init(maxPixels: Int = ImageDecodingLimits.defaultMaxPixels) {
        self.maxPixels = maxPixels
    }

    /// Pillow's pixel cap (`defaultMaxPixels`).
    public static let `default` = ImageDecodingLimits()

    /// Throws unless the cap is at least one pixel.
    public func validate() throws {
        guard maxPixels >= 1 else {
            throw UpdraftError(.invalidArgument, "the image pixel cap must be at least 1, got \(maxPixels)",
                               hint: "give --max-image-pixels a positive number (default \(Self.defaultMaxPixels))")
        }
    }

    func options(atLeast size: (width: Int, height: Int)?) -> uimg_decode_options {
        let clamp = { (v: Int) in UInt32(clamping: max(0, v)) }
        return uimg_decode_options(max_pixels: UInt64(max(1, maxPixels)),
                                   min_width: size.map { clamp($0.width) } ?? 0, min_height: size.map { clamp($0.height) } ?? 0)
    }
}

/// What an image file declares in its header, read without decoding it.
public struct ImageHeader: Equatable, Sendable {
    /// Columns, in pixels, as the header declares them (before EXIF orientation).
    public var width: Int
    /// Rows, in pixels, as the header declares them (before EXIF orientation).
    public var height: Int
    /// Samples per pixel as decoded, before alpha is composited (1...4).
    public var channels: Int
    /// The file's format (PNG or JPEG), from its first bytes.
    public var format: DecodedImage.Format
    /// A progressive JPEG or interlaced PNG: the decoder holds more than the pixels.
    public var progressive: Bool

    /// Reads the header of `path`, checked against `limits`. Only regular files are read (a FIFO or
    /// device is refused without blocking).
    /// - Throws: `UpdraftError` naming the file, as decoding would.
    public init(contentsOfFile path: String, limits: ImageDecodingLimits = .default) throws {
        var header = uimg_header()
        var message = [CChar](repeating: 0, count: 512)
        let status = uimg_probe_file(path, UInt64(max(1, limits.maxPixels)), &header, &message, message.count)
        guard status == Int32(UIMG_OK) else { throw imageError(status: status, message: String(cString: message), name: path) }
        width = Int(header.width)
        height = Int(header.height)
        channels = Int(header.channels)
        format = header.format == Int32(UIMG_FORMAT_JPEG) ? .jpeg : .png
        progressive = header.progressive != 0
    }

    /// Host memory decoding this image may hold at once, an upper estimate: the decoded samples (before
    /// alpha is composited); for a PNG also its inflated rows (as many bytes again, for the fast path),
    /// for a progressive JPEG libjpeg's coefficient buffers (2 bytes a sample).
    public var decodeBytes: Int {
        let samples = width * height * channels
        switch format {
        case .png: return samples * 2
        case .jpeg: return progressive ? samples * 3 : samples
        }
    }
}

/// Bounds the memory that image decoding holds across threads: each decode reserves its header's
/// estimate (`ImageHeader.decodeBytes`) first and waits while the others' reservations would pass the
/// budget. One image larger than the whole budget waits until it is alone, then runs, so nothing is
/// refused for the budget's sake; the pixel cap is what refuses.
public final class DecodeMemoryBudget: @unchecked Sendable {
    /// Shared by every decoder in the process: 1 GiB, enough for a few images at the pixel cap.
    public static let shared = DecodeMemoryBudget(bytes: 1 << 30)

    /// The budget: most bytes reserved at once across threads (at least 1).
    public let bytes: Int
    private let condition = NSCondition()
    private var reserved = 0
    /// The most reserved at once so far (tests read it).
    public private(set) var peakReserved = 0

    /// A budget of `bytes` (values below 1 become 1).
    public init(bytes: Int) {
        self.bytes = max(1, bytes)
    }

    /// Runs `body` with `amount` bytes reserved.
    public func withReservation<T>(_ amount: Int, _ body: () throws -> T) rethrows -> T {
        let amount = min(max(0, amount), bytes)
        condition.lock()
        while reserved + amount > bytes { condition.wait() }
        reserved += amount
        peakReserved = max(peakReserved, reserved)
        condition.unlock()
        defer {
            condition.lock()
            reserved -= amount
            condition.broadcast()
            condition.unlock()
        }
        return try body()
    }
}
