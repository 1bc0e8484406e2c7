import XCTest
@testable import UpdraftCore

/// Core ML's output-size and padding rules for convolution and pooling (see coreml-training.md):
///   valid: out = floor((in + before + after - kEff) / stride) + 1, kEff = (k - 1) * dilation + 1
///   same:  out = ceil(in / stride), total = max(0, (out - 1) * stride + kEff - in),
///          bottom-right-heavy puts floor(total / 2) before, top-left-heavy ceil(total / 2)
///   includeLastPixel (pooling): out = ceil((in + 2p - k) / stride) + 1, minus 1 when the last window
///          would start at or past in + p.
final class PaddingRulesTests: XCTestCase {
    func conv(_ h: Int, _ w: Int, k: (Int, Int), stride: Int = 1, dilation: Int = 1,
              padding: ConvolutionPadding) throws -> ConvGeometry {
        try ConvolutionSpec(inputChannels: 1, outputChannels: 1, kernelH: k.0, kernelW: k.1, strideH: stride, strideW: stride,
                            dilationH: dilation, dilationW: dilation, padding: padding).geometry(input: [1, 1, h, w])
    }

    func pool(_ h: Int, _ w: Int, k: Int, stride: Int, padding: PoolingPadding) throws -> PoolGeometry {
        try PoolingSpec(kind: .max, kernelH: k, kernelW: k, strideH: stride, strideW: stride, padding: padding)
            .geometry(input: [1, 1, h, w])
    }

    // MARK: Convolution

    func testConvolutionValidPaddingFloors() throws {
        // (7 - 3) / 2 + 1 = 3; (7 + 1 - 3) / 2 = 2.5 -> 2, + 1 = 3; (7 + 2 - 3) / 2 + 1 = 4
        XCTAssertEqual(try conv(7, 7, k: (3, 3), stride: 2, padding: .none).outHeight, 3)
        let asymmetric = try conv(7, 9, k: (3, 3), stride: 2, padding: .valid(top: 1, bottom: 0, left: 1, right: 1))
        XCTAssertEqual(asymmetric.outHeight, 3)
        XCTAssertEqual(asymmetric.outWidth, 5)  // (9 + 2 - 3) / 2 + 1
        XCTAssertEqual([asymmetric.padTop, asymmetric.padBottom, asymmetric.padLeft, asymmetric.padRight], [1, 0, 1, 1])
        // dilation 2 makes a 3-tap kernel span 5: (7 - 5) + 1 = 3
        XCTAssertEqual(try conv(7, 7, k: (3, 3), dilation: 2, padding: .none).outHeight, 3)
    }

    func testConvolutionSamePaddingBothModes() throws {
        // in 7, stride 2: out 4, total = 3 * 2 + 3 - 7 = 2 -> 1 before, 1 after in both modes
        let odd = try conv(7, 7, k: (3, 3), stride: 2, padding: .same(.bottomRightHeavy))
        XCTAssertEqual([odd.outHeight, odd.padTop, odd.padBottom], [4, 1, 1])
        // even kernel 2, stride 1, in 5: out 5, total 1 -> the odd row goes bottom/right by default
        let bottomRight = try conv(5, 5, k: (2, 2), padding: .same(.bottomRightHeavy))
        XCTAssertEqual([bottomRight.outHeight, bottomRight.padTop, bottomRight.padBottom,
                        bottomRight.padLeft, bottomRight.padRight], [5, 0, 1, 0, 1])
        let topLeft = try conv(5, 5, k: (2, 2), padding: .same(.topLeftHeavy))
        XCTAssertEqual([topLeft.outHeight, topLeft.padTop, topLeft.padBottom, topLeft.padLeft, topLeft.padRight],
                       [5, 1, 0, 1, 0])
        // in 6, kernel 4, stride 2: out 3, total = 2 * 2 + 4 - 6 = 2 -> 1 / 1
        let even = try conv(6, 6, k: (4, 4), stride: 2, padding: .same(.topLeftHeavy))
        XCTAssertEqual([even.outHeight, even.padTop, even.padBottom], [3, 1, 1])
        // kernel 1 with stride 2 never needs padding: total = max(0, 2 * 2 + 1 - 5) = 0
        let strided = try conv(5, 5, k: (1, 1), stride: 2, padding: .same(.bottomRightHeavy))
        XCTAssertEqual([strided.outHeight, strided.padTop, strided.padBottom], [3, 0, 0])
        // a kernel larger than the input is fine under same padding: in 1, k 5 -> total 4
        let wide = try conv(1, 1, k: (5, 5), padding: .same(.bottomRightHeavy))
        XCTAssertEqual([wide.outHeight, wide.padTop, wide.padBottom], [1, 2, 2])
        // dilated same: in 8, k 3, d 2 (kEff 5), stride 2: out 4, total = 6 + 5 - 8 = 3 -> 1 / 2 or 2 / 1
        let dilated = try conv(8, 8, k: (3, 3), stride: 2, dilation: 2, padding: .same(.bottomRightHeavy))
        XCTAssertEqual([dilated.outHeight, dilated.padTop, dilated.padBottom], [4, 1, 2])
        let dilatedTopLeft = try conv(8, 8, k: (3, 3), stride: 2, dilation: 2, padding: .same(.topLeftHeavy))
        XCTAssertEqual([dilatedTopLeft.padTop, dilatedTopLeft.padBottom], [2, 1])
    }

