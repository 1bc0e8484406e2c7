import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// CPUBackend against the reference: the shared case lists (`BackendComparison`) under each convolution
/// schedule and thread count, then sizes the shared lists do not reach (large enough that GEMMs and
/// loops split over threads), tie-heavy data, in-place calls, and the error paths.
final class CPUBackendTests: XCTestCase {
    // MARK: The shared comparison

    private func assertMatchesReference(_ backend: CPUBackend, _ cases: [OpCase], _ label: String,
                                        file: StaticString = #filePath, line: UInt = #line) {
        let rows = BackendComparison(backend: backend).run(cases)
        let failures = rows.filter { !$0.ok }
        XCTAssertTrue(failures.isEmpty, "\(label):\n" + ComparisonRow.table(failures), file: file, line: line)
        XCTAssertEqual(Set(rows.map(\.op)), Set(cases.map(\.op)), "\(label): every op compared", file: file, line: line)
    }

    func testFullComparisonWithReference() {
        assertMatchesReference(CPUBackend(), .full, "cpu, automatic schedule")
    }

    /// Both convolution schedules, each with one thread and with more threads than cores (uneven splits).
    func testConvolutionSchedulesMatchReference() {
        let convolutions = [OpCase].full.matching("convolution")
        XCTAssertFalse(convolutions.isEmpty)
        for schedule in [CPUConvolutionSchedule.gemmThreads, .imageThreads] {
            for threads in [1, 3] {
                let backend = CPUBackend(threads: threads)
                backend.convolutionScheduleOverride = schedule
                assertMatchesReference(backend, convolutions, "cpu \(schedule), \(threads) threads")
            }
        }
    }

    func testQuickComparisonOnOtherData() {
        let rows = BackendComparison(backend: CPUBackend(), seed: 12345).run(.quick)
        XCTAssertTrue(rows.allSatisfy(\.ok), "\n" + ComparisonRow.table(rows.filter { !$0.ok }))
    }

    // MARK: Helpers

    /// Whole numbers from a few levels, so that pooling windows and arg-maxes have ties.
    private func quantized(_ count: Int, seed: UInt64, levels: Int = 3) -> [Float] {
        var rng = SplitMix64(seed: seed)
        return (0..<count).map { _ in Float(Int(rng.next() % UInt64(levels))) }
    }

    private func double(_ values: [Float]) -> [Double] { values.map(Double.init) }

    // MARK: Convolution at sizes that split over threads

    private func checkConvolution(_ spec: ConvolutionSpec, input: Shape, seed: UInt64,
                                  file: StaticString = #filePath, line: UInt = #line) throws {
        let g = try spec.geometry(input: input)
        let (x, w, b, dy) = randomWeightedOperands(x: g.inputShape.count, w: g.weightShape.count,
                                                   bias: spec.hasBias ? g.outChannels : nil, dy: g.outputShape.count, seed: seed)
        let y = try Reference.convolutionForward(g, input: double(x), weights: double(w), bias: b.map(double))
        let dx = try Reference.convolutionBackwardData(g, outputGradient: double(dy), weights: double(w))
        let (dw, db) = try Reference.convolutionBackwardWeights(g, input: double(x), outputGradient: double(dy))
        for schedule in [CPUConvolutionSchedule.gemmThreads, .imageThreads] {
            let be = CPUBackend()
            be.convolutionScheduleOverride = schedule
            // The im2col path's threading is what this checks (Winograd has CPUWinograd*Tests and its own, looser bound).
            be.convolutionAlgorithmOverride = .im2col
            let what = "\(spec) on \(input), \(schedule)"
            let xb = try be.makeBuffer(x), wb = try be.makeBuffer(w), dyb = try be.makeBuffer(dy)
            let bb = try b.map { try be.makeBuffer($0) }
            let yb = try be.makeBuffer(count: g.outputShape.count), dxb = try be.makeBuffer(count: g.inputShape.count)
            let dwb = try be.makeBuffer(count: g.weightShape.count), dbb = try be.makeBuffer(count: g.outChannels)
            try be.convolutionForward(g, input: xb, weights: wb, bias: bb, output: yb, fusedReLU: true)
            assertWithin(try be.download(yb), y.map { max(0, $0) }, "\(what) forward+ReLU", file: file, line: line)
            try be.convolutionBackwardData(g, outputGradient: dyb, weights: wb, inputGradient: dxb)
            assertWithin(try be.download(dxb), dx, "\(what) dx", file: file, line: line)
            try be.convolutionBackwardWeights(g, input: xb, outputGradient: dyb, weightGradient: dwb,
                                              biasGradient: spec.hasBias ? dbb : nil)
            assertWithin(try be.download(dwb), dw, "\(what) dw", file: file, line: line)
            if spec.hasBias { assertWithin(try be.download(dbb), db, "\(what) db", file: file, line: line) }
        }
    }

