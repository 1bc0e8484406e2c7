import CImageIO
import Foundation

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
    public enum Format: String, Sendable {
        case png, jpeg
    }

    public var width: Int
    public var height: Int
    public var channels: Int
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
        var image = uimg_image()
        var message = [CChar](repeating: 0, count: 512)
        let status = uimg_decode_file(path, &image, &message, message.count)
        try self.init(taking: &image, status: status, message: message, name: path)
    }

    public init(contentsOf url: URL) throws {
        try self.init(contentsOfFile: url.path)
    }

    /// Decodes PNG or JPEG bytes held in memory; `name` is used in error messages.
    public init(data: Data, name: String) throws {
        var image = uimg_image()
        var message = [CChar](repeating: 0, count: 512)
        let status = data.withUnsafeBytes { raw -> Int32 in
            let bytes = raw.bindMemory(to: UInt8.self)
            return uimg_decode_memory(bytes.baseAddress, bytes.count, &image, &message, message.count)
        }
        try self.init(taking: &image, status: status, message: message, name: name)
    }

    public init(bytes: [UInt8], name: String) throws {
        try self.init(data: Data(bytes), name: name)
    }

    /// Copies the C library's buffer into Swift storage and releases it, or turns its error into an
    /// `UpdraftError`.
    private init(taking image: inout uimg_image, status: Int32, message: [CChar], name: String) throws {
        defer { uimg_free(image.pixels) }
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
        return UpdraftError(.unsupported, text, hint: "downscale the image before training")
    case Int32(UIMG_ERR_MEMORY):
        return UpdraftError(.io, text, hint: "free memory, or use smaller images")
    default:
        return UpdraftError(.data, text, hint: "re-export the image, or remove it from the dataset (or skip unreadable files)")
    }
}
