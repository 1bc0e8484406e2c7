import Foundation
import XCTest
@testable import Updraft

/// CPUBackend against plain Double loops written here (the definitions in Backend.swift and Ops/*.swift),
/// on awkward sizes, both convolution schedules, and the error paths.
final class CPUBackendTests: XCTestCase {
    // MARK: Helpers

    private func random(_ count: Int, seed: UInt64, in range: ClosedRange<Float> = -1...1) -> [Float] {
        var rng = SplitMix64(seed: seed)
        return (0..<count).map { _ in rng.nextFloat(in: range) }
    }

    /// Values from a few levels, so that pooling windows and arg-maxes have ties.
    private func quantized(_ count: Int, seed: UInt64, levels: Int = 3) -> [Float] {
        var rng = SplitMix64(seed: seed)
        return (0..<count).map { _ in Float(Int(rng.next() % UInt64(levels))) }
    }

    private func assertClose(_ actual: [Float], _ expected: [Double], atol: Double = 1e-4, rtol: Double = 1e-4,
                             _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(actual.count, expected.count, "\(what): count", file: file, line: line)
        for i in 0..<min(actual.count, expected.count) {
            let diff = abs(Double(actual[i]) - expected[i])
            if !(diff <= atol + rtol * abs(expected[i])) {
                XCTFail("\(what)[\(i)] = \(actual[i]), expected \(expected[i])", file: file, line: line)
                return
            }
        }
    }

    private func download(_ be: CPUBackend, _ b: DeviceBuffer, _ count: Int) throws -> [Float] {
        Array(try be.download(b).prefix(count))
    }

    // MARK: Convolution

    /// Forward, dx, dw and db of a convolution as the definition's loop nest.
    private func convLoops(_ g: ConvGeometry, x: [Float], w: [Float], b: [Float]?, dy: [Float])
        -> (y: [Double], dx: [Double], dw: [Double], db: [Double]) {
        let cinG = g.inChannels / g.groups, coutG = g.outChannels / g.groups
        var y = [Double](repeating: 0, count: g.outputShape.count)
        var dx = [Double](repeating: 0, count: g.inputShape.count)
        var dw = [Double](repeating: 0, count: g.weightShape.count)
        var db = [Double](repeating: 0, count: g.outChannels)
        for n in 0..<g.batch {
            for co in 0..<g.outChannels {
                for oh in 0..<g.outHeight {
                    for ow in 0..<g.outWidth {
                        let o = ((n * g.outChannels + co) * g.outHeight + oh) * g.outWidth + ow
                        var sum = Double(b?[co] ?? 0)
                        let d = Double(dy[o])
                        db[co] += d
                        for ci in 0..<cinG {
                            let c = co / coutG * cinG + ci
                            for kh in 0..<g.kernelH {
                                let ih = oh * g.strideH - g.padTop + kh * g.dilationH
                                guard ih >= 0, ih < g.inHeight else { continue }
                                for kw in 0..<g.kernelW {
                                    let iw = ow * g.strideW - g.padLeft + kw * g.dilationW
                                    guard iw >= 0, iw < g.inWidth else { continue }
                                    let xi = ((n * g.inChannels + c) * g.inHeight + ih) * g.inWidth + iw
                                    let wi = ((co * cinG + ci) * g.kernelH + kh) * g.kernelW + kw
                                    sum += Double(x[xi]) * Double(w[wi])
                                    dx[xi] += d * Double(w[wi])
                                    dw[wi] += d * Double(x[xi])
                                }
                            }
                        }
                        y[o] = sum
                    }
                }
            }
        }
        return (y, dx, dw, db)
    }

