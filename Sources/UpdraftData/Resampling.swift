/// Antialiased resampling of 8-bit images, sample for sample the algorithm Pillow's `Image.resize`
/// uses (and so torchvision's `Resize` on PIL images): a separable filter whose support widens with
/// the downscaling factor, taps clipped to the source and their weights renormalised, weights in fixed
/// point with 22 fractional bits, the horizontal pass first into 8-bit rows (only the rows the
/// vertical pass reads), then the vertical pass, each rounded and clamped to 0...255.
public enum ResampleFilter: String, Sendable, CaseIterable {
    /// Pillow's BILINEAR (torchvision's default): a triangle of half-width 1, widened when downscaling.
    case triangle
    /// Pillow's BOX: each output sample the mean of the source samples its footprint covers (area).
    case area

    var support: Double { self == .triangle ? 1.0 : 0.5 }

    func weight(_ x: Double) -> Double {
        switch self {
        case .triangle:
            let a = abs(x)
            return a < 1 ? 1 - a : 0
        case .area:
            return x > -0.5 && x <= 0.5 ? 1 : 0
        }
    }
}

/// One axis's taps: for each output position, the first source index, the tap count, and fixed-point
/// weights (`count` of them, at `index * stride`).
struct ResampleTaps {
    static let precisionBits = 22

    var first: [Int]
    var count: [Int]
    var weights: [Int32]
    var stride: Int

    /// Taps for output positions `outStart..<outStart + outCount` of a resize from `inSize` samples to
    /// `outSize`. Positions outside `0..<outSize` get no taps (they are filled with 0, as a crop larger
    /// than the image pads).
    init(inSize: Int, outSize: Int, outStart: Int = 0, outCount: Int? = nil, filter: ResampleFilter) {
        let outCount = outCount ?? outSize
        let scale = Double(inSize) / Double(outSize)
        let filterScale = max(scale, 1)
        let support = filter.support * filterScale
        stride = Int(support.rounded(.up)) * 2 + 1
        first = [Int](repeating: 0, count: outCount)
        count = [Int](repeating: 0, count: outCount)
        weights = [Int32](repeating: 0, count: outCount * stride)
        var k = [Double](repeating: 0, count: stride)
        for i in 0..<outCount {
            let o = outStart + i
            guard o >= 0 && o < outSize else { continue }
            let center = (Double(o) + 0.5) * scale
            // C's (int) truncates toward zero, as Pillow's does.
            let lo = max(0, Int(center - support + 0.5))
            let hi = min(inSize, Int(center + support + 0.5))
            let n = max(0, min(hi - lo, stride))
            var total = 0.0
            for x in 0..<n {
                let w = filter.weight((Double(x + lo) - center + 0.5) / filterScale)
                k[x] = w
                total += w
            }
            first[i] = lo
            count[i] = n
            for x in 0..<n {
                let w = total != 0 ? k[x] / total : 0
                let fixed = w * Double(1 << Self.precisionBits)
                weights[i * stride + x] = Int32(fixed < 0 ? fixed - 0.5 : fixed + 0.5)
            }
        }
    }
}

@inline(__always)
private func clip8(_ sum: Int32) -> UInt8 {
    let v = sum >> Int32(ResampleTaps.precisionBits)
    return v < 0 ? 0 : v > 255 ? 255 : UInt8(v)
}

/// A rectangle of an image, in pixels.
public struct PixelRect: Equatable, Sendable, CustomStringConvertible {
    /// Left edge, in pixels from the image's left.
    public var x: Int
    /// Top edge, in pixels from the image's top.
    public var y: Int
    /// Columns covered, in pixels.
    public var width: Int
    /// Rows covered, in pixels.
    public var height: Int
    /// The `width` x `height` rectangle whose top-left corner is (x, y).
    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x; self.y = y; self.width = width; self.height = height
    }
    /// "WxH at (x, y)", for messages.
    public var description: String { "\(width)x\(height) at (\(x), \(y))" }
}

