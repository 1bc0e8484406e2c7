import XCTest
@testable import UpdraftCore

/// Small cases of every reference op, worked by hand (the arithmetic is in the comments).
final class ReferenceOpsTests: XCTestCase {
    func assertClose(_ got: [Double], _ expected: [Double], accuracy: Double = 1e-12,
                     file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(got.count, expected.count, "length", file: file, line: line)
        for (i, (g, e)) in zip(got, expected).enumerated() where !(abs(g - e) <= accuracy) {
            XCTFail("element \(i): got \(g), expected \(e)\n got \(got)\n expected \(expected)", file: file, line: line)
            return
        }
    }

    func conv(_ input: Shape, out: Int, k: Int, stride: Int = 1, dilation: Int = 1, groups: Int = 1,
              padding: ConvolutionPadding = .none, bias: Bool = true) throws -> ConvGeometry {
        try ConvolutionSpec(inputChannels: input.c, outputChannels: out, kernelH: k, kernelW: k,
                            strideH: stride, strideW: stride, dilationH: dilation, dilationW: dilation,
                            groups: groups, padding: padding, hasBias: bias).geometry(input: input)
    }

    // MARK: Convolution

    /// 3x3 ones kernel, padding 1, on
    ///   1 2 3
    ///   4 5 6
    ///   7 8 9
    /// Each output is the sum of its in-image 3x3 neighbourhood, plus the bias 1.
    func testConvolution3x3WithPadding() throws {
        let g = try conv([1, 1, 3, 3], out: 1, k: 3, padding: .valid(top: 1, bottom: 1, left: 1, right: 1))
        XCTAssertEqual(g.outputShape, [1, 1, 3, 3])
        let x: [Double] = [1, 2, 3, 4, 5, 6, 7, 8, 9], w = [Double](repeating: 1, count: 9)
        let y = try Reference.convolutionForward(g, input: x, weights: w, bias: [1])
        assertClose(y, [12, 21, 16, 27, 45, 33, 24, 39, 28].map { $0 + 1 })

        // dy = 1 everywhere: dx counts the windows covering each pixel (corners 4, edges 6, centre 9)
        let ones = [Double](repeating: 1, count: 9)
        assertClose(try Reference.convolutionBackwardData(g, outputGradient: ones, weights: w), [4, 6, 4, 6, 9, 6, 4, 6, 4])
        // dw[kh][kw] sums the input seen by tap (kh, kw) over all outputs: tap (0,0) sees rows 0-1,
        // cols 0-1 (1+2+4+5 = 12), the centre tap sees everything (45); db sums dy (9).
        let (dw, db) = try Reference.convolutionBackwardWeights(g, input: x, outputGradient: ones)
        assertClose(dw, [12, 21, 16, 27, 45, 33, 24, 39, 28])
        assertClose(db, [9])
    }

    /// Cross-correlation, not convolution: kernel [[1, 2], [3, 4]] is not flipped.
    /// (0,0) = 1*1 + 2*2 + 3*4 + 4*5 = 37, (0,1) = 1*2 + 2*3 + 3*5 + 4*6 = 47,
    /// (1,0) = 1*4 + 2*5 + 3*7 + 4*8 = 67, (1,1) = 1*5 + 2*6 + 3*8 + 4*9 = 77.
    func testConvolutionIsCrossCorrelation() throws {
        let g = try ConvolutionSpec(inputChannels: 1, outputChannels: 1, kernelH: 2, kernelW: 2, hasBias: false)
            .geometry(input: [1, 1, 3, 3])
        let y = try Reference.convolutionForward(g, input: [1, 2, 3, 4, 5, 6, 7, 8, 9], weights: [1, 2, 3, 4], bias: nil)
        assertClose(y, [37, 47, 67, 77])
    }

    /// Stride 2 over a 5x5 ramp x = 5h + w with a 1x1 kernel of 2 picks rows/columns 0, 2, 4.
    func testConvolutionStride() throws {
        let g = try conv([1, 1, 5, 5], out: 1, k: 1, stride: 2, bias: false)
        let x = (0..<25).map(Double.init)
        assertClose(try Reference.convolutionForward(g, input: x, weights: [2], bias: nil),
                    [0, 2, 4, 10, 12, 14, 20, 22, 24].map { 2 * $0 })
        // backward routes dy only to the sampled positions
        let dx = try Reference.convolutionBackwardData(g, outputGradient: [Double](repeating: 1, count: 9), weights: [2])
        XCTAssertEqual(dx.filter { $0 != 0 }.count, 9)
        XCTAssertEqual(dx[12], 2)
        XCTAssertEqual(dx[1], 0)
    }

