import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// The activation table: codes written once and reaching the kernels, every function fused into the
/// convolution and inner-product epilogues exactly as it runs on its own, backward from y alone where
/// the table says so. (Each function against the Double reference and finite differences runs in the
/// shared case lists: BackendComparison, CPUBackendTests, OpenCLOpsTests, GradientCheckTests.)
final class ActivationTableTests: XCTestCase {
    /// One function of every kind, constants chosen to exercise both sides of each formula.
    static let oneOfEach: [Activation] = [
        .linear(alpha: 0.5, beta: -0.25), .relu, .leakyReLU(alpha: 0.1), .thresholdedReLU(alpha: 0.3),
        .prelu(alpha: [0.1, -0.2, 0.3, 0.4, 0.05]), .tanh, .scaledTanh(alpha: 1.7, beta: 0.6), .sigmoid,
        .sigmoidHard(alpha: 0.2, beta: 0.5), .elu(alpha: 0.8), .softsign, .softplus,
        .parametricSoftplus(alpha: [0.5, 2, 1, 0.25, 3], beta: [1.5]), .clip(min: 0, max: 6),
    ] + [OpCase].unaryFunctions.map { .unary($0) }

    func testEveryKindHasOneCodeADefineAndAKernelCase() throws {
        XCTAssertEqual(Set(Self.oneOfEach.map(\.kind)), Set(ActivationKind.allCases))
        let codes = ActivationKind.allCases.map(\.rawValue)
        XCTAssertEqual(Set(codes).count, codes.count, "codes must be distinct")
        XCTAssertFalse(codes.contains(ActivationKind.noneCode))
        let defines = ActivationKind.openCLDefines
        XCTAssertEqual(defines.count, ActivationKind.allCases.count + 1)
        XCTAssertEqual(defines["ACT_NONE"], "0")
        XCTAssertEqual(defines["ACT_PARAMETRICSOFTPLUS"], "\(ActivationKind.parametricSoftplus.rawValue)")
        // The kernels name every kind in both switches and write no code of their own.
        let header = try XCTUnwrap(EmbeddedKernels.sources["activation.h"])
        for k in ActivationKind.allCases {
            XCTAssertEqual(header.components(separatedBy: "case \(k.defineName):").count - 1, 2, "\(k.defineName) in activation.h")
        }
        XCTAssertFalse(header.contains("#define ACT_RELU"), "codes come from the host's -D defines")
    }

    func testConstantsAreCheckedAgainstTheChannels() {
        XCTAssertThrowsError(try Activation.prelu(alpha: [1, 2]).validate(channels: 3)) { error in
            XCTAssertTrue("\(error)".contains("PReLU alpha has 2 values but the tensor has 3 channels"), "\(error)")
        }
        XCTAssertNoThrow(try Activation.prelu(alpha: [1]).validate(channels: 3))
        XCTAssertThrowsError(try Activation.clip(min: 0, max: .nan).validate(channels: 1))
        XCTAssertEqual(try Activation.parametricSoftplus(alpha: [2], beta: [1, 3]).channelConstants(channels: 2), [2, 2, 1, 3])
        XCTAssertThrowsError(try CPUBackend().activationForward(.prelu(alpha: [1, 2]), ActivationGeometry(batch: 1, channels: 3, spatial: 2),
                                                                input: try CPUBackend().makeBuffer(count: 6),
                                                                output: try CPUBackend().makeBuffer(count: 6)))
    }

    /// conv + f fused equals conv then f; inner product likewise. Exact on the CPU (the same float
    /// function on the same floats), to rounding on OpenCL.
    func assertFusedEqualsUnfused(_ backend: Backend, exact: Bool) throws {
        var rng = SplitMix64(seed: 5)
        func values(_ n: Int) -> [Float] { (0..<n).map { _ in rng.nextFloat(in: -2...2) } }
        let conv = try ConvolutionSpec(inputChannels: 3, outputChannels: 5, kernelH: 3, kernelW: 3,
                                       padding: .valid(top: 1, bottom: 1, left: 1, right: 1)).geometry(input: [2, 3, 5, 7])
        let ip = try InnerProductSpec(inputChannels: 7, outputChannels: 5, hasBias: true).geometry(input: [3, 7, 1, 1])
        let cx = try backend.makeBuffer(values(conv.inputShape.count)), cw = try backend.makeBuffer(values(conv.weightShape.count))
        let cb = try backend.makeBuffer(values(5))
        let ix = try backend.makeBuffer(values(21)), iw = try backend.makeBuffer(values(35)), ib = try backend.makeBuffer(values(5))
        for a in Self.oneOfEach {
            // Unary functions with a restricted domain see inputs inside it.
            let shift: Float = { if case .unary = a { return 40 } else { return 0 } }()
            let scaled = ActivationTableTests.shifted(a, by: shift)
            let fused = try backend.makeBuffer(count: conv.outputShape.count), plain = try backend.makeBuffer(count: conv.outputShape.count)
            try backend.convolutionForward(conv, input: cx, weights: cw, bias: cb, output: fused, epilogue: scaled)
            try backend.convolutionForward(conv, input: cx, weights: cw, bias: cb, output: plain, epilogue: nil)
            try backend.activationForward(scaled, ActivationGeometry(shape: conv.outputShape), input: plain, output: plain)
            assertSame(try backend.download(fused), try backend.download(plain), exact: exact, "\(backend.name) conv +\(scaled)")

            let ipFused = try backend.makeBuffer(count: 15), ipPlain = try backend.makeBuffer(count: 15)
            try backend.innerProductForward(ip, input: ix, weights: iw, bias: ib, output: ipFused, epilogue: scaled)
            try backend.innerProductForward(ip, input: ix, weights: iw, bias: ib, output: ipPlain, epilogue: nil)
            try backend.activationForward(scaled, ActivationGeometry(batch: 3, channels: 5, spatial: 1), input: ipPlain, output: ipPlain)
            assertSame(try backend.download(ipFused), try backend.download(ipPlain), exact: exact, "\(backend.name) inner product +\(scaled)")
        }
    }

