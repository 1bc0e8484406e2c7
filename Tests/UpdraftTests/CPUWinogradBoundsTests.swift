import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// Winograd's input gradient (both tile sizes) against the Double reference, and both tile sizes'
/// rounding error measured at the real 3x3 shapes of ResNet-18 and SqueezeNet 1.1 against a bound.
final class CPUWinogradBoundsTests: XCTestCase {
    /// Shapes with partial tiles, every padding Winograd's backward pass takes (0 to 2, uneven), odd
    /// channel counts and more tiles than one block.
    private let backwardCases: [(ConvolutionSpec, Shape)] = [
        (ConvolutionSpec(inputChannels: 5, outputChannels: 7, kernelH: 3, kernelW: 3), [3, 5, 9, 13]),
        (ConvolutionSpec(inputChannels: 3, outputChannels: 4, kernelH: 3, kernelW: 3, padding: .same(.bottomRightHeavy)), [2, 3, 7, 4]),
        (ConvolutionSpec(inputChannels: 6, outputChannels: 5, kernelH: 3, kernelW: 3,
                         padding: .valid(top: 2, bottom: 0, left: 1, right: 2)), [1, 6, 5, 6]),
        (ConvolutionSpec(inputChannels: 16, outputChannels: 17, kernelH: 3, kernelW: 3, padding: .same(.topLeftHeavy)), [3, 16, 14, 14]),
        (ConvolutionSpec(inputChannels: 4, outputChannels: 3, kernelH: 3, kernelW: 3, padding: .same(.bottomRightHeavy)), [2, 4, 47, 45]),
        (ConvolutionSpec(inputChannels: 2, outputChannels: 2, kernelH: 3, kernelW: 3), [1, 2, 4, 4]),
    ]

    func testBackwardDataMatchesReference() throws {
        for (i, (spec, input)) in backwardCases.enumerated() {
            let g = try spec.geometry(input: input)
            let dy = Tensor(shape: g.outputShape, uniformIn: -2...2, seed: UInt64(10 + i))
            let w = Tensor(shape: g.weightShape, uniformIn: -1...1, seed: UInt64(20 + i))
            func run(_ backend: Backend) throws -> [Float] {
                // The gradient buffer starts dirty: the pass must overwrite it, not add to it.
                let dx = try backend.makeBuffer(Tensor(shape: g.inputShape, uniformIn: 5...6, seed: 3))
                try backend.convolutionBackwardData(g, outputGradient: try backend.makeBuffer(dy),
                                                    weights: try backend.makeBuffer(w), inputGradient: dx)
                return try backend.download(dx)
            }
            let expected = try run(ReferenceBackend()).map(Double.init)
            // The direct convolution runs forward passes only.
            for algorithm in CPUConvolutionAlgorithm.allCases where algorithm != .direct && (algorithm != .onednn || OneDNN.isAvailable) {
                for threads in [1, 3] {
                    let be = CPUBackend(threads: threads)
                    be.convolutionAlgorithmOverride = algorithm
                    XCTAssertEqual(be.backwardDataAlgorithm(for: g), algorithm, "case \(i)")
                    assertWithin(try run(be), expected, atol: 1e-4, rtol: 1e-4, "case \(i) \(spec) on \(input), \(algorithm), \(threads) threads")
                }
            }
        }
    }

    /// F(4x4, 3x3) applies a ReLU epilogue inside its output transform: bit for bit what the separate
    /// pass gives (x > 0 ? x : 0, so a NaN becomes 0), into a slice of a wider output too.
    func testTheFusedReLUEqualsTheSeparatePass() throws {
        let spec = ConvolutionSpec(inputChannels: 9, outputChannels: 6, kernelH: 3, kernelW: 3, padding: .same(.bottomRightHeavy))
        let g = try spec.geometry(input: [2, 9, 13, 11])
        var xs = Tensor(shape: g.inputShape, uniformIn: -1...1, seed: 4)
        xs.data[5] = .nan  // poisons the outputs whose windows read it
        let w = Tensor(shape: g.weightShape, uniformIn: -1...1, seed: 5), b = Tensor(shape: [6], uniformIn: -1...1, seed: 6)
        let be = CPUBackend(threads: 2)
        be.convolutionAlgorithmOverride = .winograd4x4
        func run(_ epilogue: Activation?) throws -> [Float] {
            let y = try be.makeBuffer(Tensor(shape: [2, 10, 13, 11], uniformIn: 7...8, seed: 7))
            try be.convolutionForward(g, input: try be.makeBuffer(xs), weights: try be.makeBuffer(w), bias: try be.makeBuffer(b),
                                      output: y, channelOffset: 3, outputChannels: 10, epilogue: epilogue)
            return try be.download(y)
        }
        let fused = try run(.relu), plain = try run(nil)
        let separate = plain.enumerated().map { i, v in (i / (13 * 11)) % 10 >= 3 && (i / (13 * 11)) % 10 < 9 ? (v > 0 ? v : 0) : v }
        XCTAssertEqual(fused.map(\.bitPattern), separate.map(\.bitPattern))
        XCTAssertTrue(plain.contains { $0.isNaN }, "the NaN reached some outputs")
        XCTAssertFalse(fused.contains { $0.isNaN }, "and the ReLU made them 0")
    }

