import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// Convolution and inner product on OpenCL (implicit GEMM in Kernels/convolution.cl, SGEMM in
/// gemm.cl) against the Double reference through `BackendComparison`: forward (bias, no bias, fused
/// ReLU), backward data, backward weights and bias, on the shared awkward-size lists plus the cases the
/// kernels themselves distinguish (pointwise, grouped pointwise, tile multiples, several tiles, split
/// reductions, the NVIDIA table's big tiles).
final class OpenCLConvolutionTests: XCTestCase {
    static let pointwise = OpCase.convolution([3, 33, 7, 5], outputChannels: 31, kernel: (1, 1))   // batch folded into N
    static let groupedPointwise = OpCase.convolution([2, 6, 5, 3], outputChannels: 9, kernel: (1, 1), groups: 3)
    static let severalTiles = OpCase.convolution([2, 16, 12, 11], outputChannels: 65, kernel: (3, 3),
                                                 padding: .same(.bottomRightHeavy), fusedReLU: true)
    static let groupedDilated = OpCase.convolution([1, 4, 11, 10], outputChannels: 6, kernel: (2, 3), stride: (2, 1),
                                                   dilation: (2, 2), groups: 2, padding: .valid(top: 1, bottom: 2, left: 0, right: 1))
    static let wideInnerProduct = OpCase.innerProduct([3, 33], outputChannels: 129)

    /// Cases aimed at the kernels' own branches, beyond the shared lists.
    static let kernelCases: [OpCase] = [
        pointwise, groupedPointwise, severalTiles, groupedDilated, wideInnerProduct,
        .convolution([2, 16, 4, 4], outputChannels: 32, kernel: (1, 1)),                       // tile multiples: no bounds checks
        .convolution([2, 16, 4, 4], outputChannels: 32, kernel: (3, 3),
                     padding: .valid(top: 1, bottom: 1, left: 1, right: 1), fusedReLU: true),  // the same through the k table
        .convolution([3, 6, 7, 7], outputChannels: 4, kernel: (1, 1), stride: (2, 2), bias: false), // 1x1 but strided
        .convolution([2, 3, 10, 7], outputChannels: 5, kernel: (4, 4), stride: (3, 3), padding: .same(.topLeftHeavy)),
        .innerProduct([1, 65], outputChannels: 7),
        .innerProduct([2, 31], outputChannels: 32, bias: false),
    ]

    private func assertMatchesReference(_ cases: [OpCase], on cl: OpenCLBackend, only filter: String? = nil,
                                        file: StaticString = #filePath, line: UInt = #line) {
        let rows = BackendComparison(backend: cl).run(cases, only: filter)
        XCTAssertFalse(rows.isEmpty, "no cases ran", file: file, line: line)
        let failures = rows.filter { !$0.ok }
        XCTAssertTrue(failures.isEmpty, "\n" + ComparisonRow.table(failures), file: file, line: line)
    }

    func testFullConvolutionCases() throws {
        assertMatchesReference(.full, on: try GemmTestSupport.backend(), only: "convolution")
    }

    func testFullInnerProductCases() throws {
        assertMatchesReference(.full, on: try GemmTestSupport.backend(), only: "innerProduct")
    }

    /// The small gradient-check shapes: stride and dilation together, both `same` modes, groups of 3.
    func testGradientCheckShapes() throws {
        let cases = [OpCase].gradientCheck.filter { $0.op == "convolution" || $0.op == "innerProduct" }
        assertMatchesReference(cases, on: try GemmTestSupport.backend())
    }

    func testKernelSpecificCases() throws {
        assertMatchesReference(Self.kernelCases, on: try GemmTestSupport.backend())
    }

    /// Weight gradients split along N*Ho*Wo into slices, summed afterwards (what a GPU does when few
    /// output tiles would otherwise run).
    func testSplitReductions() throws {
        let cl = try GemmTestSupport.backend()
        cl.gemmWorkspace.forcedSplits = 3
        assertMatchesReference([Self.pointwise, Self.severalTiles, Self.groupedDilated, Self.wideInnerProduct], on: cl)
        cl.gemmWorkspace.forcedSplits = 2
        assertMatchesReference([.innerProduct([40, 9], outputChannels: 10)], on: cl)
    }

    /// Index decompositions past 2^20 (batch x plane) divide exactly instead of through reciprocals:
    /// built here with that limit lowered to 7, so nearly every decomposition takes that path.
    func testExactDivisionPath() throws {
        let cl = try GemmTestSupport.backend(extraBuildOptions: "-DDIVMOD_FAST_LIMIT=7")
        assertMatchesReference([Self.severalTiles, Self.groupedDilated, .convolution([3, 31, 15, 17], outputChannels: 33, kernel: (3, 3),
                                stride: (2, 2), padding: .valid(top: 1, bottom: 0, left: 1, right: 0))], on: cl)
    }

    /// The NVIDIA table's big and thin tiles (256 work-items; PoCL runs them too).
    func testGPUTilings() throws {
        assertMatchesReference([Self.severalTiles, Self.groupedDilated], on: try GemmTestSupport.backend([.large]))
        assertMatchesReference([Self.groupedPointwise], on: try GemmTestSupport.backend([.wide16]))
    }