    private func checkConvolution(_ spec: ConvolutionSpec, input: Shape, seed: UInt64,
                                  file: StaticString = #filePath, line: UInt = #line) throws {
        let g = try spec.geometry(input: input)
        let x = random(g.inputShape.count, seed: seed)
        let w = random(g.weightShape.count, seed: seed + 1)
        let b = spec.hasBias ? random(g.outChannels, seed: seed + 2) : nil
        let dy = random(g.outputShape.count, seed: seed + 3)
        let expected = convLoops(g, x: x, w: w, b: b, dy: dy)
        let label = "\(spec) on \(input)"
        for schedule in [CPUConvolutionSchedule.gemmThreads, .imageThreads] {
            for threads in [1, 3] {
                let be = CPUBackend(threads: threads)
                be.convolutionScheduleOverride = schedule
                let xb = try be.makeBuffer(x), wb = try be.makeBuffer(w), dyb = try be.makeBuffer(dy)
                let bb = try b.map { try be.makeBuffer($0) }
                // Output buffers one larger than needed: the extra element must stay untouched.
                let yb = try be.makeBuffer([Float](repeating: 7, count: g.outputShape.count + 1))
                let what = "\(label) \(schedule) threads \(threads)"
                try be.convolutionForward(g, input: xb, weights: wb, bias: bb, output: yb, fusedReLU: false)
                let y = try be.download(yb)
                XCTAssertEqual(y.last, 7, "\(what): wrote past the output", file: file, line: line)
                assertClose(Array(y.dropLast()), expected.y, "\(what) forward", file: file, line: line)
                try be.convolutionForward(g, input: xb, weights: wb, bias: bb, output: yb, fusedReLU: true)
                assertClose(try download(be, yb, g.outputShape.count), expected.y.map { max(0, $0) },
                            "\(what) forward+ReLU", file: file, line: line)

                let dxb = try be.makeBuffer([Float](repeating: 7, count: g.inputShape.count))
                try be.convolutionBackwardData(g, outputGradient: dyb, weights: wb, inputGradient: dxb)
                assertClose(try be.download(dxb), expected.dx, "\(what) dx", file: file, line: line)

                let dwb = try be.makeBuffer([Float](repeating: 7, count: g.weightShape.count))
                let dbb = spec.hasBias ? try be.makeBuffer([Float](repeating: 7, count: g.outChannels)) : nil
                try be.convolutionBackwardWeights(g, input: xb, outputGradient: dyb, weightGradient: dwb, biasGradient: dbb)
                assertClose(try be.download(dwb), expected.dw, "\(what) dw", file: file, line: line)
                if let dbb { assertClose(try be.download(dbb), expected.db, "\(what) db", file: file, line: line) }
            }
        }
    }

    func testConvolutionPaddingStrideDilation() throws {
        try checkConvolution(ConvolutionSpec(inputChannels: 3, outputChannels: 5, kernelH: 3, kernelW: 3,
                                             padding: .same(.bottomRightHeavy)), input: [3, 3, 7, 6], seed: 1)
        try checkConvolution(ConvolutionSpec(inputChannels: 2, outputChannels: 3, kernelH: 3, kernelW: 2,
                                             strideH: 2, strideW: 3, dilationH: 2, dilationW: 1,
                                             padding: .valid(top: 1, bottom: 0, left: 2, right: 1)),
                             input: [2, 2, 9, 10], seed: 2)
        try checkConvolution(ConvolutionSpec(inputChannels: 3, outputChannels: 4, kernelH: 4, kernelW: 4,
                                             strideH: 3, strideW: 2, padding: .same(.topLeftHeavy), hasBias: false),
                             input: [3, 3, 8, 5], seed: 3)
        // Padding wider than the kernel reach: whole rows of col are zero.
        try checkConvolution(ConvolutionSpec(inputChannels: 1, outputChannels: 2, kernelH: 2, kernelW: 2,
                                             padding: .valid(top: 3, bottom: 3, left: 3, right: 0)),
                             input: [2, 1, 3, 4], seed: 4)
    }

