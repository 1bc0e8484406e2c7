import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// A residual add fused into a convolution (`DeviceOps.ConvolutionForward.residual`): y = f(conv(x) + b + r).
/// Each CPU engine (im2col, grouped direct, Winograd F2 and F4, the small-K direct kernel, oneDNN),
/// both schedules, and OpenCL (the implicit-GEMM kernel's `-D RESIDUAL` epilogue, the grouped kernels'
/// add after) against the Double reference and against the same backend's unfused passes
/// (convolution, then `elementwise(.add)`, then the activation).
final class ConvolutionResidualTests: XCTestCase {
    private struct Case {
        var spec: ConvolutionSpec
        var input: Shape
        /// The CPU engines that must run this case (besides im2col, which runs every case).
        var engines: [CPUConvolutionAlgorithm]
        var grouped = false
    }

    private let cases: [Case] = [
        // 3x3 stride 1 with partial tiles: Winograd F2 and F4, oneDNN.
        Case(spec: ConvolutionSpec(inputChannels: 5, outputChannels: 7, kernelH: 3, kernelW: 3, padding: .same(.bottomRightHeavy)),
             input: [3, 5, 9, 13], engines: [.winograd, .winograd4x4, .onednn]),
        // Four whole F(4x4) tiles in a row (the 16-wide loads), no bias.
        Case(spec: ConvolutionSpec(inputChannels: 4, outputChannels: 3, kernelH: 3, kernelW: 3, padding: .same(.topLeftHeavy),
                                   hasBias: false), input: [2, 4, 16, 20], engines: [.winograd, .winograd4x4]),
        // 1x1 with few input channels: the small-K direct kernel; im2col reads the image in place.
        Case(spec: ConvolutionSpec(inputChannels: 3, outputChannels: 9, kernelH: 1, kernelW: 1), input: [2, 3, 6, 5],
             engines: [.direct, .onednn]),
        // A strided 1x1 (ResNet's downsample).
        Case(spec: ConvolutionSpec(inputChannels: 6, outputChannels: 8, kernelH: 1, kernelW: 1, strideH: 2, strideW: 2),
             input: [2, 6, 9, 8], engines: [.onednn]),
        // Depthwise: the grouped direct loops.
        Case(spec: ConvolutionSpec(inputChannels: 6, outputChannels: 6, kernelH: 3, kernelW: 3, groups: 6,
                                   padding: .same(.bottomRightHeavy)), input: [2, 6, 7, 7], engines: [], grouped: true),
    ]

    private let epilogues: [Activation?] = [nil, .relu, .leakyReLU(alpha: 0.1)]

    /// The operands of one case, seeded: x, w, b, the residual; the output starts dirty.
    private struct Operands {
        var x: Tensor, w: Tensor, b: Tensor?, r: Tensor
        init(_ g: ConvGeometry, seed: UInt64) {
            x = Tensor(shape: g.inputShape, uniformIn: -2...2, seed: seed)
            w = Tensor(shape: g.weightShape, uniformIn: -1...1, seed: seed + 1)
            b = g.hasBias ? Tensor(shape: [g.outChannels], uniformIn: -1...1, seed: seed + 2) : nil
            r = Tensor(shape: g.outputShape, uniformIn: -3...3, seed: seed + 3)
        }
    }

    /// The fused op on `backend`.
    private func fused(_ backend: Backend, _ g: ConvGeometry, _ o: Operands, _ epilogue: Activation?) throws -> [Float] {
        let y = try backend.makeBuffer(Tensor(shape: g.outputShape, uniformIn: 5...6, seed: 1))
        let r = try backend.makeBuffer(o.r)
        try backend.convolutionForward(g, input: try backend.makeBuffer(o.x), weights: try backend.makeBuffer(o.w),
                                       bias: try o.b.map { try backend.makeBuffer($0) }, output: y, residual: r, epilogue: epilogue)
        XCTAssertEqual(try backend.download(r), o.r.data, "\(backend.name): the residual is only read")
        return try backend.download(y)
    }

    /// The same on `backend` unfused: the convolution, the add, the activation, each its own pass.
    private func unfused(_ backend: Backend, _ g: ConvGeometry, _ o: Operands, _ epilogue: Activation?) throws -> [Float] {
        let y = try backend.makeBuffer(Tensor(shape: g.outputShape, uniformIn: 5...6, seed: 1))
        try backend.convolutionForward(g, input: try backend.makeBuffer(o.x), weights: try backend.makeBuffer(o.w),
                                       bias: try o.b.map { try backend.makeBuffer($0) }, output: y, epilogue: nil)
        let sum = try backend.makeBuffer(count: g.outputShape.count)
        try backend.elementwise(.add, y, try backend.makeBuffer(o.r), output: sum, count: g.outputShape.count)
        guard let epilogue else { return try backend.download(sum) }
        try backend.activationForward(epilogue, ActivationGeometry(shape: g.outputShape), input: sum, output: y)
        return try backend.download(y)
    }

