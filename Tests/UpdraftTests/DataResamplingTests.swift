import XCTest
@testable import UpdraftCore
@testable import UpdraftData
@testable import UpdraftTraining

/// The resampler's two horizontal passes: the one sweeping an RGB pixel's taps once for all three
/// channels must give exactly what the channel-at-a-time pass gives, and a plane repeated for gray
/// drawn as RGB must equal computing it each time.
final class DataResamplingTests: XCTestCase {
    private func run(_ source: [UInt8], width: Int, height: Int, channels: Int, rect: PixelRect, outWidth: Int, outHeight: Int,
                     window: PixelRect, filter: ResampleFilter, planes: [Int]) -> [UInt8] {
        var out = [UInt8](repeating: 7, count: planes.count * window.width * window.height)
        source.withUnsafeBufferPointer { s in
            out.withUnsafeMutableBufferPointer {
                resample(s.baseAddress!, sourceWidth: width, channels: channels, rect: rect, outWidth: outWidth,
                         outHeight: outHeight, window: window, filter: filter, planes: planes, into: $0.baseAddress!)
            }
        }
        return out
    }

    func testAllChannelsAtOnceEqualsOneChannelAtATime() {
        var rng = SplitMix64(seed: 0x5E5A)
        // (source, crop rectangle, resized size, output window): down, up, odd sizes, a window past the
        // image's edges (padding), an unchanged width (the copy path) and a crop of the source.
        let cases: [(Int, Int, PixelRect, Int, Int, PixelRect)] = [
            (500, 375, PixelRect(x: 0, y: 0, width: 500, height: 375), 345, 259, PixelRect(x: 59, y: 16, width: 227, height: 227)),
            (37, 23, PixelRect(x: 0, y: 0, width: 37, height: 23), 80, 50, PixelRect(x: 3, y: 2, width: 60, height: 45)),
            (31, 17, PixelRect(x: 0, y: 0, width: 31, height: 17), 11, 7, PixelRect(x: -2, y: -1, width: 15, height: 9)),
            (40, 30, PixelRect(x: 0, y: 0, width: 40, height: 30), 40, 20, PixelRect(x: 0, y: 0, width: 40, height: 20)),
            (64, 48, PixelRect(x: 5, y: 7, width: 33, height: 21), 13, 29, PixelRect(x: 0, y: 0, width: 13, height: 29)),
            (1, 1, PixelRect(x: 0, y: 0, width: 1, height: 1), 3, 2, PixelRect(x: 0, y: 0, width: 3, height: 2)),
        ]
        for (width, height, rect, outWidth, outHeight, window) in cases {
            let rgb = (0..<(width * height * 3)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            for filter in ResampleFilter.allCases {
                let what = "\(width)x\(height) \(rect) -> \(outWidth)x\(outHeight) \(window) \(filter)"
                let single = (0..<3).map {
                    run(rgb, width: width, height: height, channels: 3, rect: rect, outWidth: outWidth, outHeight: outHeight,
                        window: window, filter: filter, planes: [$0])
                }
                for planes in [[0, 1, 2], [2, 1, 0]] {
                    let fused = run(rgb, width: width, height: height, channels: 3, rect: rect, outWidth: outWidth,
                                    outHeight: outHeight, window: window, filter: filter, planes: planes)
                    XCTAssertEqual(fused, planes.flatMap { single[$0] }, "\(what) planes \(planes)")
                }
                let gray = Array(rgb.prefix(width * height))
                let once = run(gray, width: width, height: height, channels: 1, rect: rect, outWidth: outWidth, outHeight: outHeight,
                               window: window, filter: filter, planes: [0])
                let repeated = run(gray, width: width, height: height, channels: 1, rect: rect, outWidth: outWidth,
                                   outHeight: outHeight, window: window, filter: filter, planes: [0, 0, 0])
                XCTAssertEqual(repeated, once + once + once, what)
            }
        }
    }
}