    func testConvolutionGroupsAndPointwise() throws {
        try checkConvolution(ConvolutionSpec(inputChannels: 4, outputChannels: 6, kernelH: 2, kernelW: 3, strideH: 2,
                                             groups: 2, padding: .same(.topLeftHeavy)), input: [3, 4, 7, 7], seed: 5)
        try checkConvolution(ConvolutionSpec(inputChannels: 4, outputChannels: 4, kernelH: 3, kernelW: 3,
                                             groups: 4, padding: .same(.bottomRightHeavy)), input: [2, 4, 5, 6], seed: 6)
        // 1x1 stride 1 unpadded: straight to GEMM, with and without groups.
        try checkConvolution(ConvolutionSpec(inputChannels: 5, outputChannels: 7, kernelH: 1, kernelW: 1),
                             input: [3, 5, 4, 3], seed: 7)
        try checkConvolution(ConvolutionSpec(inputChannels: 6, outputChannels: 9, kernelH: 1, kernelW: 1, groups: 3,
                                             hasBias: false), input: [2, 6, 3, 3], seed: 8)
        // 1x1 that is not a plain GEMM: stride 2, and padding.
        try checkConvolution(ConvolutionSpec(inputChannels: 3, outputChannels: 2, kernelH: 1, kernelW: 1,
                                             strideH: 2, strideW: 2), input: [2, 3, 5, 5], seed: 9)
        try checkConvolution(ConvolutionSpec(inputChannels: 3, outputChannels: 2, kernelH: 1, kernelW: 1,
                                             padding: .valid(top: 1, bottom: 0, left: 0, right: 1)), input: [1, 3, 2, 2], seed: 10)
    }

    /// Enough channels that im2col/col2im, the epilogue and (for gemmThreads) each GEMM split over threads.
    func testConvolutionLargeEnoughForThreads() throws {
        try checkConvolution(ConvolutionSpec(inputChannels: 128, outputChannels: 16, kernelH: 3, kernelW: 3,
                                             padding: .same(.bottomRightHeavy)), input: [2, 128, 16, 16], seed: 11)
    }

    // MARK: Inner product

    func testInnerProduct() throws {
        let be = CPUBackend()
        // Small, then large enough that each GEMM splits over threads by columns and by rows.
        for (hasBias, spec, input) in [(true, InnerProductSpec(inputChannels: 12, outputChannels: 5), Shape([7, 3, 2, 2])),
                                       (false, InnerProductSpec(inputChannels: 12, outputChannels: 5, hasBias: false), [7, 12]),
                                       (true, InnerProductSpec(inputChannels: 300, outputChannels: 250), [64, 300]),
                                       (true, InnerProductSpec(inputChannels: 64, outputChannels: 250), [300, 64])] {
            let g = try spec.geometry(input: input)
            let (N, Cin, Cout) = (g.batch, g.inputChannels, g.outputChannels)
            let x = random(N * Cin, seed: 20), w = random(Cout * Cin, seed: 21), dy = random(N * Cout, seed: 22)
            let b = hasBias ? random(Cout, seed: 23) : nil
            var y = [Double](repeating: 0, count: N * Cout), dx = [Double](repeating: 0, count: N * Cin)
            var dw = [Double](repeating: 0, count: Cout * Cin), db = [Double](repeating: 0, count: Cout)
            for n in 0..<N {
                for o in 0..<Cout {
                    y[n * Cout + o] = Double(b?[o] ?? 0)
                    db[o] += Double(dy[n * Cout + o])
                    for i in 0..<Cin {
                        y[n * Cout + o] += Double(x[n * Cin + i]) * Double(w[o * Cin + i])
                        dx[n * Cin + i] += Double(dy[n * Cout + o]) * Double(w[o * Cin + i])
                        dw[o * Cin + i] += Double(dy[n * Cout + o]) * Double(x[n * Cin + i])
                    }
                }
            }
            let xb = try be.makeBuffer(x), wb = try be.makeBuffer(w), dyb = try be.makeBuffer(dy)
            let yb = try be.makeBuffer(count: N * Cout), dxb = try be.makeBuffer(count: N * Cin)
            let dwb = try be.makeBuffer(count: Cout * Cin), dbb = try be.makeBuffer([Float](repeating: 3, count: Cout))
            try be.innerProductForward(g, input: xb, weights: wb, bias: try b.map { try be.makeBuffer($0) }, output: yb)
            assertClose(try be.download(yb), y, "inner product y (bias \(hasBias))")
            try be.innerProductBackwardData(g, outputGradient: dyb, weights: wb, inputGradient: dxb)
            assertClose(try be.download(dxb), dx, "inner product dx")
            try be.innerProductBackwardWeights(g, input: xb, outputGradient: dyb, weightGradient: dwb,
                                               biasGradient: hasBias ? dbb : nil)
            assertClose(try be.download(dwb), dw, "inner product dw")
            if hasBias { assertClose(try be.download(dbb), db, "inner product db") }
        }
    }

