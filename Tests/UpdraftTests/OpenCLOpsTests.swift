import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// The OpenCL element-wise, pooling, softmax/loss, concat and optimizer kernels on the shared test
/// device (PoCL in CI), on small cases whose answers are worked out by hand or by a closed form.
final class OpenCLOpsTests: XCTestCase {
    private func backend() throws -> OpenCLBackend { OpenCLBackend(context: try OpenCLTestSupport.context()) }

    // MARK: Against the reference

    /// Convolution and inner product run on the GEMM kernels, tested with them (OpenCLGemmTests).
    private static let gemmOps: Set<String> = ["convolution", "innerProduct"]

    /// Every case of the full list for this file's ops, on awkward sizes, forward and every gradient.
    func testMatchesReferenceOnFullCases() throws {
        let b = try backend()
        let cases = [OpCase].full.filter { !Self.gemmOps.contains($0.op) }
        let rows = BackendComparison(backend: b).run(cases)
        let failures = rows.filter { !$0.ok }
        XCTAssertTrue(failures.isEmpty, "\n" + ComparisonRow.table(failures))
        XCTAssertEqual(Set(rows.map(\.op)), Set(cases.map(\.op)))
    }

    /// The quick cases on other data (another seed): tie-free and tie-heavy draws both pass.
    func testMatchesReferenceOnQuickCasesWithAnotherSeed() throws {
        let b = try backend()
        let cases = [OpCase].quick.filter { !Self.gemmOps.contains($0.op) }
        let rows = BackendComparison(backend: b, seed: 12345).run(cases)
        let failures = rows.filter { !$0.ok }
        XCTAssertTrue(failures.isEmpty, "\n" + ComparisonRow.table(failures))
    }

    /// The kernels with work-group reductions (pooling.cl, softmax.cl) built for other sizes than the
    /// device's tuned one: 1, a size below most rows, and the GPU entry's 256.
    func testMatchesReferenceWithOtherWorkGroupSizes() throws {
        let ctx = try OpenCLTestSupport.context()
        let reductions: Set<String> = ["pooling", "softmax", "softmaxCrossEntropy", "meanSquaredError"]
        let cases = [OpCase].full.filter { reductions.contains($0.op) }
        for size in [1, 16, 256] where size <= ctx.device.info.maxWorkGroupSize {
            let b = OpenCLBackend(context: ctx, tuning: OpenCLTuning(workGroupSize: size))
            let failures = BackendComparison(backend: b).run(cases).filter { !$0.ok }
            XCTAssertTrue(failures.isEmpty, "work-group size \(size):\n" + ComparisonRow.table(failures))
        }
    }

    // MARK: Element-wise

    func testActivationsForwardAndBackward() throws {
        let b = try backend()
        let xs: [Float] = [-3, -0.5, 0, 0.25, 2, 40, -40]
        let dys: [Float] = [0.5, -1, 2, 1.5, -0.25, 1, 3]
        let x = try b.makeBuffer(xs), dy = try b.makeBuffer(dys)
        let y = try b.makeBuffer(count: xs.count), dx = try b.makeBuffer(count: xs.count)
        let cases: [(Activation, (Double) -> Double, (Double, Double, Double) -> Double)] = [
            (.relu, { max(0, $0) }, { x, _, g in x > 0 ? g : 0 }),
            (.leakyReLU(alpha: 0.1), { $0 > 0 ? $0 : Double(Float(0.1)) * $0 }, { x, _, g in x > 0 ? g : Double(Float(0.1)) * g }),
            (.sigmoid, { 1 / (1 + exp(-$0)) }, { _, y, g in g * y * (1 - y) }),
            (.tanh, { Foundation.tanh($0) }, { _, y, g in g * (1 - y * y) }),
            (.linear(alpha: 2, beta: -1), { 2 * $0 - 1 }, { _, _, g in 2 * g }),
        ]
        for (a, forward, backward) in cases {
            try b.activationForward(a, input: x, output: y, count: xs.count)
            let ys = try b.download(y)
            assertClose(ys, xs.map { forward(Double($0)) }, "\(a) forward")
            try b.activationBackward(a, input: x, output: y, outputGradient: dy, inputGradient: dx, count: xs.count)
            let expected = (0..<xs.count).map { backward(Double(xs[$0]), Double(ys[$0]), Double(dys[$0])) }
            assertClose(try b.download(dx), expected, "\(a) backward")
        }
    }