    /// A padding over 2 has no Winograd backward pass (the swapped geometry would need a negative
    /// padding): it stays on im2col even when Winograd is forced, and still matches the reference.
    func testBackwardDataWithWidePaddingStaysOnIm2col() throws {
        let spec = ConvolutionSpec(inputChannels: 3, outputChannels: 4, kernelH: 3, kernelW: 3,
                                   padding: .valid(top: 3, bottom: 0, left: 0, right: 0))
        let g = try spec.geometry(input: [1, 3, 8, 8])
        let be = CPUBackend(threads: 2)
        be.convolutionAlgorithmOverride = .winograd4x4
        XCTAssertEqual(be.forwardAlgorithm(for: g), .winograd4x4)
        XCTAssertEqual(be.backwardDataAlgorithm(for: g), .im2col)
        let dy = Tensor(shape: g.outputShape, uniformIn: -1...1, seed: 1), w = Tensor(shape: g.weightShape, uniformIn: -1...1, seed: 2)
        var results: [[Float]] = []
        for backend in [be, ReferenceBackend()] as [Backend] {
            let dx = try backend.makeBuffer(count: g.inputShape.count)
            try backend.convolutionBackwardData(g, outputGradient: try backend.makeBuffer(dy), weights: try backend.makeBuffer(w), inputGradient: dx)
            results.append(try backend.download(dx))
        }
        assertWithin(results[0], results[1].map(Double.init), atol: 1e-5, rtol: 1e-5, "padding 3")
    }

    /// The documented bound: at the 3x3 stride-1 shapes of ResNet-18 (64@56, 128@28, 256@14, 512@7)
    /// and SqueezeNet 1.1 (expand3x3 of fire2, fire4, fire6, fire8), with ImageNet-like activations
    /// (0...1) and weights (±0.1), each output's error against a Double sum is at most
    /// `bound(tile)` x sum |x| |w| over its 3x3 x Cin window. Measured on this machine's CPU (max over
    /// 512 sampled outputs per shape): F(2x2) 7.7e-8, F(4x4) 5.0e-7 of that sum; im2col 1.3e-7.
    func testErrorBoundAtResNetAndSqueezeNetShapes() throws {
        let pad1 = ConvolutionPadding.valid(top: 1, bottom: 1, left: 1, right: 1)
        let shapes: [(String, Int, Int, Int)] = [
            ("resnet18 64@56", 64, 64, 56), ("resnet18 128@28", 128, 128, 28), ("resnet18 256@14", 256, 256, 14),
            ("resnet18 512@7", 512, 512, 7), ("fire2 expand3x3", 16, 64, 55), ("fire4 expand3x3", 32, 128, 27),
            ("fire6 expand3x3", 48, 192, 13), ("fire8 expand3x3", 64, 256, 13),
        ]
        let bound: [CPUConvolutionAlgorithm: Double] = [.im2col: 5e-7, .winograd: 5e-7, .winograd4x4: 2e-6, .onednn: 5e-7, .direct: 5e-7]
        var worst: [CPUConvolutionAlgorithm: Double] = [:]
        for (name, cin, cout, side) in shapes {
            let spec = ConvolutionSpec(inputChannels: cin, outputChannels: cout, kernelH: 3, kernelW: 3, padding: pad1, hasBias: false)
            let g = try spec.geometry(input: [1, cin, side, side])
            let x = Tensor(shape: g.inputShape, uniformIn: 0...1, seed: 5), w = Tensor(shape: g.weightShape, uniformIn: -0.1...0.1, seed: 6)
            // 512 sampled outputs, the borders' included, each an exact Double sum and its sum of |x||w|.
            var rng = SplitMix64(seed: 99)
            let samples = (0..<512).map { _ in
                (Int(rng.next() % UInt64(cout)), Int(rng.next() % UInt64(side)), Int(rng.next() % UInt64(side)))
            } + [(0, 0, 0), (cout - 1, side - 1, side - 1), (0, 0, side - 1), (0, side - 1, 0)]
            let expected = samples.map { k, oy, ox -> (Double, Double) in
                var sum = 0.0, magnitude = 0.0
                for c in 0..<cin {
                    for r in 0..<3 {
                        for s in 0..<3 {
                            let iy = oy + r - 1, ix = ox + s - 1
                            guard iy >= 0, iy < side, ix >= 0, ix < side else { continue }
                            let a = Double(x.data[(c * side + iy) * side + ix]), b = Double(w.data[((k * cin + c) * 3 + r) * 3 + s])
                            sum += a * b
                            magnitude += abs(a * b)
                        }
                    }
                }
                return (sum, magnitude)
            }
            // The direct convolution where it runs (K up to `directMaxK`: the fire modules' expand3x3).
            for algorithm in CPUConvolutionAlgorithm.allCases where algorithm != .direct || g.gemmK <= CPUBackend.directMaxK {
                let be = CPUBackend(threads: 2)
                be.convolutionAlgorithmOverride = algorithm
                let y = try be.makeBuffer(count: g.outputShape.count)
                try be.convolutionForward(g, input: try be.makeBuffer(x), weights: try be.makeBuffer(w), bias: nil, output: y, epilogue: nil)
                let got = try be.download(y)
                var ratio = 0.0
                for ((k, oy, ox), (sum, magnitude)) in zip(samples, expected) {
                    ratio = max(ratio, abs(Double(got[(k * side + oy) * side + ox]) - sum) / max(magnitude, 1e-30))
                }
                worst[algorithm] = max(worst[algorithm] ?? 0, ratio)
                XCTAssertLessThanOrEqual(ratio, bound[algorithm]!, "\(name), \(algorithm): error \(ratio) of sum |x||w|")
            }
        }
        print("Winograd error bound, worst error / sum |x||w|: " + CPUConvolutionAlgorithm.allCases.map {
            "\($0.rawValue) \(String(format: "%.2e", worst[$0] ?? 0))" }.joined(separator: ", "))
    }
}