    /// The same backward pass twice gives the same bits (no atomics, fixed summation order).
    func testBackwardWeightsIsDeterministic() throws {
        let cl = try GemmTestSupport.backend()
        let g = try ConvolutionSpec(inputChannels: 8, outputChannels: 12, kernelH: 3, kernelW: 3,
                                    padding: .valid(top: 1, bottom: 1, left: 1, right: 1)).geometry(input: [3, 8, 13, 9])
        var rng = SplitMix64(seed: 5)
        let x = try cl.makeBuffer(random(g.inputShape.count, &rng)), dy = try cl.makeBuffer(random(g.outputShape.count, &rng))
        let dw = try cl.makeBuffer(count: g.weightShape.count), db = try cl.makeBuffer(count: g.outChannels)
        var results: [[Float]] = []
        for _ in 0..<2 {
            try cl.convolutionBackwardWeights(g, input: x, outputGradient: dy, weightGradient: dw, biasGradient: db)
            results.append(try cl.download(dw) + cl.download(db))
        }
        XCTAssertEqual(results[0], results[1])
    }

    /// The builds the product uses (optimised, on the shared context), for the forward kernels: PoCL
    /// takes seconds per optimised build, so the backward ones are left to the unoptimised builds above
    /// and to `updraft-bench kernels`, which checks every kernel it times.
    func testOptimizedBuildsAgree() throws {
        let cl = OpenCLBackend(context: try OpenCLTestSupport.context())
        var rng = SplitMix64(seed: 21)
        let g = try ConvolutionSpec(inputChannels: 4, outputChannels: 6, kernelH: 2, kernelW: 3, strideH: 2, dilationW: 2,
                                    groups: 2, padding: .valid(top: 1, bottom: 2, left: 0, right: 1)).geometry(input: [2, 4, 11, 10])
        let x = random(g.inputShape.count, &rng), w = random(g.weightShape.count, &rng), b = random(g.outChannels, &rng)
        let y = try cl.makeBuffer(count: g.outputShape.count)
        try cl.convolutionForward(g, input: try cl.makeBuffer(x), weights: try cl.makeBuffer(w), bias: try cl.makeBuffer(b),
                                  output: y, fusedReLU: true)
        let want = try Reference.convolutionForward(g, input: Reference.double(x), weights: Reference.double(w),
                                                    bias: Reference.double(b), fusedReLU: true)
        XCTAssertTrue(ComparisonError(got: try cl.download(y).map(Double.init), reference: want, tolerance: .float32).ok)

        let ip = InnerProductGeometry(batch: 3, inputChannels: 33, outputChannels: 7, hasBias: true)
        let xi = random(99, &rng), wi = random(231, &rng), bi = random(7, &rng)
        let yi = try cl.makeBuffer(count: 21)
        try cl.innerProductForward(ip, input: try cl.makeBuffer(xi), weights: try cl.makeBuffer(wi), bias: try cl.makeBuffer(bi), output: yi)
        let wantIP = try Reference.innerProductForward(ip, input: Reference.double(xi), weights: Reference.double(wi),
                                                       bias: Reference.double(bi))
        XCTAssertTrue(ComparisonError(got: try cl.download(yi).map(Double.init), reference: wantIP, tolerance: .float32).ok)
    }

    func testBadArgumentsAreRejected() throws {
        let cl = try GemmTestSupport.backend()
        let g = try ConvolutionSpec(inputChannels: 5, outputChannels: 7, kernelH: 3, kernelW: 3).geometry(input: [3, 5, 9, 8])
        let x = try cl.makeBuffer(count: g.inputShape.count), w = try cl.makeBuffer(count: g.weightShape.count)
        let y = try cl.makeBuffer(count: g.outputShape.count)
        XCTAssertThrowsError(try cl.convolutionForward(g, input: x, weights: w, bias: nil, output: y, fusedReLU: false)) {
            XCTAssertTrue("\($0)".contains("no bias buffer"), "\($0)")
        }
        let b = try cl.makeBuffer(count: g.outChannels)
        XCTAssertThrowsError(try cl.convolutionForward(g, input: w, weights: w, bias: b, output: y, fusedReLU: false)) {
            XCTAssertTrue("\($0)".contains("input holds"), "\($0)")
        }
        var bad = g
        bad.groups = 2
        XCTAssertThrowsError(try cl.convolutionBackwardData(bad, outputGradient: y, weights: w, inputGradient: x))
        let ip = InnerProductGeometry(batch: 2, inputChannels: 4, outputChannels: 3, hasBias: false)
        XCTAssertThrowsError(try cl.innerProductForward(ip, input: try cl.makeBuffer(count: 8), weights: try cl.makeBuffer(count: 11),
                                                        bias: nil, output: try cl.makeBuffer(count: 6)))
    }

    private func random(_ n: Int, _ rng: inout SplitMix64) -> [Float] { (0..<n).map { _ in rng.nextFloat(in: -1...1) } }
}

/// The context these tests run on: the test device, with programs built without optimisation, so that
/// PoCL compiles each of the many kernel variants covered here in a fraction of a second instead of
/// several. `testOptimizedBuildsAgree` runs the default (optimised) builds.
enum GemmTestSupport {
    nonisolated(unsafe) private static var contexts: [String: OpenCLContext] = [:]

    /// A backend on the unoptimised context (plus `extraBuildOptions`, a context of its own), with
    /// the device's tuning or only `tilings`.
    static func backend(_ tilings: [GemmTiling]? = nil, extraBuildOptions: String = "") throws -> OpenCLBackend {
        let shared = try OpenCLTestSupport.context()
        let ctx: OpenCLContext
        if let c = contexts[extraBuildOptions] { ctx = c } else {
            ctx = try OpenCLContext(device: shared.device)
            ctx.baseBuildOptions += " -cl-opt-disable " + extraBuildOptions
            contexts[extraBuildOptions] = ctx
        }
        var tuning = OpenCLTuning.forDevice(ctx.device.info)
        if let tilings { tuning.gemmTilings = tilings }
        return OpenCLBackend(context: ctx, tuning: tuning)
    }
}