    func testConvolutionKernelLargerThanPaddedInputThrows() throws {
        XCTAssertThrowsError(try conv(3, 3, k: (5, 5), padding: .none)) { error in
            XCTAssertEqual((error as? UpdraftError)?.kind, .invalidArgument)
            XCTAssertTrue("\(error)".contains("larger than the padded input"), "\(error)")
        }
        XCTAssertEqual(try conv(3, 3, k: (5, 5), padding: .valid(top: 1, bottom: 1, left: 1, right: 1)).outHeight, 1)
        XCTAssertThrowsError(try conv(3, 3, k: (5, 5), padding: .valid(top: 1, bottom: 0, left: 1, right: 1)))
        // dilation 3 turns a 3-tap kernel into 7: too large for 5, exactly right for 5 + 1 + 1
        XCTAssertThrowsError(try conv(5, 5, k: (3, 3), dilation: 3, padding: .none))
        XCTAssertEqual(try conv(5, 5, k: (3, 3), dilation: 3, padding: .valid(top: 1, bottom: 1, left: 1, right: 1)).outHeight, 1)
        // only one axis too small still throws
        XCTAssertThrowsError(try conv(9, 2, k: (3, 3), padding: .none))
    }

    func testConvolutionSpecErrors() {
        let spec = ConvolutionSpec(inputChannels: 4, outputChannels: 6, kernelH: 3, kernelW: 3, groups: 4)
        XCTAssertThrowsError(try spec.geometry(input: [1, 4, 5, 5]))  // 4 groups do not divide 6 outputs
        XCTAssertThrowsError(try ConvolutionSpec(inputChannels: 3, outputChannels: 1, kernelH: 1, kernelW: 1)
            .geometry(input: [1, 4, 5, 5]))  // wrong channel count
        XCTAssertThrowsError(try ConvolutionSpec(inputChannels: 3, outputChannels: 1, kernelH: 1, kernelW: 1)
            .geometry(input: [3, 5, 5]))  // not NCHW
        XCTAssertThrowsError(try conv(5, 5, k: (3, 3), stride: 0, padding: .none))
        XCTAssertThrowsError(try conv(5, 5, k: (3, 3), padding: .valid(top: -1, bottom: 0, left: 0, right: 0)))
    }

    // MARK: Pooling

    func testPoolingValidFloorsAndSameCeils() throws {
        // valid floors: (5 - 2) / 2 + 1 = 2 (the last row is dropped)
        XCTAssertEqual(try pool(5, 5, k: 2, stride: 2, padding: .none).outHeight, 2)
        let asymmetric = try pool(6, 7, k: 3, stride: 2, padding: .valid(top: 1, bottom: 0, left: 2, right: 1))
        XCTAssertEqual([asymmetric.outHeight, asymmetric.outWidth], [3, 4])  // (6+1-3)/2+1, (7+3-3)/2+1
        // same: ceil(5 / 2) = 3, total = 2 * 2 + 2 - 5 = 1
        let same = try pool(5, 5, k: 2, stride: 2, padding: .same(.bottomRightHeavy))
        XCTAssertEqual([same.outHeight, same.padTop, same.padBottom], [3, 0, 1])
        let sameTopLeft = try pool(5, 5, k: 2, stride: 2, padding: .same(.topLeftHeavy))
        XCTAssertEqual([sameTopLeft.outHeight, sameTopLeft.padTop, sameTopLeft.padBottom], [3, 1, 0])
    }

