import Foundation
import UpdraftData

/// An 8-bit RGB color.
public struct RGB: Equatable, Sendable {
    /// Red, green and blue intensities, 0...255.
    public var r: UInt8, g: UInt8, b: UInt8
    /// The color with these red, green and blue values (0...255).
    public init(_ r: UInt8, _ g: UInt8, _ b: UInt8) { self.r = r; self.g = g; self.b = b }
    /// White: (255, 255, 255); the default canvas background.
    public static let white = RGB(255, 255, 255)
    /// Black: (0, 0, 0); the default text color.
    public static let black = RGB(0, 0, 0)

    /// This color mixed with `other`: `t` = 0 gives self, 1 gives other.
    func mixed(with other: RGB, _ t: Double) -> RGB {
        func m(_ a: UInt8, _ b: UInt8) -> UInt8 { UInt8((Double(a) * (1 - t) + Double(b) * t).rounded()) }
        return RGB(m(r, other.r), m(g, other.g), m(b, other.b))
    }
}

/// An RGB raster with the few drawing operations the training plots need: filled rectangles,
/// anti-aliased thick lines, dots and bitmap-font text. Coordinates are pixels, y down; anything
/// outside the canvas is clipped.
public struct Canvas: Sendable {
    /// Columns, in pixels (> 0).
    public let width: Int
    /// Rows, in pixels (> 0).
    public let height: Int
    /// Row-major RGB samples, 3 bytes a pixel.
    public private(set) var samples: [UInt8]

    /// A `width` x `height` canvas filled with `background` (white by default); both sizes must be positive (a precondition).
    public init(width: Int, height: Int, background: RGB = .white) {
        precondition(width > 0 && height > 0, "a canvas needs a positive size")
        self.width = width; self.height = height
        samples = [UInt8](repeating: 0, count: width * height * 3)
        fill(x: 0, y: 0, width: width, height: height, background)
    }

    /// The color at (x, y); the point must be inside the canvas (not clipped).
    public func pixel(x: Int, y: Int) -> RGB {
        let i = (y * width + x) * 3
        return RGB(samples[i], samples[i + 1], samples[i + 2])
    }

    /// Blends `color` over the pixel at (x, y) with coverage `alpha` (0...1).
    mutating func blend(x: Int, y: Int, _ color: RGB, alpha: Double = 1) {
        guard x >= 0, y >= 0, x < width, y < height, alpha > 0 else { return }
        let i = (y * width + x) * 3
        let old = RGB(samples[i], samples[i + 1], samples[i + 2])
        let new = alpha >= 1 ? color : old.mixed(with: color, alpha)
        samples[i] = new.r; samples[i + 1] = new.g; samples[i + 2] = new.b
    }

    /// Fills the `w` x `h` rectangle whose top-left corner is (x, y) with `color`, clipped to the canvas.
    public mutating func fill(x: Int, y: Int, width w: Int, height h: Int, _ color: RGB) {
        let x0 = max(0, x), x1 = min(width, x + w), y0 = max(0, y), y1 = min(height, y + h)
        guard x0 < x1, y0 < y1 else { return }
        for yy in y0..<y1 {
            for xx in x0..<x1 { blend(x: xx, y: yy, color) }
        }
    }

    /// A line of `thickness` pixels from (x0, y0) to (x1, y1), its edges anti-aliased; `dash` > 0
    /// draws dashes and gaps of that many pixels.
    public mutating func line(_ x0: Double, _ y0: Double, _ x1: Double, _ y1: Double,
                              _ color: RGB, thickness: Double = 1, dash: Double = 0) {
        let dx = x1 - x0, dy = y1 - y0
        let length = (dx * dx + dy * dy).squareRoot()
        let half = thickness / 2
        let minX = Int((min(x0, x1) - half - 1).rounded(.down)), maxX = Int((max(x0, x1) + half + 1).rounded(.up))
        let minY = Int((min(y0, y1) - half - 1).rounded(.down)), maxY = Int((max(y0, y1) + half + 1).rounded(.up))
        for py in max(0, minY)...max(max(0, minY), min(height - 1, maxY)) {
            for px in max(0, minX)...max(max(0, minX), min(width - 1, maxX)) {
                // Distance from the pixel's centre to the segment, and how far along it the pixel lies.
                let cx = Double(px) + 0.5, cy = Double(py) + 0.5
                var t = length > 0 ? ((cx - x0) * dx + (cy - y0) * dy) / (length * length) : 0
                t = min(1, max(0, t))
                if dash > 0, Int((t * length / dash).rounded(.down)) % 2 == 1 { continue }
                let ex = x0 + t * dx - cx, ey = y0 + t * dy - cy
                let distance = (ex * ex + ey * ey).squareRoot()
                let coverage = min(1, max(0, half + 0.5 - distance))
                blend(x: px, y: py, color, alpha: coverage)
            }
        }
    }

    /// A filled, anti-aliased disc centred at (x, y).
    public mutating func dot(_ x: Double, _ y: Double, radius: Double, _ color: RGB) {
        line(x, y, x, y, color, thickness: radius * 2)
    }

    /// `text` in the bitmap font, each font pixel drawn as `scale` x `scale` pixels, its top-left
    /// corner at (x, y). `vertical` draws it rotated a quarter turn counter-clockwise, reading
    /// upwards from (x, y) as its bottom-left corner.
    public mutating func text(_ text: String, x: Int, y: Int, scale: Int = 2, _ color: RGB = .black,
                              vertical: Bool = false) {
        for (i, character) in text.enumerated() {
            for (gx, gy) in BitmapFont.pixels(of: character) {
                let along = (i * BitmapFont.advance + gx) * scale
                let across = gy * scale
                if vertical {
                    fill(x: x + across, y: y - along - scale, width: scale, height: scale, color)
                } else {
                    fill(x: x + along, y: y + across, width: scale, height: scale, color)
                }
            }
        }
    }

    /// Width in pixels of `text` drawn at `scale`.
    public static func textWidth(_ text: String, scale: Int = 2) -> Int { BitmapFont.width(of: text) * scale }
    /// Height in pixels of a line of text drawn at `scale`.
    public static func textHeight(scale: Int = 2) -> Int { BitmapFont.glyphHeight * scale }

    /// The canvas as an 8-bit RGB PNG file.
    public func png() throws -> [UInt8] {
        try ImageEncoder.png(width: width, height: height, colorType: .rgb, samples: samples)
    }
}