    func testAccumulateAddMultiplyAndChannelAffine() throws {
        let b = try backend()
        let a = try b.makeBuffer([1, 2, 3, 4, 5, 6]), c = try b.makeBuffer([0.5, -1, 2, 0, 3, -2])
        let y = try b.makeBuffer(count: 6)
        try b.elementwise(.add, a, c, output: y, count: 6)
        XCTAssertEqual(try b.download(y), [1.5, 1, 5, 4, 8, 4])
        try b.elementwise(.multiply, a, c, output: y, count: 6)
        XCTAssertEqual(try b.download(y), [0.5, -2, 6, 0, 15, -12])
        try b.accumulate(a, into: y)
        XCTAssertEqual(try b.download(y), [1.5, 0, 9, 4, 20, -6])
        // [N=2, C=3, S=1] and [N=1, C=2, S=3]: scale and shift per channel.
        let scale = try b.makeBuffer([2, -1, 0.5]), shift = try b.makeBuffer([1, 0, -1])
        try b.channelAffine([2, 3], input: a, scale: scale, shift: shift, output: y)
        XCTAssertEqual(try b.download(y), [3, -2, 0.5, 9, -5, 2])
        try b.channelAffine([1, 2, 1, 3], input: a, scale: scale, shift: shift, output: y)
        XCTAssertEqual(try b.download(y), [3, 5, 7, -4, -5, -6])
        try b.channelAffineBackward([1, 2, 1, 3], outputGradient: c, scale: scale, inputGradient: y)
        XCTAssertEqual(try b.download(y), [1, -2, 4, 0, -3, 2])
    }

    // MARK: Pooling

    func testMaxPoolingRoutesGradientToFirstMaximum() throws {
        let b = try backend()
        // 1x1x4x4, 2x2 windows, stride 2; ties: 5 at (0,1) and (1,0), 7 at (1,2) and (1,3), -1 at
        // (2,0) and (3,1). Each window's gradient goes to the first in row-major order.
        let x: [Float] = [1, 5, 2, 0,
                          5, 3, 7, 7,
                          -1, -2, 4, 4,
                          -3, -1, 4, 9]
        let g = try PoolingSpec(kind: .max).geometry(input: [1, 1, 4, 4])
        let xb = try b.makeBuffer(x), y = try b.makeBuffer(count: 4)
        try b.poolingForward(g, input: xb, output: y)
        XCTAssertEqual(try b.download(y), [5, 7, -1, 9])
        let dy = try b.makeBuffer([10, 20, 30, 40]), dx = try b.makeBuffer(count: 16)
        try b.poolingBackward(g, input: xb, output: y, outputGradient: dy, inputGradient: dx)
        XCTAssertEqual(try b.download(dx), [0, 10, 0, 0,
                                            0, 0, 20, 0,
                                            30, 0, 0, 0,
                                            0, 0, 0, 40])
    }