/// Resamples `source` (interleaved samples, `channels` per pixel, `sourceWidth` pixels a row) —
/// the rectangle `rect` of it, taken as an image of its own, as Pillow's `crop` then `resize` do — to
/// `outWidth` x `outHeight`, and writes the output window `window` (a center crop; parts outside the
/// resized image are 0) planar into `out`: plane `p` of `planes` takes source channel `planes[p]`.
func resample(_ source: UnsafePointer<UInt8>, sourceWidth: Int, channels: Int, rect: PixelRect,
              outWidth: Int, outHeight: Int, window: PixelRect, filter: ResampleFilter,
              planes: [Int], into out: UnsafeMutablePointer<UInt8>) {
    let planeSize = window.width * window.height
    // A plane repeating the one before it (gray drawn as RGB) is computed once and copied.
    if planes.count > 1 && planes.allSatisfy({ $0 == planes[0] }) {
        resample(source, sourceWidth: sourceWidth, channels: channels, rect: rect, outWidth: outWidth, outHeight: outHeight,
                 window: window, filter: filter, planes: [planes[0]], into: out)
        for p in 1..<planes.count { (out + p * planeSize).update(from: out, count: planeSize) }
        return
    }
    let xs = ResampleTaps(inSize: rect.width, outSize: outWidth, outStart: window.x, outCount: window.width, filter: filter)
    let ys = ResampleTaps(inSize: rect.height, outSize: outHeight, outStart: window.y, outCount: window.height, filter: filter)
    out.initialize(repeating: 0, count: planeSize * planes.count)
    // The source rows the vertical pass reads.
    var rowLo = Int.max, rowHi = 0
    for i in 0..<window.height where ys.count[i] > 0 {
        rowLo = min(rowLo, ys.first[i]); rowHi = max(rowHi, ys.first[i] + ys.count[i])
    }
    guard rowLo < rowHi else { return }
    let rows = rowHi - rowLo
    // Horizontal pass: planar 8-bit rows, one plane per output plane. Skipped (a copy) when the width
    // does not change, as Pillow skips it.
    let sameWidth = outWidth == rect.width && window.x == 0 && window.width == outWidth
    // Three planes taking the three channels in some order: all three in one sweep over each pixel's taps.
    let threeChannels = channels == 3 && planes.count == 3 && Set(planes) == [0, 1, 2]
    // The plane each source channel goes to, for that case.
    let planeOf = threeChannels ? (planes.firstIndex(of: 0)!, planes.firstIndex(of: 1)!, planes.firstIndex(of: 2)!) : (0, 0, 0)
    let half: Int32 = 1 << Int32(ResampleTaps.precisionBits - 1)
    var temp = [UInt8](repeating: 0, count: planes.count * rows * window.width)
    temp.withUnsafeMutableBufferPointer { tmp in
        xs.weights.withUnsafeBufferPointer { kx in
        xs.count.withUnsafeBufferPointer { xcount in
        xs.first.withUnsafeBufferPointer { xfirst in
            for r in 0..<rows {
                let src = source + ((rect.y + rowLo + r) * sourceWidth + rect.x) * channels
                if threeChannels && !sameWidth {
                    let d0 = tmp.baseAddress! + (planeOf.0 * rows + r) * window.width
                    let d1 = tmp.baseAddress! + (planeOf.1 * rows + r) * window.width
                    let d2 = tmp.baseAddress! + (planeOf.2 * rows + r) * window.width
                    for x in 0..<window.width {
                        let n = xcount[x]
                        var s0 = half, s1 = half, s2 = half
                        var s = src + xfirst[x] * 3
                        let k = kx.baseAddress! + x * xs.stride
                        for t in 0..<n {
                            let w = k[t]
                            s0 &+= Int32(s[0]) &* w
                            s1 &+= Int32(s[1]) &* w
                            s2 &+= Int32(s[2]) &* w
                            s += 3
                        }
                        // No taps (outside the resized image): 0, as the initialised output is.
                        d0[x] = n == 0 ? 0 : clip8(s0)
                        d1[x] = n == 0 ? 0 : clip8(s1)
                        d2[x] = n == 0 ? 0 : clip8(s2)
                    }
                    continue
                }
                for (p, c) in planes.enumerated() {
                    let dst = tmp.baseAddress! + (p * rows + r) * window.width
                    if sameWidth {
                        for x in 0..<window.width { dst[x] = src[x * channels + c] }
                        continue
                    }
                    for x in 0..<window.width {
                        let n = xcount[x]
                        if n == 0 { dst[x] = 0; continue }
                        var sum: Int32 = half
                        var s = src + xfirst[x] * channels + c
                        let k = kx.baseAddress! + x * xs.stride
                        for t in 0..<n {
                            sum &+= Int32(s.pointee) &* k[t]
                            s += channels
                        }
                        dst[x] = clip8(sum)
                    }
                }
            }
        }
        }
        }
    }
    // Vertical pass.
    let acc = UnsafeMutablePointer<Int32>.allocate(capacity: max(1, window.width))
    defer { acc.deallocate() }
    let sameHeight = outHeight == rect.height && window.y == 0 && window.height == outHeight
    temp.withUnsafeBufferPointer { tmp in
        ys.weights.withUnsafeBufferPointer { ky in
        ys.count.withUnsafeBufferPointer { ycount in
        ys.first.withUnsafeBufferPointer { yfirst in
            for p in 0..<planes.count {
                let plane = tmp.baseAddress! + p * rows * window.width
                let dst = out + p * planeSize
                for y in 0..<window.height {
                    let n = ycount[y]
                    if n == 0 { continue }
                    let row = dst + y * window.width
                    if sameHeight {
                        let src = plane + (yfirst[y] - rowLo) * window.width
                        row.update(from: src, count: window.width)
                        continue
                    }
                    let k = ky.baseAddress! + y * ys.stride
                    // Row by row over the taps (contiguous, vectorisable), accumulating into `acc`.
                    let base = plane + (yfirst[y] - rowLo) * window.width
                    for x in 0..<window.width { acc[x] = 1 << Int32(ResampleTaps.precisionBits - 1) }
                    for t in 0..<n {
                        let w = k[t], src = base + t * window.width
                        for x in 0..<window.width { acc[x] &+= Int32(src[x]) &* w }
                    }
                    for x in 0..<window.width { row[x] = clip8(acc[x]) }
                }
            }
        }
        }
        }
    }
}