    func testPoolingIncludeLastPixelIsCeilMode() throws {
        // 4, k 3, s 2: ceil((4 - 3) / 2) + 1 = 2; the second window (rows 2..4) hangs over the edge
        let hanging = try pool(4, 4, k: 3, stride: 2, padding: .includeLastPixel(height: 0, width: 0))
        XCTAssertEqual(hanging.outHeight, 2)
        XCTAssertEqual(try pool(4, 4, k: 3, stride: 2, padding: .none).outHeight, 1)  // floor would give 1
        // SqueezeNet's pools: 113 -> 56, 56 -> 28 (floor would give 56 and 27)
        XCTAssertEqual(try pool(113, 113, k: 3, stride: 2, padding: .includeLastPixel(height: 0, width: 0)).outHeight, 56)
        XCTAssertEqual(try pool(56, 56, k: 3, stride: 2, padding: .includeLastPixel(height: 0, width: 0)).outHeight, 28)
        XCTAssertEqual(try pool(55, 55, k: 3, stride: 2, padding: .includeLastPixel(height: 0, width: 0)).outHeight, 27)
        // the minus-one rule: 5, k 2, s 2, p 1: ceil(5 / 2) + 1 = 4, but the 4th window would start at
        // 3 * 2 = 6 >= 5 + 1 in padded coordinates (entirely in padding), so 3 windows
        let dropped = try pool(5, 5, k: 2, stride: 2, padding: .includeLastPixel(height: 1, width: 1))
        XCTAssertEqual(dropped.outHeight, 3)
        XCTAssertEqual([dropped.padTop, dropped.padBottom], [1, 1])
        // 4, k 3, s 2, p 1: ceil(3 / 2) + 1 = 3, last window starts at 4 < 5: kept
        XCTAssertEqual(try pool(4, 4, k: 3, stride: 2, padding: .includeLastPixel(height: 1, width: 1)).outHeight, 3)
        // asymmetric axes
        let mixed = try pool(6, 5, k: 3, stride: 2, padding: .includeLastPixel(height: 0, width: 1))
        XCTAssertEqual([mixed.outHeight, mixed.outWidth], [3, 3])
    }

    func testPoolingWindowLargerThanPaddedInputThrows() throws {
        XCTAssertThrowsError(try pool(2, 2, k: 3, stride: 1, padding: .none)) { error in
            XCTAssertTrue("\(error)".contains("larger than the padded input"), "\(error)")
        }
        XCTAssertThrowsError(try pool(2, 2, k: 4, stride: 1, padding: .includeLastPixel(height: 0, width: 0)))
        XCTAssertEqual(try pool(2, 2, k: 4, stride: 1, padding: .includeLastPixel(height: 1, width: 1)).outHeight, 1)
        XCTAssertEqual(try pool(2, 2, k: 4, stride: 1, padding: .valid(top: 1, bottom: 1, left: 1, right: 1)).outHeight, 1)
        XCTAssertThrowsError(try pool(5, 5, k: 0, stride: 1, padding: .none))
        XCTAssertThrowsError(try PoolingSpec(kind: .max).geometry(input: [4, 4]))
    }

    func testGlobalPoolingIgnoresKernelAndPadding() throws {
        let g = try PoolingSpec(kind: .average, kernelH: 9, kernelW: 9, strideH: 5, strideW: 5,
                                padding: .valid(top: 3, bottom: 3, left: 3, right: 3), excludePadding: false, global: true)
            .geometry(input: [2, 3, 13, 7])
        XCTAssertEqual(g.outputShape, [2, 3, 1, 1])
        XCTAssertEqual([g.kernelH, g.kernelW, g.padTop, g.padLeft], [13, 7, 0, 0])
    }
}