    func testOverlappingPaddedPoolingMatchesDirectLoops() throws {
        let b = try backend()
        let input: Shape = [2, 3, 7, 6]
        var rng = SplitMix64(seed: 7)
        // Few distinct values, so windows have ties.
        let x = (0..<input.count).map { _ in Float(Int(rng.next() % 5)) - 2 }
        let dyValues = { (n: Int) in (0..<n).map { Float($0 % 7) - 3 } }
        let specs: [PoolingSpec] = [
            PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 1, strideW: 2, padding: .valid(top: 1, bottom: 1, left: 2, right: 0)),
            PoolingSpec(kind: .max, kernelH: 3, kernelW: 2, strideH: 2, strideW: 2, padding: .includeLastPixel(height: 1, width: 1)),
            PoolingSpec(kind: .average, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2, padding: .same(.bottomRightHeavy), excludePadding: true),
            PoolingSpec(kind: .average, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2, padding: .same(.bottomRightHeavy), excludePadding: false),
            PoolingSpec(kind: .average, kernelH: 2, kernelW: 3, strideH: 2, strideW: 1, padding: .includeLastPixel(height: 1, width: 1), excludePadding: false),
            PoolingSpec(kind: .max, global: true),
            PoolingSpec(kind: .average, global: true),
        ]
        let xb = try b.makeBuffer(x)
        for spec in specs {
            let g = try spec.geometry(input: input)
            let dyHost = dyValues(g.outputShape.count)
            let expected = directPooling(g, x: x, dy: dyHost)
            let y = try b.makeBuffer(count: g.outputShape.count), dy = try b.makeBuffer(dyHost)
            let dx = try b.makeBuffer(count: input.count)
            try b.poolingForward(g, input: xb, output: y)
            try b.poolingBackward(g, input: xb, output: y, outputGradient: dy, inputGradient: dx)
            assertClose(try b.download(y), expected.y, "\(spec) forward")
            assertClose(try b.download(dx), expected.dx, "\(spec) backward")
        }
    }

    func testGlobalPoolingOnPlanesLargerThanAWorkGroup() throws {
        let b = try backend()
        let g = try PoolingSpec(kind: .max, global: true).geometry(input: [3, 2, 13, 11])
        let plane = 13 * 11
        var x = [Float](repeating: 0, count: 6 * plane)
        for p in 0..<6 { for i in 0..<plane { x[p * plane + i] = Float((i * 37 + p) % 50) } }  // ties at 49
        let xb = try b.makeBuffer(x), y = try b.makeBuffer(count: 6), dx = try b.makeBuffer(count: x.count)
        let dy = try b.makeBuffer([1, 2, 3, 4, 5, 6])
        try b.poolingForward(g, input: xb, output: y)
        XCTAssertEqual(try b.download(y), [Float](repeating: 49, count: 6))
        try b.poolingBackward(g, input: xb, output: y, outputGradient: dy, inputGradient: dx)
        let expected = directPooling(g, x: x, dy: [1, 2, 3, 4, 5, 6])
        XCTAssertEqual(try b.download(dx), expected.dx.map { Float($0) })
        var avg = g
        avg.kind = .average
        try b.poolingForward(avg, input: xb, output: y)
        assertClose(try b.download(y), directPooling(avg, x: x, dy: [1, 2, 3, 4, 5, 6]).y, "global average")
    }

    /// Pooling by the definition (the PoolGeometry doc comment), in Double.
    private func directPooling(_ g: PoolGeometry, x: [Float], dy: [Float]) -> (y: [Double], dx: [Double]) {
        var y = [Double](repeating: 0, count: g.outputShape.count), dx = [Double](repeating: 0, count: x.count)
        let (H, W) = (g.inHeight, g.inWidth)
        for p in 0..<(g.batch * g.channels) {
            for oh in 0..<g.outHeight {
                for ow in 0..<g.outWidth {
                    let h0 = oh * g.strideH - g.padTop, w0 = ow * g.strideW - g.padLeft
                    let rows = max(0, h0)..<max(0, min(H, h0 + g.kernelH)), cols = max(0, w0)..<max(0, min(W, w0 + g.kernelW))
                    let o = (p * g.outHeight + oh) * g.outWidth + ow
                    let cells = rows.flatMap { h in cols.map { p * H * W + h * W + $0 } }
                    if cells.isEmpty { continue }
                    if g.kind == .max {
                        var best = cells[0]
                        for c in cells where x[c] > x[best] { best = c }
                        y[o] = Double(x[best]); dx[best] += Double(dy[o])
                    } else {
                        let divisor = g.excludePadding ? cells.count
                            : (min(H + g.padBottom, h0 + g.kernelH) - max(-g.padTop, h0)) * (min(W + g.padRight, w0 + g.kernelW) - max(-g.padLeft, w0))
                        y[o] = cells.reduce(0) { $0 + Double(x[$1]) } / Double(divisor)
                        for c in cells { dx[c] += Double(dy[o]) / Double(divisor) }
                    }
                }
            }
        }
        return (y, dx)
    }

    // MARK: Softmax and losses

    func testSoftmaxOverChannelsForwardAndBackward() throws {
        let b = try backend()
        for (n, c, s) in [(3, 5, 1), (2, 70, 1), (2, 4, 3)] {
            let g = SoftmaxGeometry(batch: n, channels: c, spatial: s)
            let x = (0..<g.count).map { Float(($0 * 13) % 17) * 0.5 - 4 }
            let dyHost = (0..<g.count).map { Float(($0 * 7) % 11) * 0.25 - 1 }
            var y = [Double](repeating: 0, count: g.count), dx = y
            for i in 0..<n { for j in 0..<s {
                let idx = (0..<c).map { (i * c + $0) * s + j }
                let m = idx.map { Double(x[$0]) }.max()!
                let sum = idx.reduce(0) { $0 + exp(Double(x[$1]) - m) }
                for k in idx { y[k] = exp(Double(x[k]) - m) / sum }
                let dot = idx.reduce(0) { $0 + Double(dyHost[$1]) * y[$1] }
                for k in idx { dx[k] = y[k] * (Double(dyHost[k]) - dot) }
            } }
            let xb = try b.makeBuffer(x), yb = try b.makeBuffer(count: g.count)
            let dy = try b.makeBuffer(dyHost), dxb = try b.makeBuffer(count: g.count)
            try b.softmaxForward(g, input: xb, output: yb)
            assertClose(try b.download(yb), y, "softmax \(g) forward")
            try b.softmaxBackward(g, output: yb, outputGradient: dy, inputGradient: dxb)
            assertClose(try b.download(dxb), dx, tolerance: 1e-5, "softmax \(g) backward")
        }
    }

    func testSoftmaxCrossEntropyLossGradientAndCorrectCount() throws {
        let b = try backend()
        for (n, c) in [(4, 3), (5, 131)] {
            let g = SoftmaxGeometry(batch: n, channels: c)
            // Rows with a repeated maximum: the first arg-max decides "correct".
            var z = (0..<g.count).map { Float(($0 * 29) % 23) * 0.3 - 3 }
            for row in 0..<n { z[row * c + c - 1] = 10; z[row * c + (row % 2 == 0 ? 1 : c - 1)] = 10 }
            let labels = (0..<n).map { Float([1, c - 1, 0][$0 % 3]) }
            var loss = 0.0, correct = 0, dz = [Double](repeating: 0, count: g.count)
            for row in 0..<n {
                let r = (0..<c).map { Double(z[row * c + $0]) }
                let m = r.max()!, lse = m + log(r.reduce(0) { $0 + exp($1 - m) })
                let label = Int(labels[row])
                loss += lse - r[label]
                if r.firstIndex(of: m) == label { correct += 1 }
                for k in 0..<c { dz[row * c + k] = (exp(r[k] - lse) - (k == label ? 1 : 0)) / Double(n) }
            }
            let zb = try b.makeBuffer(z), lb = try b.makeBuffer(labels)
            let lossB = try b.makeBuffer(count: 1), dzB = try b.makeBuffer(count: g.count), cB = try b.makeBuffer(count: 1)
            try b.softmaxCrossEntropy(g, logits: zb, labels: lb, loss: lossB, logitsGradient: dzB, correct: cB)
            assertClose(try b.download(lossB), [loss / Double(n)], "cross-entropy \(g) loss")
            assertClose(try b.download(dzB), dz, "cross-entropy \(g) gradient")
            XCTAssertEqual(try b.download(cB), [Float(correct)], "cross-entropy \(g) correct")
            // Loss only, and a label that is not a class index: NaN, never a read out of bounds.
            try b.upload(labels.enumerated().map { $0.offset == 0 ? Float(c) : $0.element }, to: lb)
            try b.softmaxCrossEntropy(g, logits: zb, labels: lb, loss: lossB, logitsGradient: nil, correct: nil)
            XCTAssertTrue(try b.download(lossB)[0].isNaN)
        }
    }

    func testMeanSquaredErrorOverManyWorkGroups() throws {
        let b = try backend()
        for count in [1, 7, 100_003] {
            let x = (0..<count).map { Float($0 % 101) * 0.01 }, t = (0..<count).map { Float($0 % 13) * 0.05 }
            let diffs = zip(x, t).map { Double($0) - Double($1) }
            let xb = try b.makeBuffer(x), tb = try b.makeBuffer(t), loss = try b.makeBuffer(count: 1)
            let dx = try b.makeBuffer(count: count)
            try b.meanSquaredError(count: count, input: xb, target: tb, loss: loss, inputGradient: dx)
            assertClose(try b.download(loss), [diffs.reduce(0) { $0 + $1 * $1 } / Double(count)], "MSE loss \(count)")
            assertClose(try b.download(dx), diffs.map { 2 * $0 / Double(count) }, "MSE gradient \(count)")
            // Deterministic: the same inputs give bit-identical results.
            let first = try b.download(loss)
            try b.meanSquaredError(count: count, input: xb, target: tb, loss: loss, inputGradient: nil)
            XCTAssertEqual(try b.download(loss), first)
        }
    }

    // MARK: Concat

    func testConcatForwardAndBackward() throws {
        let b = try backend()
        let (n, s) = (2, 3), channels = [1, 2, 0, 3]
        let inputs = channels.enumerated().map { i, c in (0..<(n * c * s)).map { Float(100 * i + $0) } }
        let total = channels.reduce(0, +)
        var expected = [Float]()
        for ni in 0..<n { for (i, c) in channels.enumerated() { expected += inputs[i][(ni * c * s)..<((ni + 1) * c * s)] } }
        let y = try b.makeBuffer(count: n * total * s)
        try b.concatForward(try inputs.map { try b.makeBuffer($0) }, channels: channels, batch: n, spatial: s, output: y)
        XCTAssertEqual(try b.download(y), expected)
        let grads = try channels.map { try b.makeBuffer(count: n * $0 * s) }
        try b.concatBackward(y, channels: channels, batch: n, spatial: s, inputGradients: grads)
        for (i, grad) in grads.enumerated() { XCTAssertEqual(try b.download(grad), inputs[i], "input \(i)") }
    }

    // MARK: Optimizers

    func testSGDAndAdamSteps() throws {
        let b = try backend()
        let w0: [Float] = [1, -2, 0.5, 3], grad: [Float] = [0.1, -0.3, 0, 2]
        let sgd = SGDHyperparameters(learningRate: 0.1, momentum: 0.9, weightDecay: 0.01)
        let w = try b.makeBuffer(w0), g = try b.makeBuffer(grad), v = try b.makeBuffer([0.5, 0, -1, 0])
        try b.sgdStep(sgd, parameter: w, gradient: g, velocity: v, count: 4)
        var ew = w0.map(Double.init), ev = [0.5, 0, -1, 0]
        for i in 0..<4 {
            ev[i] = Double(sgd.momentum) * ev[i] + Double(grad[i]) + Double(sgd.weightDecay) * ew[i]
            ew[i] -= Double(sgd.learningRate) * ev[i]
        }
        assertClose(try b.download(w), ew, "SGD parameter")
        assertClose(try b.download(v), ev, "SGD velocity")

        let adam = AdamHyperparameters(learningRate: 0.01, weightDecay: 0.1)
        let wa = try b.makeBuffer(w0), m = try b.makeBuffer(count: 4), va = try b.makeBuffer(count: 4)
        try b.fill(m, with: 0); try b.fill(va, with: 0)
        var aw = w0.map(Double.init), am = [Double](repeating: 0, count: 4), av = am
        for step in 1...3 {
            try b.adamStep(adam, step: step, parameter: wa, gradient: g, m: m, v: va, count: 4)
            let (b1, b2) = (Double(adam.beta1), Double(adam.beta2))
            for i in 0..<4 {
                let gi = Double(grad[i]) + Double(adam.weightDecay) * aw[i]
                am[i] = b1 * am[i] + (1 - b1) * gi
                av[i] = b2 * av[i] + (1 - b2) * gi * gi
                aw[i] -= Double(adam.learningRate) * (am[i] / (1 - pow(b1, Double(step))))
                    / ((av[i] / (1 - pow(b2, Double(step)))).squareRoot() + Double(adam.eps))
            }
        }
        assertClose(try b.download(wa), aw, tolerance: 1e-5, "Adam parameter")
        assertClose(try b.download(m), am, "Adam m")
        assertClose(try b.download(va), av, "Adam v")
        XCTAssertThrowsError(try b.adamStep(adam, step: 0, parameter: wa, gradient: g, m: m, v: va, count: 4))
    }

    // MARK: Argument checks

    func testUndersizedBuffersThrowInsteadOfLaunching() throws {
        let b = try backend()
        let small = try b.makeBuffer(count: 3), big = try b.makeBuffer(count: 10)
        XCTAssertThrowsError(try b.activationForward(.relu, input: small, output: big, count: 5))
        XCTAssertThrowsError(try b.accumulate(big, into: small))
        XCTAssertThrowsError(try b.softmaxForward(SoftmaxGeometry(batch: 2, channels: 5), input: big, output: small))
        XCTAssertThrowsError(try b.concatForward([small], channels: [2], batch: 2, spatial: 1, output: big))
        XCTAssertThrowsError(try b.poolingForward(try PoolingSpec(kind: .max).geometry(input: [1, 1, 4, 4]), input: small, output: big))
        XCTAssertThrowsError(try b.meanSquaredError(count: 5, input: big, target: small, loss: big, inputGradient: nil))
    }
}