    /// A unary function with `shift` added to its shift (keeps sqrt, log, … in their domain); others unchanged.
    static func shifted(_ a: Activation, by shift: Float) -> Activation {
        guard case var .unary(f) = a else { return a }
        f.shift += shift * abs(f.scale)
        return .unary(f)
    }

    func assertSame(_ a: [Float], _ b: [Float], exact: Bool, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(a.count, b.count, what, file: file, line: line)
        for (i, (x, y)) in zip(a, b).enumerated() {
            let ok = (x.isNaN && y.isNaN) || (exact ? x.bitPattern == y.bitPattern : abs(x - y) <= 1e-5 * max(1, abs(y)))
            if !ok || x.isNaN { XCTFail("\(what) [\(i)]: fused \(x), unfused \(y)", file: file, line: line); return }
        }
    }

    /// Backward of the functions that read y gives the same dx when x holds garbage (a fused epilogue
    /// keeps no pre-activation); those that read x are the ones the fusion pass refuses to fuse.
    func assertBackwardFromOutput(_ backend: Backend) throws {
        var rng = SplitMix64(seed: 8)
        let g = ActivationGeometry(batch: 2, channels: 5, spatial: 7)
        for a in Self.oneOfEach {
            let shift: Float = { if case .unary = a { return 3 } else { return 0 } }()
            let f = Self.shifted(a, by: shift)
            let xs = (0..<g.count).map { _ in rng.nextFloat(in: -2...2) }, dys = (0..<g.count).map { _ in rng.nextFloat(in: -1...1) }
            let x = try backend.makeBuffer(xs), y = try backend.makeBuffer(count: g.count), dy = try backend.makeBuffer(dys)
            try backend.activationForward(f, g, input: x, output: y)
            let dx = try backend.makeBuffer(count: g.count), dxFromY = try backend.makeBuffer(count: g.count)
            try backend.activationBackward(f, g, input: x, output: y, outputGradient: dy, inputGradient: dx)
            let expected = try Reference.activationBackward(f, g, input: xs.map(Double.init), output: try backend.download(y).map(Double.init),
                                                            outputGradient: dys.map(Double.init))
            let got = try backend.download(dx)
            for i in 0..<g.count where abs(Double(got[i]) - expected[i]) > 1e-4 * max(1, abs(expected[i])) {
                XCTFail("\(backend.name) \(f) dx[\(i)] = \(got[i]), reference \(expected[i])"); break
            }
            guard f.backwardReadsOutput else { continue }
            let garbage = try backend.makeBuffer([Float](repeating: .nan, count: g.count))
            try backend.activationBackward(f, g, input: garbage, output: y, outputGradient: dy, inputGradient: dxFromY)
            XCTAssertEqual(try backend.download(dxFromY), got, "\(backend.name) \(f) reads only y")
        }
        // Sign-changing slopes read x: ReLU-like kinds with negative constants.
        XCTAssertFalse(Activation.prelu(alpha: [0.1, -0.2]).backwardReadsOutput)
        XCTAssertFalse(Activation.leakyReLU(alpha: -1).backwardReadsOutput)
        XCTAssertTrue(Activation.clip(min: 0, max: 6).backwardReadsOutput)
        XCTAssertFalse(Activation.unary(UnaryFunction(.abs)).backwardReadsOutput)
    }

    func testCPUFusedEqualsUnfusedAndBackwardReadsOnlyY() throws {
        try assertFusedEqualsUnfused(CPUBackend(), exact: true)
        try assertBackwardFromOutput(CPUBackend())
    }

    func testOpenCLFusedEqualsUnfusedAndBackwardReadsOnlyY() throws {
        let cl = OpenCLBackend(context: try OpenCLTestSupport.context())
        try assertFusedEqualsUnfused(cl, exact: false)
        try assertBackwardFromOutput(cl)
    }

    /// The CLBlast engine cannot fuse: its epilogue pass applies the function after the GEMM.
    func testCLBlastAppliesTheActivationAfterTheGemm() throws {
        var tuning = OpenCLTuning.forDevice(try OpenCLTestSupport.context().device.info)
        tuning.forced = .clblast
        let cl = OpenCLBackend(context: try OpenCLTestSupport.context(), tuning: tuning)
        try assertFusedEqualsUnfused(cl, exact: false)
    }
}