    /// Dilation 2: a 3x3 ones kernel on a 5x5 ramp x = 5h + w reads h, w in {0, 2, 4}:
    /// sum = 3 * 5 * (0 + 2 + 4) + 3 * (0 + 2 + 4) = 108.
    func testConvolutionDilation() throws {
        let g = try conv([1, 1, 5, 5], out: 1, k: 3, dilation: 2, bias: false)
        XCTAssertEqual(g.outputShape, [1, 1, 1, 1])
        let y = try Reference.convolutionForward(g, input: (0..<25).map(Double.init),
                                                 weights: [Double](repeating: 1, count: 9), bias: nil)
        assertClose(y, [108])
    }

    /// Groups: with 2 groups, output channel 0 sees only input channel 0 and output 1 only input 1.
    /// Ungrouped, each output channel mixes both: y0 = 2 x0 + 3 x1, y1 = 4 x0 + 5 x1.
    func testConvolutionGroups() throws {
        let x: [Double] = [1, 10]  // [1, 2, 1, 1]: x0 = 1, x1 = 10
        let grouped = try conv([1, 2, 1, 1], out: 2, k: 1, groups: 2, bias: false)
        XCTAssertEqual(grouped.weightShape, [2, 1, 1, 1])
        assertClose(try Reference.convolutionForward(grouped, input: x, weights: [2, 3], bias: nil), [2, 30])
        let full = try conv([1, 2, 1, 1], out: 2, k: 1, bias: false)
        assertClose(try Reference.convolutionForward(full, input: x, weights: [2, 3, 4, 5], bias: nil), [32, 54])
        // grouped backward: dw[0] only sees x0, dw[1] only x1
        let (dw, _) = try Reference.convolutionBackwardWeights(grouped, input: x, outputGradient: [1, 1])
        assertClose(dw, [1, 10])
    }

    func testConvolutionFusedReLUAndBatch() throws {
        // two images, 1x1 kernel -1, bias 0.5: y = 0.5 - x, then max(0, .)
        let g = try conv([2, 1, 1, 2], out: 1, k: 1)
        let y = try Reference.convolutionForward(g, input: [0, 1, 2, -3], weights: [-1], bias: [0.5], fusedReLU: true)
        assertClose(y, [0.5, 0, 0, 3.5])
    }

    func testConvolutionRejectsWrongSizes() throws {
        let g = try conv([1, 1, 3, 3], out: 1, k: 3)
        XCTAssertThrowsError(try Reference.convolutionForward(g, input: [1, 2], weights: [Double](repeating: 0, count: 9), bias: [0]))
        XCTAssertThrowsError(try Reference.convolutionForward(g, input: [Double](repeating: 0, count: 9), weights: [1], bias: [0]))
    }

    // MARK: Inner product

    /// x = [1, 2], w = [[1, 2], [3, 4], [5, 6]], b = [0.5, 0, -1]: y = [1 + 4 + 0.5, 3 + 8, 5 + 12 - 1].
    func testInnerProduct() throws {
        let g = InnerProductGeometry(batch: 1, inputChannels: 2, outputChannels: 3, hasBias: true)
        let w: [Double] = [1, 2, 3, 4, 5, 6]
        assertClose(try Reference.innerProductForward(g, input: [1, 2], weights: w, bias: [0.5, 0, -1]), [5.5, 11, 16])
        // dy = [1, 0, 1]: dx = w^T dy = [1 + 5, 2 + 6]; dw = dy x^T; db = dy
        assertClose(try Reference.innerProductBackwardData(g, outputGradient: [1, 0, 1], weights: w), [6, 8])
        let (dw, db) = try Reference.innerProductBackwardWeights(g, input: [1, 2], outputGradient: [1, 0, 1])
        assertClose(dw, [1, 2, 0, 0, 1, 2])
        assertClose(db, [1, 0, 1])
    }

    // MARK: Activations