    /// Enough channels that im2col/col2im, the epilogue and each GEMM (gemmThreads) split over threads,
    /// and a batch of 3 that splits unevenly (imageThreads).
    func testConvolutionLargeEnoughForThreads() throws {
        try checkConvolution(ConvolutionSpec(inputChannels: 128, outputChannels: 16, kernelH: 3, kernelW: 3,
                                             padding: .same(.bottomRightHeavy)), input: [2, 128, 16, 16], seed: 11)
        try checkConvolution(ConvolutionSpec(inputChannels: 40, outputChannels: 24, kernelH: 1, kernelW: 1, hasBias: false),
                             input: [3, 40, 12, 12], seed: 12)
    }

    // MARK: Inner product at sizes that split over threads

    func testInnerProductSplitsByRowsAndColumns() throws {
        let be = CPUBackend()
        // Each GEMM splits by columns for the first shape and by rows for the second.
        for (spec, input) in [(InnerProductSpec(inputChannels: 300, outputChannels: 250), Shape([64, 300])),
                              (InnerProductSpec(inputChannels: 64, outputChannels: 250), Shape([300, 4, 4, 4]))] {
            let g = try spec.geometry(input: input)
            let (N, Cin, Cout) = (g.batch, g.inputChannels, g.outputChannels)
            let x = randomFloats(N * Cin, seed: 20), w = randomFloats(Cout * Cin, seed: 21)
            let b = randomFloats(Cout, seed: 22), dy = randomFloats(N * Cout, seed: 23)
            let xb = try be.makeBuffer(x), wb = try be.makeBuffer(w), dyb = try be.makeBuffer(dy)
            let yb = try be.makeBuffer(count: N * Cout), dxb = try be.makeBuffer(count: N * Cin)
            let dwb = try be.makeBuffer(count: Cout * Cin), dbb = try be.makeBuffer(count: Cout)
            try be.innerProductForward(g, input: xb, weights: wb, bias: try be.makeBuffer(b), output: yb)
            assertWithin(try be.download(yb), try Reference.innerProductForward(g, input: double(x), weights: double(w),
                                                                              bias: double(b)), "inner product \(input) y")
            try be.innerProductBackwardData(g, outputGradient: dyb, weights: wb, inputGradient: dxb)
            assertWithin(try be.download(dxb), try Reference.innerProductBackwardData(g, outputGradient: double(dy),
                                                                                    weights: double(w)), "inner product dx")
            try be.innerProductBackwardWeights(g, input: xb, outputGradient: dyb, weightGradient: dwb, biasGradient: dbb)
            let (dw, db) = try Reference.innerProductBackwardWeights(g, input: double(x), outputGradient: double(dy))
            assertWithin(try be.download(dwb), dw, "inner product dw")
            assertWithin(try be.download(dbb), db, "inner product db")
        }
    }

    // MARK: Pooling with ties, empty windows, many planes