    // MARK: Pooling

    private func poolLoops(_ g: PoolGeometry, x: [Float], dy: [Float]) -> (y: [Double], dx: [Double]) {
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        var y = [Double](repeating: 0, count: g.outputShape.count), dx = [Double](repeating: 0, count: g.inputShape.count)
        for p in 0..<(g.batch * g.channels) {
            for oh in 0..<Ho {
                for ow in 0..<Wo {
                    let h0 = oh * g.strideH - g.padTop, w0 = ow * g.strideW - g.padLeft
                    var cells: [Int] = []  // in-image positions, row-major
                    for ih in h0..<(h0 + g.kernelH) where ih >= 0 && ih < H {
                        for iw in w0..<(w0 + g.kernelW) where iw >= 0 && iw < W { cells.append(p * H * W + ih * W + iw) }
                    }
                    guard !cells.isEmpty else { continue }
                    let o = (p * Ho + oh) * Wo + ow
                    if g.kind == .max {
                        var best = cells[0]
                        for c in cells where x[c] > x[best] { best = c }
                        y[o] = Double(x[best]); dx[best] += Double(dy[o])
                    } else {
                        var divisor = cells.count
                        if !g.excludePadding {
                            let rows = (h0..<(h0 + g.kernelH)).filter { $0 >= -g.padTop && $0 < H + g.padBottom }.count
                            let cols = (w0..<(w0 + g.kernelW)).filter { $0 >= -g.padLeft && $0 < W + g.padRight }.count
                            divisor = rows * cols
                        }
                        y[o] = cells.reduce(0) { $0 + Double(x[$1]) } / Double(divisor)
                        for c in cells { dx[c] += Double(dy[o]) / Double(divisor) }
                    }
                }
            }
        }
        return (y, dx)
    }