    /// The definition: the Double reference's residual form equals its convolution, add and activation.
    private func expected(_ g: ConvGeometry, _ o: Operands, _ epilogue: Activation?) throws -> [Double] {
        let x = o.x.data.map(Double.init), w = o.w.data.map(Double.init), b = o.b?.data.map(Double.init)
        let r = o.r.data.map(Double.init)
        let y = try Reference.convolutionForward(g, input: x, weights: w, bias: b, residual: r, epilogue: epilogue)
        var composed = zip(try Reference.convolutionForward(g, input: x, weights: w, bias: b), r).map { $0 + $1 }
        if let epilogue { composed = try Reference.activationForward(epilogue, ActivationGeometry(shape: g.outputShape), input: composed) }
        XCTAssertEqual(y, composed, "the reference's fused residual is its convolution, add and activation")
        return y
    }

    func testReferenceBackendMatchesTheDefinition() throws {
        for (i, c) in cases.enumerated() {
            let g = try c.spec.geometry(input: c.input)
            let o = Operands(g, seed: UInt64(40 + 10 * i))
            for epilogue in epilogues {
                let want = try expected(g, o, epilogue)
                assertWithin(try fused(ReferenceBackend(), g, o, epilogue), want, atol: 1e-5, rtol: 1e-5, "reference case \(i) \(String(describing: epilogue))")
            }
        }
    }

    func testEveryCPUEngineMatchesReferenceAndUnfused() throws {
        var ran: Set<String> = []
        for (i, c) in cases.enumerated() {
            let g = try c.spec.geometry(input: c.input)
            let o = Operands(g, seed: UInt64(100 + 10 * i))
            for algorithm in [CPUConvolutionAlgorithm.im2col] + c.engines {
                if algorithm == .onednn, !OneDNN.isAvailable { continue }
                for schedule in [CPUConvolutionSchedule.gemmThreads, .imageThreads] {
                    for threads in [1, 3] {
                        let be = CPUBackend(threads: threads)
                        be.convolutionAlgorithmOverride = algorithm
                        be.convolutionScheduleOverride = schedule
                        if c.grouped {
                            XCTAssertTrue(be.usesGroupedDirect(g), "case \(i) runs the grouped loops")
                        } else {
                            XCTAssertTrue(be.canRun(algorithm, g, .forward), "case \(i): \(algorithm) runs it")
                        }
                        ran.insert(c.grouped ? "grouped" : algorithm.rawValue)
                        for epilogue in epilogues {
                            let what = "case \(i) \(algorithm) \(schedule) \(threads) threads \(String(describing: epilogue))"
                            let got = try fused(be, g, o, epilogue)
                            assertWithin(got, try expected(g, o, epilogue), atol: 1e-4, rtol: 1e-4, what)
                            assertWithin(got, try unfused(be, g, o, epilogue).map(Double.init), atol: 1e-5, rtol: 1e-5, "\(what) against unfused")
                        }
                    }
                }
            }
        }
        var engines: Set<String> = ["im2col", "grouped", "winograd", "winograd-4x4", "direct"]
        if OneDNN.isAvailable { engines.insert("onednn") }
        XCTAssertEqual(ran, engines)
    }

    /// A residual needs the whole output: the slice form refuses one by name.
    func testCPURefusesAResidualIntoAChannelSlice() throws {
        let g = try cases[0].spec.geometry(input: cases[0].input)
        let be = CPUBackend(threads: 1)
        let y = try be.makeBuffer(count: g.batch * (g.outChannels + 2) * g.outHeight * g.outWidth)
        XCTAssertThrowsError(try be.convolutionForward(g, input: try be.makeBuffer(count: g.inputShape.count),
                                                       weights: try be.makeBuffer(count: g.weightShape.count),
                                                       bias: try be.makeBuffer(count: g.outChannels), output: y, channelOffset: 2,
                                                       outputChannels: g.outChannels + 2, residual: try be.makeBuffer(count: g.outputShape.count),
                                                       epilogue: .relu)) { error in
            XCTAssertTrue("\(error)".contains("residual"), "\(error)")
        }
    }

    func testOpenCLMatchesReferenceAndUnfused() throws {
        let backend = OpenCLBackend(context: try OpenCLTestSupport.context())
        for (i, c) in cases.enumerated() {
            let g = try c.spec.geometry(input: c.input)
            XCTAssertEqual(backend.usesGroupedDirect(g), c.grouped, "case \(i): grouped kernels")
            let o = Operands(g, seed: UInt64(300 + 10 * i))
            for epilogue in epilogues {
                let what = "OpenCL case \(i) \(String(describing: epilogue))"
                let got = try fused(backend, g, o, epilogue)
                assertWithin(got, try expected(g, o, epilogue), atol: 1e-4, rtol: 1e-4, what)
                assertWithin(got, try unfused(backend, g, o, epilogue).map(Double.init), atol: 1e-5, rtol: 1e-5, "\(what) against unfused")
            }
        }
    }
}