    func testPoolingTiesAndEdges() throws {
        let specs: [(PoolingSpec, Shape)] = [
            (PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                         padding: .includeLastPixel(height: 1, width: 0)), [2, 2, 6, 7]),
            (PoolingSpec(kind: .max, kernelH: 2, kernelW: 3, strideH: 1, strideW: 2, padding: .same(.topLeftHeavy)), [1, 3, 5, 6]),
            (PoolingSpec(kind: .average, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                         padding: .includeLastPixel(height: 1, width: 1), excludePadding: false), [1, 2, 6, 6]),
            // Padding wider than the window: empty windows give 0 and no gradient.
            (PoolingSpec(kind: .max, kernelH: 2, kernelW: 2, strideH: 2, strideW: 2,
                         padding: .valid(top: 2, bottom: 2, left: 0, right: 2)), [1, 2, 4, 4]),
            (PoolingSpec(kind: .average, kernelH: 2, kernelW: 2, strideH: 1, strideW: 1,
                         padding: .valid(top: 2, bottom: 0, left: 0, right: 0), excludePadding: false), [1, 1, 3, 3]),
            (PoolingSpec(kind: .max, global: true), [3, 4, 5, 3]),
            // Rows wide enough for the eight-at-a-time taps (strides 1 and 2), with edges on both sides.
            (PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                         padding: .includeLastPixel(height: 1, width: 1)), [2, 3, 9, 41]),
            (PoolingSpec(kind: .average, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                         padding: .same(.bottomRightHeavy), excludePadding: false), [1, 2, 7, 38]),
            (PoolingSpec(kind: .max, kernelH: 2, kernelW: 3, strideH: 1, strideW: 1, padding: .same(.topLeftHeavy)), [2, 2, 5, 27]),
            (PoolingSpec(kind: .average, kernelH: 3, kernelW: 2, strideH: 1, strideW: 1), [1, 2, 6, 19]),
            // Enough planes to split over threads.
            (PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2), [8, 64, 17, 17]),
            (PoolingSpec(kind: .average, global: true), [8, 64, 13, 13]),
        ]
        let be = CPUBackend()
        for (i, (spec, shape)) in specs.enumerated() {
            let g = try spec.geometry(input: shape)
            for x in [quantized(shape.count, seed: UInt64(30 + i)), randomFloats(shape.count, seed: UInt64(50 + i))] {
                let dy = randomFloats(g.outputShape.count, seed: UInt64(70 + i))
                let xb = try be.makeBuffer(x), dyb = try be.makeBuffer(dy)
                let yb = try be.makeBuffer([Float](repeating: 9, count: g.outputShape.count))
                let dxb = try be.makeBuffer([Float](repeating: 9, count: g.inputShape.count))
                try be.poolingForward(g, input: xb, output: yb)
                assertWithin(try be.download(yb), try Reference.poolingForward(g, input: double(x)), "pooling \(i) y")
                try be.poolingBackward(g, input: xb, output: yb, outputGradient: dyb, inputGradient: dxb)
                assertWithin(try be.download(dxb), try Reference.poolingBackward(g, input: double(x), outputGradient: double(dy)),
                            "pooling \(i) dx")
            }
        }
    }

    /// Max pooling's vectorised forward against one row-major scan, bit for bit: NaN first elements
    /// stay, later NaNs never win, -0 and +0 tie with the first one kept, -infinity everywhere; at widths
    /// that take the stride-1, stride-2 and gathered vector paths and their scalar borders. Average
    /// windows that never overlap (written, not added), covering the plane or not.
    func testPoolingVectorPathsExactly() throws {
        let specs: [(PoolingSpec, Shape)] = [
            (PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                         padding: .includeLastPixel(height: 0, width: 0)), [2, 3, 21, 40]),
            (PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2), [1, 2, 19, 37]),
            // The last vector block of each row reads one float past it: past the buffer on the last row.
            (PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2), [1, 1, 7, 33]),
            (PoolingSpec(kind: .max, kernelH: 2, kernelW: 3, strideH: 1, strideW: 1, padding: .same(.topLeftHeavy)), [2, 2, 9, 29]),
            (PoolingSpec(kind: .max, kernelH: 3, kernelW: 2, strideH: 2, strideW: 3,
                         padding: .valid(top: 1, bottom: 0, left: 2, right: 1)), [1, 3, 11, 61]),
            (PoolingSpec(kind: .max, global: true), [2, 3, 5, 17]),
            (PoolingSpec(kind: .average, kernelH: 2, kernelW: 2, strideH: 3, strideW: 3), [2, 2, 10, 20]),
            (PoolingSpec(kind: .average, kernelH: 2, kernelW: 3, strideH: 2, strideW: 3), [2, 2, 8, 21]),
        ]
        let levels: [Float] = [-1, -0.0, 0, 1, .nan, -.infinity, 2]
        let be = CPUBackend()
        for (i, (spec, shape)) in specs.enumerated() {
            let g = try spec.geometry(input: shape)
            var rng = SplitMix64(seed: UInt64(200 + i))
            let x = (0..<shape.count).map { _ in levels[Int(rng.next() % UInt64(levels.count))] }
            let xb = try be.makeBuffer(x)
            let yb = try be.makeBuffer([Float](repeating: 9, count: g.outputShape.count))
            try be.poolingForward(g, input: xb, output: yb)
            let y = try be.download(yb), expected = try Reference.poolingForward(g, input: double(x))
            if spec.kind == .max {
                for (j, (a, e)) in zip(y, expected).enumerated() where !(a.isNaN && e.isNaN) && a.bitPattern != Float(e).bitPattern {
                    XCTFail("max pooling \(i) y[\(j)] = \(a), expected \(e)")
                    break
                }
            } else {
                let finite = (0..<shape.count).map { _ in rng.nextFloat(in: -1...1) }
                let fb = try be.makeBuffer(finite), dy = randomFloats(g.outputShape.count, seed: UInt64(220 + i))
                let dxb = try be.makeBuffer([Float](repeating: 9, count: g.inputShape.count))
                try be.poolingForward(g, input: fb, output: yb)
                assertWithin(try be.download(yb), try Reference.poolingForward(g, input: double(finite)), "average pooling \(i) y")
                try be.poolingBackward(g, input: fb, output: yb, outputGradient: try be.makeBuffer(dy), inputGradient: dxb)
                assertWithin(try be.download(dxb), try Reference.poolingBackward(g, input: double(finite), outputGradient: double(dy)),
                            "average pooling \(i) dx")
            }
        }
    }

    // MARK: Work splitting

    /// Every item runs exactly once, whatever the thread count and grain, and worker indices stay
    /// below the worker count (they pick per-worker scratch).
    func testParallelLoopsCoverEveryItemOnce() {
        for threads in [1, 2, 3] {
            let be = CPUBackend(threads: threads)
            for (count, grain) in [(0, 1), (1, 1), (7, 1), (100, 10), (100_003, 1 << 12), (50, 1 << 15)] {
                let hits = UnsafeMutablePointer<Int>.allocate(capacity: max(1, count))
                hits.initialize(repeating: 0, count: max(1, count))
                defer { hits.deallocate() }
                be.parallelChunks(count, grain: grain) { r in for i in r { hits[i] += 1 } }
                XCTAssertTrue((0..<count).allSatisfy { hits[$0] == 1 }, "parallelChunks \(count)/\(grain), \(threads) threads")
                let workers = UnsafeMutablePointer<Int>.allocate(capacity: max(1, count))
                defer { workers.deallocate() }
                hits.update(repeating: 0, count: count)
                be.dynamicForEach(count, workers: 4) { t, i in hits[i] += 1; workers[i] = t }
                XCTAssertTrue((0..<count).allSatisfy { hits[$0] == 1 }, "dynamicForEach \(count), \(threads) threads")
                XCTAssertTrue((0..<count).allSatisfy { workers[$0] >= 0 && workers[$0] < min(4, threads) },
                              "dynamicForEach worker indices, \(threads) threads")
            }
        }
    }

    // MARK: Streaming ops at sizes that split over threads, and in place

    func testActivationsLargeAndInPlace() throws {
        let be = CPUBackend()
        let count = 200_003
        var x = randomFloats(count, seed: 90, in: -4...4)
        x[0] = 0  // ReLU's x = 0 takes the "x <= 0" branch
        let dy = randomFloats(count, seed: 91)
        let xb = try be.makeBuffer(x), dyb = try be.makeBuffer(dy)
        let yb = try be.makeBuffer(count: count), dxb = try be.makeBuffer(count: count)
        for a in [Activation.relu, .leakyReLU(alpha: 0.1), .sigmoid, .tanh, .linear(alpha: 1.5, beta: -0.25)] {
            try be.activationForward(a, input: xb, output: yb, count: count)
            let y = try be.download(yb)
            assertWithin(y, try Reference.activationForward(a, input: double(x)), atol: 1e-6, rtol: 1e-5, "\(a) y")
            try be.activationBackward(a, input: xb, output: yb, outputGradient: dyb, inputGradient: dxb, count: count)
            assertWithin(try be.download(dxb), try Reference.activationBackward(a, input: double(x), output: double(y),
                                                                              outputGradient: double(dy)),
                        atol: 1e-6, rtol: 1e-5, "\(a) dx")
        }
        try be.activationForward(.relu, input: xb, output: xb, count: count)
        assertWithin(try be.download(xb), x.map { max(0, Double($0)) }, atol: 0, rtol: 0, "relu in place")
    }

    func testElementwiseConcatAffineLarge() throws {
        let be = CPUBackend()
        let count = 150_001
        let a = randomFloats(count, seed: 100), b = randomFloats(count, seed: 101)
        let ab = try be.makeBuffer(a), bb = try be.makeBuffer(b), yb = try be.makeBuffer(count: count)
        for op in [ElementwiseOp.add, .multiply] {
            try be.elementwise(op, ab, bb, output: yb, count: count)
            assertWithin(try be.download(yb), try Reference.elementwise(op, double(a), double(b)), atol: 0, rtol: 1e-7, "\(op)")
        }
        try be.accumulate(ab, into: yb)
        assertWithin(try be.download(yb), (0..<count).map { Double(a[$0] * b[$0] + a[$0]) }, atol: 0, rtol: 0, "accumulate")

        let (N, S, channels) = (16, 1024, [2, 1, 3])
        let parts = channels.enumerated().map { i, c in randomFloats(N * c * S, seed: UInt64(110 + i)) }
        let inputs = try parts.map { try be.makeBuffer($0) }
        let joined = try be.makeBuffer(count: N * 6 * S)
        try be.concatForward(inputs, channels: channels, batch: N, spatial: S, output: joined)
        assertWithin(try be.download(joined), try Reference.concatForward(parts.map(double), channels: channels, batch: N, spatial: S),
                    atol: 0, rtol: 0, "concat")
        let grads = try channels.map { try be.makeBuffer(count: N * $0 * S) }
        try be.concatBackward(joined, channels: channels, batch: N, spatial: S, inputGradients: grads)
        for (i, g) in grads.enumerated() { assertWithin(try be.download(g), double(parts[i]), atol: 0, rtol: 0, "concat dx \(i)") }
        XCTAssertThrowsError(try be.concatForward(Array(inputs.prefix(2)), channels: channels, batch: N, spatial: S, output: joined))

        let shape = Shape(n: N, c: 6, h: 32, w: 32)
        let x = randomFloats(shape.count, seed: 120), scale = randomFloats(6, seed: 121), shift = randomFloats(6, seed: 122)
        let xb = try be.makeBuffer(x), sb = try be.makeBuffer(scale), tb = try be.makeBuffer(shift)
        let ob = try be.makeBuffer(count: shape.count)
        try be.channelAffine(shape, input: xb, scale: sb, shift: tb, output: ob)
        assertWithin(try be.download(ob), try Reference.channelAffine(shape, input: double(x), scale: double(scale), shift: double(shift)),
                    atol: 1e-6, rtol: 1e-6, "channel affine")
        try be.channelAffineBackward(shape, outputGradient: xb, scale: sb, inputGradient: ob)
        assertWithin(try be.download(ob), try Reference.channelAffineBackward(shape, outputGradient: double(x), scale: double(scale)),
                    atol: 1e-6, rtol: 1e-6, "channel affine backward")
    }

    // MARK: Softmax and losses

    /// Spatial softmax past one block of positions, and a 1000-class softmax with large logits.
    func testSoftmaxLarge() throws {
        let be = CPUBackend()
        for g in [SoftmaxGeometry(batch: 2, channels: 5, spatial: 300), SoftmaxGeometry(batch: 64, channels: 1000)] {
            let x = randomFloats(g.count, seed: 130, in: -20...20), dy = randomFloats(g.count, seed: 131)
            let xb = try be.makeBuffer(x), dyb = try be.makeBuffer(dy)
            let yb = try be.makeBuffer(count: g.count), dxb = try be.makeBuffer(count: g.count)
            try be.softmaxForward(g, input: xb, output: yb)
            let y = try be.download(yb)
            assertWithin(y, try Reference.softmaxForward(g, input: double(x)), atol: 1e-6, rtol: 1e-5, "softmax \(g)")
            try be.softmaxBackward(g, output: yb, outputGradient: dyb, inputGradient: dxb)
            assertWithin(try be.download(dxb), try Reference.softmaxBackward(g, output: double(y), outputGradient: double(dy)),
                        atol: 1e-6, rtol: 1e-4, "softmax backward \(g)")
        }
    }

    func testSoftmaxCrossEntropyTiesAndBadLabels() throws {
        let be = CPUBackend()
        let g = SoftmaxGeometry(batch: 6, channels: 4)
        var z = randomFloats(g.count, seed: 140, in: -3...3)
        z[4..<8] = [2, 5, 5, 1]  // row 1: tie between classes 1 and 2, the first wins
        z[8..<12] = [2, 5, 5, 1]
        let labels: [Float] = [0, 1, 2, 3, 1, 0]
        let expected = try Reference.softmaxCrossEntropy(g, logits: double(z), labels: double(labels))
        let zb = try be.makeBuffer(z), lb = try be.makeBuffer(labels)
        let lossb = try be.makeBuffer(count: 1), dzb = try be.makeBuffer(count: g.count), cb = try be.makeBuffer(count: 1)
        try be.softmaxCrossEntropy(g, logits: zb, labels: lb, loss: lossb, logitsGradient: dzb, correct: cb)
        assertWithin(try be.download(lossb), [expected.loss], atol: 1e-6, rtol: 1e-5, "cross-entropy loss")
        assertWithin(try be.download(dzb), expected.logitsGradient, atol: 1e-7, rtol: 1e-5, "cross-entropy dz")
        XCTAssertEqual(try be.download(cb), [Float(expected.correct)])
        // The gradient may overwrite the logits (every row reads its label logit before writing).
        let inPlace = try be.makeBuffer(z)
        try be.softmaxCrossEntropy(g, logits: inPlace, labels: lb, loss: lossb, logitsGradient: inPlace, correct: cb)
        assertWithin(try be.download(inPlace), expected.logitsGradient, atol: 1e-7, rtol: 1e-5, "cross-entropy dz in place")
        assertWithin(try be.download(lossb), [expected.loss], atol: 1e-6, rtol: 1e-5, "cross-entropy loss in place")
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

    func testMeanSquaredErrorLarge() throws {
        let be = CPUBackend()
        let count = 100_000
        let x = randomFloats(count, seed: 150), t = randomFloats(count, seed: 151)
        let xb = try be.makeBuffer(x), tb = try be.makeBuffer(t)
        let lb = try be.makeBuffer(count: 1), db = try be.makeBuffer(count: count)
        try be.meanSquaredError(count: count, input: xb, target: tb, loss: lb, inputGradient: db)
        let expected = try Reference.meanSquaredError(input: double(x), target: double(t))
        assertWithin(try be.download(lb), [expected.loss], atol: 1e-7, rtol: 1e-5, "mse")
        assertWithin(try be.download(db), expected.inputGradient, atol: 1e-9, rtol: 1e-5, "mse dx")
        try be.meanSquaredError(count: count, input: xb, target: tb, loss: lb, inputGradient: xb)
        assertWithin(try be.download(xb), expected.inputGradient, atol: 1e-9, rtol: 1e-5, "mse dx in place")
    }

    func testOptimizersLarge() throws {
        let be = CPUBackend()
        let count = 70_001
        let w0 = randomFloats(count, seed: 160), g0 = randomFloats(count, seed: 161), v0 = randomFloats(count, seed: 162, in: 0...1)
        let sgd = SGDHyperparameters(learningRate: 0.05, momentum: 0.9, weightDecay: 1e-3)
        let wb = try be.makeBuffer(w0), gb = try be.makeBuffer(g0), vb = try be.makeBuffer(v0)
        try be.sgdStep(sgd, parameter: wb, gradient: gb, velocity: vb, count: count)
        var w = double(w0), v = double(v0)
        try Reference.sgdStep(sgd, parameter: &w, gradient: double(g0), velocity: &v)
        assertWithin(try be.download(wb), w, atol: 1e-6, rtol: 1e-5, "SGD w")
        assertWithin(try be.download(vb), v, atol: 1e-6, rtol: 1e-5, "SGD v")

        let adam = AdamHyperparameters(learningRate: 0.01, weightDecay: 1e-2)
        let mb = try be.makeBuffer(g0), sb = try be.makeBuffer(v0)
        try be.upload(w0, to: wb)
        try be.adamStep(adam, step: 3, parameter: wb, gradient: gb, m: mb, v: sb, count: count)
        w = double(w0)
        var m = double(g0), s = double(v0)
        try Reference.adamStep(adam, step: 3, parameter: &w, gradient: double(g0), m: &m, v: &s)
        assertWithin(try be.download(wb), w, atol: 1e-6, rtol: 1e-5, "Adam w")
        assertWithin(try be.download(mb), m, atol: 1e-6, rtol: 1e-5, "Adam m")
        assertWithin(try be.download(sb), s, atol: 1e-6, rtol: 1e-5, "Adam v")
        XCTAssertThrowsError(try be.adamStep(adam, step: 0, parameter: wb, gradient: gb, m: mb, v: sb, count: count))
    }

    // MARK: Concurrent use

    /// Two backends running convolutions and inner products at once (as data-parallel replicas do)
    /// get the right answers, and OpenBLAS's thread count is back to what it was afterwards.
    func testConcurrentBackendsAgreeAndRestoreBLASThreads() throws {
        let before = CPUKernels.blasThreadCount
        let g = try ConvolutionSpec(inputChannels: 16, outputChannels: 24, kernelH: 3, kernelW: 3,
                                    padding: .same(.bottomRightHeavy)).geometry(input: [4, 16, 12, 12])
        let ip = try InnerProductSpec(inputChannels: 300, outputChannels: 250, hasBias: false).geometry(input: [64, 300])
        let x = randomFloats(g.inputShape.count, seed: 170), w = randomFloats(g.weightShape.count, seed: 171), b = randomFloats(24, seed: 172)
        let ipx = randomFloats(64 * 300, seed: 173), ipw = randomFloats(250 * 300, seed: 174)
        let expected = try Reference.convolutionForward(g, input: double(x), weights: double(w), bias: double(b))
        let ipExpected = try Reference.innerProductForward(ip, input: double(ipx), weights: double(ipw), bias: nil)
        let backends = UncheckedSendable([CPUBackend(), CPUBackend()])  // one per thread
        let outputs = Locked((conv: [[Float]](repeating: [], count: 2), ip: [[Float]](repeating: [], count: 2)))
        DispatchQueue.concurrentPerform(iterations: 2) { i in
            do {
                let be = backends.value[i]
                let y = try be.makeBuffer(count: g.outputShape.count), ipy = try be.makeBuffer(count: 64 * 250)
                for _ in 0..<5 {
                    try be.convolutionForward(g, input: try be.makeBuffer(x), weights: try be.makeBuffer(w),
                                              bias: try be.makeBuffer(b), output: y, fusedReLU: false)
                    try be.innerProductForward(ip, input: try be.makeBuffer(ipx), weights: try be.makeBuffer(ipw),
                                               bias: nil, output: ipy)
                }
                let (r, q) = (try be.download(y), try be.download(ipy))
                outputs.mutate { $0.conv[i] = r; $0.ip[i] = q }
            } catch {
                XCTFail("backend \(i): \(error)")
            }
        }
        for i in 0..<2 {
            assertWithin(outputs.value.conv[i], expected, "concurrent convolution \(i)")
            assertWithin(outputs.value.ip[i], ipExpected, "concurrent inner product \(i)")
        }
        XCTAssertEqual(CPUKernels.blasThreadCount, before)
    }

    // MARK: Memory and errors

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
        // Buffers from `HostAllocation.mappedFrom` up are mapped, not allocated: zeroed all the same,
        // also where a freed one of the same size was written before.
        let mapped = HostAllocation.mappedFrom / 4 + 3
        for round in 0..<2 {
            let m = try be.makeBuffer(count: mapped)
            XCTAssertTrue(try be.download(m).allSatisfy { $0 == 0 }, "mapped buffer zeroed (round \(round))")
            try be.fill(m, with: 7)
            XCTAssertEqual(try be.download(m).last, 7)
        }
        let scratch = CPUWorkspace()
        let p = scratch.floats(mapped)
        p[mapped - 1] = 1
        XCTAssertEqual(scratch.floats(10), p, "scratch that is large enough is reused")
        XCTAssertEqual(Int(bitPattern: scratch.floats(mapped * 2)) % CPUBuffer.alignment, 0, "grown scratch aligned")

        XCTAssertThrowsError(try be.upload([1, 2], to: a))
        XCTAssertThrowsError(try be.copy(big, to: a), "destination too small")
        XCTAssertThrowsError(try be.makeBuffer(count: -1))
        XCTAssertThrowsError(try be.download(ForeignBuffer())) { error in
            XCTAssertTrue("\(error)".contains("not a CPU buffer"), "\(error)")
        }
        // A buffer of the reference backend is another backend's too.
        XCTAssertThrowsError(try be.activationForward(.relu, input: try ReferenceBackend().makeBuffer(count: 3), output: a, count: 3))
        XCTAssertThrowsError(try be.activationForward(.relu, input: big, output: a, count: 4)) { error in
            XCTAssertTrue("\(error)".contains("relu output holds 3 values, the op needs 4"), "\(error)")
        }
    }

    func testConvolutionArgumentErrors() throws {
        let be = CPUBackend()
        let g = try ConvolutionSpec(inputChannels: 2, outputChannels: 3, kernelH: 3, kernelW: 3).geometry(input: [1, 2, 5, 5])
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
        // The bias gradient may be skipped.
        try be.convolutionBackwardWeights(g, input: x, outputGradient: y, weightGradient: w, biasGradient: nil)
    }
}