    func testActivations() throws {
        let x: [Double] = [-1, 0, 2], dy: [Double] = [1, 1, 1]
        func both(_ a: Activation) throws -> ([Double], [Double]) {
            let y = try Reference.activationForward(a, input: x)
            return (y, try Reference.activationBackward(a, input: x, output: y, outputGradient: dy))
        }
        var (y, dx) = try both(.relu)
        assertClose(y, [0, 0, 2]); assertClose(dx, [0, 0, 1])  // x = 0 takes the x <= 0 branch
        (y, dx) = try both(.leakyReLU(alpha: 0.25))
        assertClose(y, [-0.25, 0, 2]); assertClose(dx, [0.25, 0.25, 1])
        (y, dx) = try both(.sigmoid)
        assertClose(y, [1 / (1 + exp(1)), 0.5, 1 / (1 + exp(-2))]); assertClose(Array(dx[1...1]), [0.25])
        (y, dx) = try both(.tanh)
        assertClose(y, [tanh(-1), 0, tanh(2)]); assertClose(Array(dx[1...1]), [1])
        (y, dx) = try both(.linear(alpha: 2, beta: 1))
        assertClose(y, [-1, 1, 5]); assertClose(dx, [2, 2, 2])
    }

    // MARK: Pooling

    /// x = 4h + w on 4x4, max 3x3 stride 2 in ceil mode: 2x2 windows starting at 0 and 2; the second
    /// hangs one past the edge. Each window's maximum is its bottom-right in-image element:
    /// x[2][2] = 10, x[2][3] = 11, x[3][2] = 14, x[3][3] = 15.
    func testCeilModeMaxPoolingHangsOverTheEdge() throws {
        let g = try PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                                padding: .includeLastPixel(height: 0, width: 0)).geometry(input: [1, 1, 4, 4])
        XCTAssertEqual(g.outputShape, [1, 1, 2, 2])
        let x = (0..<16).map(Double.init)
        assertClose(try Reference.poolingForward(g, input: x), [10, 11, 14, 15])
        let dx = try Reference.poolingBackward(g, input: x, outputGradient: [1, 2, 3, 4])
        var expected = [Double](repeating: 0, count: 16)
        expected[10] = 1; expected[11] = 2; expected[14] = 3; expected[15] = 4
        assertClose(dx, expected)
    }

    /// The same windows averaged: (0,0) = mean(0,1,2,4,5,6,8,9,10) = 5, (0,1) = mean(2,3,6,7,10,11) = 6.5,
    /// (1,0) = mean(8,9,10,12,13,14) = 11, (1,1) = mean(10,11,14,15) = 12.5. With no padding, the
    /// padded extent is the image, so including padding divides by the same counts.
    func testCeilModeAveragePooling() throws {
        for exclude in [true, false] {
            let g = try PoolingSpec(kind: .average, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                                    padding: .includeLastPixel(height: 0, width: 0), excludePadding: exclude)
                .geometry(input: [1, 1, 4, 4])
            assertClose(try Reference.poolingForward(g, input: (0..<16).map(Double.init)), [5, 6.5, 11, 12.5])
        }
    }

    /// 3x3 average windows with padding 1 on a 2x2 image [1, 2, 3, 4]: every window holds all four
    /// pixels (sum 10). Excluding padding divides by 4; including it divides by the 9 window positions
    /// inside the padded extent.
    func testAveragePoolingExcludeAndIncludePadding() throws {
        func geometry(exclude: Bool) throws -> PoolGeometry {
            try PoolingSpec(kind: .average, kernelH: 3, kernelW: 3, strideH: 1, strideW: 1,
                            padding: .valid(top: 1, bottom: 1, left: 1, right: 1), excludePadding: exclude)
                .geometry(input: [1, 1, 2, 2])
        }
        let x: [Double] = [1, 2, 3, 4], ones = [Double](repeating: 1, count: 4)
        let excluding = try geometry(exclude: true), including = try geometry(exclude: false)
        XCTAssertEqual(excluding.outputShape, [1, 1, 2, 2])
        assertClose(try Reference.poolingForward(excluding, input: x), [2.5, 2.5, 2.5, 2.5])
        assertClose(try Reference.poolingForward(including, input: x), [Double](repeating: 10.0 / 9, count: 4))
        // each pixel is in all 4 windows: 4 * (1/4) = 1, or 4 * (1/9)
        assertClose(try Reference.poolingBackward(excluding, input: x, outputGradient: ones), [1, 1, 1, 1])
        assertClose(try Reference.poolingBackward(including, input: x, outputGradient: ones),
                    [Double](repeating: 4.0 / 9, count: 4))
    }

    /// Include-padding in ceil mode: the divisor counts window positions inside [-pad, H + pad) only.
    /// H = W = 4, kernel 3, stride 2, pad 1: out = ceil((4 + 2 - 3) / 2) + 1 = 3, windows start at -1, 1, 3.
    /// The last window (rows 3, 4, 5) holds image row 3, padding row 4, and row 5 past the padded extent.
    /// x = 4h + w + 1:
    ///   (0,0): rows/cols -1..1, 9 positions, pixels 1 + 2 + 5 + 6 = 14          -> 14 / 9
    ///   (1,1): rows/cols 1..3, all in the image, 6+7+8 + 10+11+12 + 14+15+16 = 99 -> 99 / 9 = 11
    ///   (1,2): rows 1..3 x cols 3..4 (col 5 is outside), 6 positions, 8 + 12 + 16 -> 36 / 6 = 6
    ///   (2,2): rows/cols 3..4, 4 positions, pixel 16                             -> 16 / 4 = 4
    func testIncludePaddingDivisorStopsAtThePaddedExtent() throws {
        let g = try PoolingSpec(kind: .average, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                                padding: .includeLastPixel(height: 1, width: 1), excludePadding: false)
            .geometry(input: [1, 1, 4, 4])
        XCTAssertEqual(g.outputShape, [1, 1, 3, 3])
        XCTAssertEqual(Reference.poolDivisor(g, oh: 0, ow: 0), 9)
        XCTAssertEqual(Reference.poolDivisor(g, oh: 1, ow: 2), 6)
        XCTAssertEqual(Reference.poolDivisor(g, oh: 2, ow: 2), 4)
        let y = try Reference.poolingForward(g, input: (1...16).map(Double.init))
        assertClose([y[0], y[4], y[5], y[8]], [14.0 / 9, 11, 6, 4])
        // excluding padding, the same windows divide by their pixel counts: 4, 9, 3, 1
        var excluding = g
        excluding.excludePadding = true
        let z = try Reference.poolingForward(excluding, input: (1...16).map(Double.init))
        assertClose([z[0], z[4], z[5], z[8]], [3.5, 11, 12, 16])
    }

    /// Ties go to the first maximum in row-major window order, and padding never wins a max.
    func testMaxPoolingTiesAndPadding() throws {
        let g = try PoolingSpec(kind: .max, kernelH: 2, kernelW: 2, strideH: 2, strideW: 2).geometry(input: [1, 1, 2, 4])
        // windows [5 5 / 5 5] and [1 3 / 3 2]
        let x: [Double] = [5, 5, 1, 3, 5, 5, 3, 2]
        assertClose(try Reference.poolingForward(g, input: x), [5, 3])
        assertClose(try Reference.poolingBackward(g, input: x, outputGradient: [1, 1]), [1, 0, 0, 1, 0, 0, 0, 0])

        let padded = try PoolingSpec(kind: .max, kernelH: 2, kernelW: 2, strideH: 1, strideW: 1,
                                     padding: .valid(top: 1, bottom: 1, left: 1, right: 1)).geometry(input: [1, 1, 2, 2])
        // negative pixels: the corner window holds only x[0][0] = -1, not a padding 0
        let y = try Reference.poolingForward(padded, input: [-1, -2, -3, -4])
        assertClose(y, [-1, -1, -2, -1, -1, -2, -3, -3, -4])
    }

    func testGlobalPooling() throws {
        let x: [Double] = [1, 2, 3, 4, 40, 30, 20, 10]  // [1, 2, 2, 2]
        let average = try PoolingSpec(kind: .average, global: true).geometry(input: [1, 2, 2, 2])
        assertClose(try Reference.poolingForward(average, input: x), [2.5, 25])
        assertClose(try Reference.poolingBackward(average, input: x, outputGradient: [4, 8]), [1, 1, 1, 1, 2, 2, 2, 2])
        let maximum = try PoolingSpec(kind: .max, global: true).geometry(input: [1, 2, 2, 2])
        assertClose(try Reference.poolingForward(maximum, input: x), [4, 40])
        assertClose(try Reference.poolingBackward(maximum, input: x, outputGradient: [1, 1]), [0, 0, 0, 1, 1, 0, 0, 0])
    }

    // MARK: Softmax and losses

    /// Softmax over channels, S = 2: at s = 0 the logits are (0, 0) -> (1/2, 1/2); at s = 1 (0, ln 3) -> (1/4, 3/4).
    func testSoftmaxOverChannels() throws {
        let g = SoftmaxGeometry(batch: 1, channels: 2, spatial: 2)
        let y = try Reference.softmaxForward(g, input: [0, 0, 0, log(3)])  // [c0s0, c0s1, c1s0, c1s1]
        assertClose(y, [0.5, 0.25, 0.5, 0.75])
        // dy = onehot(c1) at both positions: dx = y * (dy - y1) -> s0: (-1/4, 1/4), s1: (-3/16, 3/16)
        assertClose(try Reference.softmaxBackward(g, output: y, outputGradient: [0, 0, 1, 1]), [-0.25, -0.1875, 0.25, 0.1875])
    }

    /// Row 0: logits (0, 0, ln 2) -> p = (1/4, 1/4, 1/2), label 2: loss ln 2. Row 1: (ln 3, 0, 0) ->
    /// p = (3/5, 1/5, 1/5), label 1: loss ln 5. Mean ln(10) / 2; dz = (p - onehot) / 2; only row 0 is
    /// classified correctly.
    func testSoftmaxCrossEntropyOnKnownLogits() throws {
        let g = SoftmaxGeometry(batch: 2, channels: 3)
        let r = try Reference.softmaxCrossEntropy(g, logits: [0, 0, log(2), log(3), 0, 0], labels: [2, 1])
        XCTAssertEqual(r.loss, log(10) / 2, accuracy: 1e-12)
        assertClose(r.logitsGradient, [0.125, 0.125, -0.25, 0.3, -0.4, 0.1])
        XCTAssertEqual(r.correct, 1)
    }

    func testSoftmaxCrossEntropyIsStableAndBreaksTiesToTheFirstClass() throws {
        let g = SoftmaxGeometry(batch: 2, channels: 2)
        let r = try Reference.softmaxCrossEntropy(g, logits: [1000, 1000, -1000, -1000], labels: [0, 1])
        XCTAssertEqual(r.loss, log(2), accuracy: 1e-12)
        assertClose(r.logitsGradient, [-0.25, 0.25, 0.25, -0.25])
        XCTAssertEqual(r.correct, 1)  // row 0: first max is class 0 = label; row 1: class 0 != label 1
    }

    func testSoftmaxCrossEntropyRejectsBadLabels() {
        let g = SoftmaxGeometry(batch: 1, channels: 3)
        for label in [3.0, -1, 0.5, .nan] {
            XCTAssertThrowsError(try Reference.softmaxCrossEntropy(g, logits: [0, 0, 0], labels: [label])) { error in
                XCTAssertEqual((error as? UpdraftError)?.kind, .data)
            }
        }
        XCTAssertThrowsError(try Reference.softmaxCrossEntropy(SoftmaxGeometry(batch: 1, channels: 3, spatial: 2),
                                                               logits: [Double](repeating: 0, count: 6), labels: [0]))
    }

    /// x = (1, 2), t = (0, 4): loss = (1 + 4) / 2 = 2.5, dx = 2 (x - t) / 2 = (1, -2).
    func testMeanSquaredError() throws {
        let r = try Reference.meanSquaredError(input: [1, 2], target: [0, 4])
        XCTAssertEqual(r.loss, 2.5)
        assertClose(r.inputGradient, [1, -2])
    }

    // MARK: Concat, affine, element-wise

    /// Two images; input 0 has one channel, input 1 two, spatial 2: y interleaves per image.
    func testConcatAlongChannels() throws {
        let a: [Double] = [1, 2, /* n1 */ 3, 4]
        let b: [Double] = [10, 11, 12, 13, /* n1 */ 14, 15, 16, 17]
        let y = try Reference.concatForward([a, b], channels: [1, 2], batch: 2, spatial: 2)
        assertClose(y, [1, 2, 10, 11, 12, 13, 3, 4, 14, 15, 16, 17])
        let back = try Reference.concatBackward(y, channels: [1, 2], batch: 2, spatial: 2)
        assertClose(back[0], a)
        assertClose(back[1], b)
    }

    /// x [1, 2, 1, 2] = (1, 2 | 3, 4), scale (2, 3), shift (1, -1): (3, 5 | 8, 11); dx = scale * dy.
    func testChannelAffine() throws {
        let shape: Shape = [1, 2, 1, 2]
        assertClose(try Reference.channelAffine(shape, input: [1, 2, 3, 4], scale: [2, 3], shift: [1, -1]), [3, 5, 8, 11])
        assertClose(try Reference.channelAffineBackward(shape, outputGradient: [1, 1, 1, 1], scale: [2, 3]), [2, 2, 3, 3])
    }

    func testElementwise() throws {
        assertClose(try Reference.elementwise(.add, [1, 2], [10, 20]), [11, 22])
        assertClose(try Reference.elementwise(.multiply, [1, 2], [10, 20]), [10, 40])
        let g = try Reference.elementwiseBackward(.multiply, [1, 2], [10, 20], outputGradient: [1, 2])
        assertClose(g.a, [10, 40]); assertClose(g.b, [1, 4])
        XCTAssertThrowsError(try Reference.elementwise(.add, [1, 2], [1]))
    }

    // MARK: Optimizers

    /// w = 1, grad = 0.5, lr 0.1, momentum 0.9, decay 0.1.
    /// Step 1: g = 0.5 + 0.1 = 0.6, v = 0.6, w = 1 - 0.06 = 0.94.
    /// Step 2: g = 0.5 + 0.094 = 0.594, v = 0.54 + 0.594 = 1.134, w = 0.94 - 0.1134 = 0.8266.
    func testSGDMomentumAndWeightDecay() throws {
        let h = SGDHyperparameters(learningRate: 0.1, momentum: 0.9, weightDecay: 0.1)
        var w: [Double] = [1], v: [Double] = [0]
        try Reference.sgdStep(h, parameter: &w, gradient: [0.5], velocity: &v)
        XCTAssertEqual(w[0], 0.94, accuracy: 1e-7); XCTAssertEqual(v[0], 0.6, accuracy: 1e-7)
        try Reference.sgdStep(h, parameter: &w, gradient: [0.5], velocity: &v)
        XCTAssertEqual(w[0], 0.8266, accuracy: 1e-7); XCTAssertEqual(v[0], 1.134, accuracy: 1e-7)
    }

    /// w = 1, grad = 0.5, lr 0.1: step 1 m = 0.05, v = 0.00025, bias-corrected 0.5 and 0.25, so
    /// w = 1 - 0.1 * 0.5 / (0.5 + 1e-8). Step 2 with grad -0.5: m = 0.045 - 0.05 = -0.005,
    /// v = 0.00024975 + 0.00025 = 0.00049975; corrected m = -0.005 / 0.19 and v = 0.00049975 / 0.001999.
    func testAdamBiasCorrection() throws {
        let h = AdamHyperparameters(learningRate: 0.1)
        var w: [Double] = [1], m: [Double] = [0], v: [Double] = [0]
        try Reference.adamStep(h, step: 1, parameter: &w, gradient: [0.5], m: &m, v: &v)
        XCTAssertEqual(m[0], 0.05, accuracy: 1e-7); XCTAssertEqual(v[0], 0.00025, accuracy: 1e-8)
        XCTAssertEqual(w[0], 1 - 0.1 * 0.5 / (0.5 + 1e-8), accuracy: 1e-7)
        let w1 = w[0]
        try Reference.adamStep(h, step: 2, parameter: &w, gradient: [-0.5], m: &m, v: &v)
        XCTAssertEqual(m[0], -0.005, accuracy: 1e-7); XCTAssertEqual(v[0], 0.00049975, accuracy: 1e-8)
        let expected = w1 - 0.1 * (-0.005 / 0.19) / ((0.00049975 / 0.001999).squareRoot() + 1e-8)
        XCTAssertEqual(w[0], expected, accuracy: 1e-6)
        XCTAssertThrowsError(try Reference.adamStep(h, step: 0, parameter: &w, gradient: [0], m: &m, v: &v))
    }
}