    func testPooling() throws {
        let specs: [(PoolingSpec, Shape)] = [
            (PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2), [2, 3, 7, 8]),
            (PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                         padding: .includeLastPixel(height: 1, width: 0)), [2, 2, 6, 7]),
            (PoolingSpec(kind: .max, kernelH: 2, kernelW: 3, strideH: 1, strideW: 2, padding: .same(.topLeftHeavy)), [1, 3, 5, 6]),
            (PoolingSpec(kind: .average, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                         padding: .same(.bottomRightHeavy), excludePadding: true), [2, 2, 6, 5]),
            (PoolingSpec(kind: .average, kernelH: 3, kernelW: 2, strideH: 2, strideW: 2,
                         padding: .same(.bottomRightHeavy), excludePadding: false), [2, 2, 6, 5]),
            (PoolingSpec(kind: .average, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                         padding: .includeLastPixel(height: 1, width: 1), excludePadding: false), [1, 2, 6, 6]),
            // Padding wider than the window: empty windows give 0 and no gradient.
            (PoolingSpec(kind: .max, kernelH: 2, kernelW: 2, strideH: 2, strideW: 2,
                         padding: .valid(top: 2, bottom: 2, left: 0, right: 2)), [1, 2, 4, 4]),
            (PoolingSpec(kind: .average, kernelH: 2, kernelW: 2, strideH: 1, strideW: 1,
                         padding: .valid(top: 2, bottom: 0, left: 0, right: 0), excludePadding: false), [1, 1, 3, 3]),
            (PoolingSpec(kind: .max, global: true), [3, 4, 5, 3]),
            (PoolingSpec(kind: .average, global: true), [3, 4, 5, 3]),
            // Enough planes to split over threads.
            (PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2), [8, 64, 17, 17]),
        ]
        for (i, (spec, shape)) in specs.enumerated() {
            let g = try spec.geometry(input: shape)
            for data in [quantized(shape.count, seed: UInt64(30 + i)), random(shape.count, seed: UInt64(50 + i))] {
                let dy = random(g.outputShape.count, seed: UInt64(70 + i))
                let expected = poolLoops(g, x: data, dy: dy)
                let be = CPUBackend()
                let xb = try be.makeBuffer(data), dyb = try be.makeBuffer(dy)
                let yb = try be.makeBuffer([Float](repeating: 9, count: g.outputShape.count))
                let dxb = try be.makeBuffer([Float](repeating: 9, count: g.inputShape.count))
                try be.poolingForward(g, input: xb, output: yb)
                assertClose(try be.download(yb), expected.y, "pooling \(i) \(spec) y")
                try be.poolingBackward(g, input: xb, output: yb, outputGradient: dyb, inputGradient: dxb)
                assertClose(try be.download(dxb), expected.dx, "pooling \(i) \(spec) dx")
            }
        }
    }

    // MARK: Activations, element-wise, concat, channel affine

    func testActivations() throws {
        let be = CPUBackend()
        for count in [37, 200_003] {  // the second splits over threads
            var x = random(count, seed: 90, in: -4...4)
            x[0] = 0  // ReLU's x = 0 takes the "x <= 0" branch
            let dy = random(count, seed: 91)
            let xb = try be.makeBuffer(x), dyb = try be.makeBuffer(dy)
            let yb = try be.makeBuffer(count: count), dxb = try be.makeBuffer(count: count)
            let cases: [(Activation, (Double) -> Double, (Double, Double, Double) -> Double)] = [
                (.relu, { max(0, $0) }, { x, _, d in x > 0 ? d : 0 }),
                (.leakyReLU(alpha: 0.1), { $0 > 0 ? $0 : Double(Float(0.1)) * $0 }, { x, _, d in x > 0 ? d : Double(Float(0.1)) * d }),
                (.sigmoid, { 1 / (1 + exp(-$0)) }, { _, y, d in d * y * (1 - y) }),
                (.tanh, { Foundation.tanh($0) }, { _, y, d in d * (1 - y * y) }),
                (.linear(alpha: 1.5, beta: -0.25), { 1.5 * $0 - 0.25 }, { _, _, d in 1.5 * d }),
            ]
            for (a, f, df) in cases {
                try be.activationForward(a, input: xb, output: yb, count: count)
                let y = try be.download(yb)
                assertClose(y, x.map { f(Double($0)) }, atol: 1e-6, rtol: 1e-5, "\(a) y")
                try be.activationBackward(a, input: xb, output: yb, outputGradient: dyb, inputGradient: dxb, count: count)
                assertClose(try be.download(dxb), (0..<count).map { df(Double(x[$0]), Double(y[$0]), Double(dy[$0])) },
                            atol: 1e-6, rtol: 1e-5, "\(a) dx")
            }
            // In place.
            try be.activationForward(.relu, input: xb, output: xb, count: count)
            assertClose(try be.download(xb), x.map { max(0, Double($0)) }, atol: 0, rtol: 0, "relu in place")
        }
    }

    func testElementwiseConcatAffine() throws {
        let be = CPUBackend()
        let count = 150_001
        let a = random(count, seed: 100), b = random(count, seed: 101)
        let ab = try be.makeBuffer(a), bb = try be.makeBuffer(b), yb = try be.makeBuffer(count: count)
        try be.elementwise(.add, ab, bb, output: yb, count: count)
        assertClose(try be.download(yb), (0..<count).map { Double(a[$0] + b[$0]) }, atol: 0, rtol: 0, "add")
        try be.elementwise(.multiply, ab, bb, output: yb, count: count)
        assertClose(try be.download(yb), (0..<count).map { Double(a[$0] * b[$0]) }, atol: 0, rtol: 0, "multiply")
        try be.accumulate(ab, into: yb)
        assertClose(try be.download(yb), (0..<count).map { Double(a[$0] * b[$0] + a[$0]) }, atol: 0, rtol: 0, "accumulate")

        for (N, S) in [(3, 5), (16, 1024)] {
            let channels = [2, 1, 3]
            let C = channels.reduce(0, +)
            let parts = channels.enumerated().map { i, c in random(N * c * S, seed: UInt64(110 + i)) }
            var joined = [Double](repeating: 0, count: N * C * S)
            for n in 0..<N {
                var c0 = 0
                for (i, ci) in channels.enumerated() {
                    for k in 0..<(ci * S) { joined[(n * C + c0) * S + k] = Double(parts[i][n * ci * S + k]) }
                    c0 += ci
                }
            }
            let inputs = try parts.map { try be.makeBuffer($0) }
            let out = try be.makeBuffer(count: N * C * S)
            try be.concatForward(inputs, channels: channels, batch: N, spatial: S, output: out)
            assertClose(try be.download(out), joined, atol: 0, rtol: 0, "concat")
            let grads = try channels.map { try be.makeBuffer(count: N * $0 * S) }
            try be.concatBackward(out, channels: channels, batch: N, spatial: S, inputGradients: grads)
            for (i, g) in grads.enumerated() {
                assertClose(try be.download(g), parts[i].map(Double.init), atol: 0, rtol: 0, "concat backward \(i)")
            }
            XCTAssertThrowsError(try be.concatForward(Array(inputs.prefix(2)), channels: channels, batch: N, spatial: S, output: out))

            let shape = Shape(n: N, c: C, h: S, w: 1)
            let x = random(shape.count, seed: 120), scale = random(C, seed: 121), shift = random(C, seed: 122)
            let xb = try be.makeBuffer(x), sb = try be.makeBuffer(scale), tb = try be.makeBuffer(shift)
            let ob = try be.makeBuffer(count: shape.count)
            try be.channelAffine(shape, input: xb, scale: sb, shift: tb, output: ob)
            let c = { (i: Int) in i / S % C }
            assertClose(try be.download(ob), (0..<shape.count).map { Double(scale[c($0)]) * Double(x[$0]) + Double(shift[c($0)]) },
                        atol: 1e-6, rtol: 1e-6, "channel affine")
            try be.channelAffineBackward(shape, outputGradient: xb, scale: sb, inputGradient: ob)
            assertClose(try be.download(ob), (0..<shape.count).map { Double(scale[c($0)]) * Double(x[$0]) },
                        atol: 1e-6, rtol: 1e-6, "channel affine backward")
        }
    }

    // MARK: Softmax and losses

    func testSoftmax() throws {
        let be = CPUBackend()
        for g in [SoftmaxGeometry(batch: 3, channels: 7), SoftmaxGeometry(batch: 2, channels: 5, spatial: 300),
                  SoftmaxGeometry(batch: 4, channels: 1000)] {
            let x = random(g.count, seed: 130, in: -20...20), dy = random(g.count, seed: 131)
            let (C, S) = (g.channels, g.spatial)
            var y = [Double](repeating: 0, count: g.count), dx = y
            for n in 0..<g.batch {
                for s in 0..<S {
                    let idx = (0..<C).map { (n * C + $0) * S + s }
                    let m = idx.map { Double(x[$0]) }.max() ?? 0
                    let sum = idx.reduce(0.0) { $0 + exp(Double(x[$1]) - m) }
                    for i in idx { y[i] = exp(Double(x[i]) - m) / sum }
                    let dot = idx.reduce(0.0) { $0 + Double(dy[$1]) * y[$1] }
                    for i in idx { dx[i] = y[i] * (Double(dy[i]) - dot) }
                }
            }
            let xb = try be.makeBuffer(x), dyb = try be.makeBuffer(dy)
            let yb = try be.makeBuffer(count: g.count), dxb = try be.makeBuffer(count: g.count)
            try be.softmaxForward(g, input: xb, output: yb)
            assertClose(try be.download(yb), y, atol: 1e-6, rtol: 1e-5, "softmax \(g)")
            try be.softmaxBackward(g, output: yb, outputGradient: dyb, inputGradient: dxb)
            assertClose(try be.download(dxb), dx, atol: 1e-6, rtol: 1e-4, "softmax backward \(g)")
        }
    }

    func testSoftmaxCrossEntropy() throws {
        let be = CPUBackend()
        let g = SoftmaxGeometry(batch: 6, channels: 4)
        var z = random(g.count, seed: 140, in: -3...3)
        z[4..<8] = [2, 5, 5, 1]  // row 1: tie between classes 1 and 2, the first wins
        let labels: [Float] = [0, 1, 2, 3, 1, 0]
        var loss = 0.0, dz = [Double](repeating: 0, count: g.count), correct = 0
        for n in 0..<g.batch {
            let row = (0..<4).map { Double(z[n * 4 + $0]) }
            let m = row.max() ?? 0
            let lse = m + log(row.reduce(0) { $0 + exp($1 - m) })
            loss += lse - row[Int(labels[n])]
            for c in 0..<4 { dz[n * 4 + c] = (exp(row[c] - lse) - (c == Int(labels[n]) ? 1 : 0)) / 6 }
            if row.firstIndex(of: m) == Int(labels[n]) { correct += 1 }
        }
        let zb = try be.makeBuffer(z), lb = try be.makeBuffer(labels)
        let lossb = try be.makeBuffer(count: 1), dzb = try be.makeBuffer(count: g.count), cb = try be.makeBuffer(count: 1)
        try be.softmaxCrossEntropy(g, logits: zb, labels: lb, loss: lossb, logitsGradient: dzb, correct: cb)
        assertClose(try be.download(lossb), [loss / 6], atol: 1e-6, rtol: 1e-5, "cross-entropy loss")
        assertClose(try be.download(dzb), dz, atol: 1e-7, rtol: 1e-5, "cross-entropy dz")
        XCTAssertEqual(try be.download(cb), [Float(correct)])
        try be.softmaxCrossEntropy(g, logits: zb, labels: lb, loss: lossb, logitsGradient: nil, correct: nil)
        assertClose(try be.download(lossb), [loss / 6], atol: 1e-6, rtol: 1e-5, "cross-entropy loss alone")

        for bad: Float in [4, -1, 1.5, .nan] {
            let badLabels = try be.makeBuffer([0, 1, bad, 0, 0, 0])
            XCTAssertThrowsError(try be.softmaxCrossEntropy(g, logits: zb, labels: badLabels, loss: lossb,
                                                            logitsGradient: dzb, correct: cb)) { error in
                XCTAssertEqual((error as? UpdraftError)?.kind, .data)
            }
        }
        XCTAssertThrowsError(try be.softmaxCrossEntropy(SoftmaxGeometry(batch: 3, channels: 2, spatial: 2), logits: zb,
                                                        labels: lb, loss: lossb, logitsGradient: nil, correct: nil))
    }

    func testMeanSquaredError() throws {
        let be = CPUBackend()
        for count in [11, 100_000] {
            let x = random(count, seed: 150), t = random(count, seed: 151)
            let xb = try be.makeBuffer(x), tb = try be.makeBuffer(t)
            let lb = try be.makeBuffer(count: 1), db = try be.makeBuffer(count: count)
            try be.meanSquaredError(count: count, input: xb, target: tb, loss: lb, inputGradient: db)
            let d = (0..<count).map { Double(x[$0]) - Double(t[$0]) }
            assertClose(try be.download(lb), [d.reduce(0) { $0 + $1 * $1 } / Double(count)], atol: 1e-7, rtol: 1e-5, "mse")
            assertClose(try be.download(db), d.map { 2 * $0 / Double(count) }, atol: 1e-9, rtol: 1e-5, "mse dx")
        }
    }

    // MARK: Optimizers

    func testOptimizers() throws {
        let be = CPUBackend()
        let count = 70_001
        let w0 = random(count, seed: 160), g0 = random(count, seed: 161), v0 = random(count, seed: 162, in: 0...1)
        let sgd = SGDHyperparameters(learningRate: 0.05, momentum: 0.9, weightDecay: 1e-3)
        let wb = try be.makeBuffer(w0), gb = try be.makeBuffer(g0), vb = try be.makeBuffer(v0)
        try be.sgdStep(sgd, parameter: wb, gradient: gb, velocity: vb, count: count)
        var w = w0.map(Double.init), v = v0.map(Double.init)
        for i in 0..<count {
            let g = Double(g0[i]) + Double(sgd.weightDecay) * w[i]
            v[i] = Double(sgd.momentum) * v[i] + g
            w[i] -= Double(sgd.learningRate) * v[i]
        }
        assertClose(try be.download(wb), w, atol: 1e-6, rtol: 1e-5, "SGD w")
        assertClose(try be.download(vb), v, atol: 1e-6, rtol: 1e-5, "SGD v")

        let adam = AdamHyperparameters(learningRate: 0.01, weightDecay: 1e-2)
        let mb = try be.makeBuffer(g0), sb = try be.makeBuffer(v0)
        try be.upload(w0, to: wb)
        try be.adamStep(adam, step: 3, parameter: wb, gradient: gb, m: mb, v: sb, count: count)
        w = w0.map(Double.init)
        var m = g0.map(Double.init), s = v0.map(Double.init)
        let (b1, b2) = (Double(adam.beta1), Double(adam.beta2))
        for i in 0..<count {
            let g = Double(g0[i]) + Double(adam.weightDecay) * w[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            s[i] = b2 * s[i] + (1 - b2) * g * g
            w[i] -= Double(adam.learningRate) * (m[i] / (1 - pow(b1, 3))) / ((s[i] / (1 - pow(b2, 3))).squareRoot() + Double(adam.eps))
        }
        assertClose(try be.download(wb), w, atol: 1e-6, rtol: 1e-5, "Adam w")
        assertClose(try be.download(mb), m, atol: 1e-6, rtol: 1e-5, "Adam m")
        assertClose(try be.download(sb), s, atol: 1e-6, rtol: 1e-5, "Adam v")
        XCTAssertThrowsError(try be.adamStep(adam, step: 0, parameter: wb, gradient: gb, m: mb, v: sb, count: count))
    }

    // MARK: Memory and errors

    private final class ForeignBuffer: DeviceBuffer { let count = 4 }

    func testMemoryOps() throws {
        let be = CPUBackend()
        XCTAssertEqual(be.name, "cpu")
        let a = try be.makeBuffer([1, 2, 3])
        XCTAssertEqual(try be.download(a), [1, 2, 3])
        let big = try be.makeBuffer(count: 5)
        XCTAssertEqual(try be.download(big), [0, 0, 0, 0, 0], "new buffers are zeroed")
        try be.copy(a, to: big)
        XCTAssertEqual(try be.download(big), [1, 2, 3, 0, 0])
        try be.fill(big, with: 2.5)
        XCTAssertEqual(try be.download(big), [2.5, 2.5, 2.5, 2.5, 2.5])
        try be.accumulate(a, into: big)
        XCTAssertEqual(try be.download(big), [3.5, 4.5, 5.5, 2.5, 2.5])
        XCTAssertEqual(try be.download(try be.makeBuffer(count: 0)), [])
        try be.synchronize()

        XCTAssertThrowsError(try be.upload([1, 2], to: a))
        XCTAssertThrowsError(try be.copy(big, to: a), "destination too small")
        XCTAssertThrowsError(try be.makeBuffer(count: -1))
        XCTAssertThrowsError(try be.download(ForeignBuffer())) { error in
            XCTAssertTrue("\(error)".contains("not a CPU buffer"), "\(error)")
        }
        XCTAssertThrowsError(try be.activationForward(.relu, input: ForeignBuffer(), output: a, count: 3))
        XCTAssertThrowsError(try be.activationForward(.relu, input: big, output: a, count: 4), "output too small")
    }

    func testConvolutionArgumentErrors() throws {
        let be = CPUBackend()
        let spec = ConvolutionSpec(inputChannels: 2, outputChannels: 3, kernelH: 3, kernelW: 3)
        let g = try spec.geometry(input: [1, 2, 5, 5])
        let x = try be.makeBuffer(count: g.inputShape.count), w = try be.makeBuffer(count: g.weightShape.count)
        let b = try be.makeBuffer(count: 3), y = try be.makeBuffer(count: g.outputShape.count)
        XCTAssertThrowsError(try be.convolutionForward(g, input: x, weights: w, bias: nil, output: y, fusedReLU: false),
                             "geometry has a bias")
        XCTAssertThrowsError(try be.convolutionForward(g, input: x, weights: b, bias: b, output: y, fusedReLU: false),
                             "weights too small")
        var noBias = g
        noBias.hasBias = false
        XCTAssertThrowsError(try be.convolutionBackwardWeights(noBias, input: x, outputGradient: y, weightGradient: w,
                                                               biasGradient: b))
        var badGroups = g
        badGroups.groups = 0
        XCTAssertThrowsError(try be.convolutionForward(badGroups, input: x, weights: w, bias: b, output: y, fusedReLU: false))
        // Bias gradient may be skipped.
        try be.convolutionBackwardWeights(g, input: x, outputGradient: y, weightGradient: w, biasGradient: nil)
    }
}
