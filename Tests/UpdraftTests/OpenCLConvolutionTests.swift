import XCTest
@testable import Updraft

/// Convolution and inner product on OpenCL (implicit GEMM, Kernels/convolution.cl and gemm.cl) against
/// plain Double loops: forward (with and without bias, fused ReLU), backward data, backward weights
/// and bias, on awkward sizes, strides, dilations, asymmetric and `same` padding, groups, batch 1-3.
final class OpenCLConvolutionTests: XCTestCase {
    /// (spec, input shape) pairs covering the cases the kernels distinguish.
    static let cases: [(String, ConvolutionSpec, Shape)] = [
        ("3x3 pad 1", ConvolutionSpec(inputChannels: 5, outputChannels: 7, kernelH: 3, kernelW: 3,
                                      padding: .valid(top: 1, bottom: 1, left: 1, right: 1)), [3, 5, 9, 8]),
        ("3x3 stride 2", ConvolutionSpec(inputChannels: 3, outputChannels: 8, kernelH: 3, kernelW: 3,
                                         strideH: 2, strideW: 2), [2, 3, 15, 13]),
        ("pointwise", ConvolutionSpec(inputChannels: 33, outputChannels: 31, kernelH: 1, kernelW: 1), [3, 33, 7, 5]),
        ("grouped dilated asymmetric", ConvolutionSpec(inputChannels: 4, outputChannels: 6, kernelH: 2, kernelW: 3,
                                                       strideH: 2, strideW: 1, dilationH: 2, dilationW: 2, groups: 2,
                                                       padding: .valid(top: 1, bottom: 2, left: 0, right: 1)), [1, 4, 11, 10]),
        ("same top-left heavy", ConvolutionSpec(inputChannels: 3, outputChannels: 5, kernelH: 4, kernelW: 4,
                                                strideH: 3, strideW: 3, padding: .same(.topLeftHeavy)), [2, 3, 10, 7]),
        ("1x1 stride 2 no bias", ConvolutionSpec(inputChannels: 6, outputChannels: 4, kernelH: 1, kernelW: 1,
                                                 strideH: 2, strideW: 2, hasBias: false), [3, 6, 7, 7]),
        ("several tiles", ConvolutionSpec(inputChannels: 16, outputChannels: 65, kernelH: 3, kernelW: 3,
                                          padding: .same(.bottomRightHeavy)), [2, 16, 12, 11]),
        ("grouped pointwise", ConvolutionSpec(inputChannels: 6, outputChannels: 9, kernelH: 1, kernelW: 1, groups: 3), [2, 6, 5, 3]),
        ("tile multiples", ConvolutionSpec(inputChannels: 16, outputChannels: 32, kernelH: 1, kernelW: 1), [2, 16, 4, 4]),
    ]

    func testConvolutionMatchesLoops() throws {
        let cl = try GemmTestSupport.backend()
        for (i, (label, spec, shape)) in Self.cases.enumerated() {
            try checkConvolution(spec, shape, on: cl, seed: UInt64(i), label: label)
        }
    }

    /// The NVIDIA table's big tiles (PoCL runs them too): 256 work-items, 8x8 outputs each.
    func testConvolutionWithLargeTiles() throws {
        let cl = try GemmTestSupport.backend([.large])
        try checkConvolution(Self.cases[6].1, Self.cases[6].2, on: cl, seed: 31, label: "large tiles")
    }

    func testConvolutionWithSplitReductions() throws {
        let cl = try GemmTestSupport.backend()
        cl.gemmWorkspace.forcedSplits = 3
        try checkConvolution(Self.cases[0].1, Self.cases[0].2, on: cl, seed: 11, label: "split 3x3")
        try checkConvolution(Self.cases[2].1, Self.cases[2].2, on: cl, seed: 12, label: "split pointwise")
    }

    /// The same backward pass twice gives the same bits (no atomics, fixed summation order).
    func testBackwardWeightsIsDeterministic() throws {
        let cl = try GemmTestSupport.backend()
        let spec = ConvolutionSpec(inputChannels: 8, outputChannels: 12, kernelH: 3, kernelW: 3,
                                   padding: .valid(top: 1, bottom: 1, left: 1, right: 1))
        let g = try spec.geometry(input: [3, 8, 13, 9])
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

    func testInnerProductMatchesLoops() throws {
        let cl = try GemmTestSupport.backend()
        for (i, (batch, cin, cout, bias)) in [(1, 65, 7, true), (3, 33, 129, true), (3, 1, 1, false), (2, 31, 32, false)].enumerated() {
            try checkInnerProduct(InnerProductGeometry(batch: batch, inputChannels: cin, outputChannels: cout, hasBias: bias),
                                  on: cl, seed: UInt64(i))
        }
        cl.gemmWorkspace.forcedSplits = 2
        try checkInnerProduct(InnerProductGeometry(batch: 40, inputChannels: 9, outputChannels: 10, hasBias: true), on: cl, seed: 9)
    }

    /// The builds the product uses (optimised, on the shared context), for the forward kernels: PoCL
    /// takes seconds per optimised build, so the backward ones are left to the unoptimised builds above
    /// and to `updraft-bench kernels`, which checks every kernel it times.
    func testOptimizedBuildsAgree() throws {
        let cl = OpenCLBackend(context: try OpenCLTestSupport.context())
        let g = try Self.cases[3].1.geometry(input: Self.cases[3].2)
        var rng = SplitMix64(seed: 21)
        let x = random(g.inputShape.count, &rng), w = random(g.weightShape.count, &rng), b = random(g.outChannels, &rng)
        let y = try cl.makeBuffer(count: g.outputShape.count)
        try cl.convolutionForward(g, input: try cl.makeBuffer(x), weights: try cl.makeBuffer(w), bias: try cl.makeBuffer(b),
                                  output: y, fusedReLU: true)
        assertClose(try cl.download(y), ConvLoops.forward(g, x, w, b, relu: true), tolerance: 1e-5, "optimised convolution")

        let ip = InnerProductGeometry(batch: 3, inputChannels: 33, outputChannels: 7, hasBias: true)
        let conv = try ConvolutionSpec(inputChannels: 33, outputChannels: 7, kernelH: 1, kernelW: 1).geometry(input: [3, 33, 1, 1])
        let xi = random(99, &rng), wi = random(231, &rng), bi = random(7, &rng)
        let yi = try cl.makeBuffer(count: 21)
        try cl.innerProductForward(ip, input: try cl.makeBuffer(xi), weights: try cl.makeBuffer(wi), bias: try cl.makeBuffer(bi), output: yi)
        assertClose(try cl.download(yi), ConvLoops.forward(conv, xi, wi, bi, relu: false), tolerance: 1e-5, "optimised inner product")
    }

    func testBadArgumentsAreRejected() throws {
        let cl = try GemmTestSupport.backend()
        let g = try Self.cases[0].1.geometry(input: Self.cases[0].2)
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

    // MARK: Checks

    private func random(_ n: Int, _ rng: inout SplitMix64) -> [Float] { (0..<n).map { _ in rng.nextFloat(in: -1...1) } }

    private func checkConvolution(_ spec: ConvolutionSpec, _ shape: Shape, on cl: OpenCLBackend, seed: UInt64, label: String,
                                  file: StaticString = #filePath, line: UInt = #line) throws {
        let g = try spec.geometry(input: shape)
        var rng = SplitMix64(seed: seed)
        let x = random(g.inputShape.count, &rng), w = random(g.weightShape.count, &rng)
        let b = random(g.outChannels, &rng), dy = random(g.outputShape.count, &rng)
        let tol = 1e-5 * Double(g.gemmK + g.batch * g.gemmN) + 1e-5
        let (X, W, DY) = (try cl.makeBuffer(x), try cl.makeBuffer(w), try cl.makeBuffer(dy))
        let B = g.hasBias ? try cl.makeBuffer(b) : nil
        let out = try cl.makeBuffer(count: g.outputShape.count)
        for relu in [false, true] {
            try cl.convolutionForward(g, input: X, weights: W, bias: B, output: out, fusedReLU: relu)
            let want = ConvLoops.forward(g, x, w, g.hasBias ? b : nil, relu: relu)
            assertClose(try cl.download(out), want, tolerance: tol, "\(label) forward relu=\(relu)", file: file, line: line)
        }
        let dx = try cl.makeBuffer(count: g.inputShape.count)
        try cl.convolutionBackwardData(g, outputGradient: DY, weights: W, inputGradient: dx)
        assertClose(try cl.download(dx), ConvLoops.backwardData(g, dy, w), tolerance: tol, "\(label) backward data",
                    file: file, line: line)
        let dw = try cl.makeBuffer(count: g.weightShape.count)
        let db = g.hasBias ? try cl.makeBuffer(count: g.outChannels) : nil
        try cl.convolutionBackwardWeights(g, input: X, outputGradient: DY, weightGradient: dw, biasGradient: db)
        let (wantDW, wantDB) = ConvLoops.backwardWeights(g, x, dy)
        assertClose(try cl.download(dw), wantDW, tolerance: tol, "\(label) weight gradient", file: file, line: line)
        if let db { assertClose(try cl.download(db), wantDB, tolerance: tol, "\(label) bias gradient", file: file, line: line) }
    }

    private func checkInnerProduct(_ g: InnerProductGeometry, on cl: OpenCLBackend, seed: UInt64,
                                   file: StaticString = #filePath, line: UInt = #line) throws {
        // An inner product is a 1x1 convolution of 1x1 images: the loops above define it too.
        let conv = try ConvolutionSpec(inputChannels: g.inputChannels, outputChannels: g.outputChannels, kernelH: 1, kernelW: 1,
                                       hasBias: g.hasBias).geometry(input: [g.batch, g.inputChannels, 1, 1])
        var rng = SplitMix64(seed: seed)
        let x = random(g.batch * g.inputChannels, &rng), w = random(g.outputChannels * g.inputChannels, &rng)
        let b = random(g.outputChannels, &rng), dy = random(g.batch * g.outputChannels, &rng)
        let tol = 1e-5 * Double(g.inputChannels + g.outputChannels + g.batch) + 1e-5
        let (X, W, DY) = (try cl.makeBuffer(x), try cl.makeBuffer(w), try cl.makeBuffer(dy))
        let B = g.hasBias ? try cl.makeBuffer(b) : nil
        let y = try cl.makeBuffer(count: g.batch * g.outputChannels)
        try cl.innerProductForward(g, input: X, weights: W, bias: B, output: y)
        assertClose(try cl.download(y), ConvLoops.forward(conv, x, w, g.hasBias ? b : nil, relu: false), tolerance: tol, "\(g) forward",
                    file: file, line: line)
        let dx = try cl.makeBuffer(count: g.batch * g.inputChannels)
        try cl.innerProductBackwardData(g, outputGradient: DY, weights: W, inputGradient: dx)
        assertClose(try cl.download(dx), ConvLoops.backwardData(conv, dy, w), tolerance: tol, "\(g) backward data",
                    file: file, line: line)
        let dw = try cl.makeBuffer(count: g.outputChannels * g.inputChannels)
        let db = g.hasBias ? try cl.makeBuffer(count: g.outputChannels) : nil
        try cl.innerProductBackwardWeights(g, input: X, outputGradient: DY, weightGradient: dw, biasGradient: db)
        let (wantDW, wantDB) = ConvLoops.backwardWeights(conv, x, dy)
        assertClose(try cl.download(dw), wantDW, tolerance: tol, "\(g) weight gradient", file: file, line: line)
        if let db { assertClose(try cl.download(db), wantDB, tolerance: tol, "\(g) bias gradient", file: file, line: line) }
    }
}

/// Convolution as the plain definition: one Double loop nest walked in all three directions.
enum ConvLoops {
    /// Calls body(xIndex, wIndex, yIndex, outputChannel, image) for every kernel tap inside the input.
    static func walk(_ g: ConvGeometry, _ body: (Int, Int, Int, Int, Int) -> Void) {
        let cinG = g.inChannels / g.groups, coutG = g.outChannels / g.groups
        for n in 0..<g.batch {
            for co in 0..<g.outChannels {
                let group = co / coutG
                for oh in 0..<g.outHeight {
                    for ow in 0..<g.outWidth {
                        let yi = ((n * g.outChannels + co) * g.outHeight + oh) * g.outWidth + ow
                        for ci in 0..<cinG {
                            for kh in 0..<g.kernelH {
                                let ih = oh * g.strideH - g.padTop + kh * g.dilationH
                                if ih < 0 || ih >= g.inHeight { continue }
                                for kw in 0..<g.kernelW {
                                    let iw = ow * g.strideW - g.padLeft + kw * g.dilationW
                                    if iw < 0 || iw >= g.inWidth { continue }
                                    let xi = ((n * g.inChannels + group * cinG + ci) * g.inHeight + ih) * g.inWidth + iw
                                    let wi = ((co * cinG + ci) * g.kernelH + kh) * g.kernelW + kw
                                    body(xi, wi, yi, co, n)
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    static func forward(_ g: ConvGeometry, _ x: [Float], _ w: [Float], _ b: [Float]?, relu: Bool) -> [Double] {
        var y = [Double](repeating: 0, count: g.outputShape.count)
        walk(g) { xi, wi, yi, _, _ in y[yi] += Double(x[xi]) * Double(w[wi]) }
        let spatial = g.outHeight * g.outWidth
        for i in 0..<y.count {
            if let b { y[i] += Double(b[(i / spatial) % g.outChannels]) }
            if relu { y[i] = max(0, y[i]) }
        }
        return y
    }

    static func backwardData(_ g: ConvGeometry, _ dy: [Float], _ w: [Float]) -> [Double] {
        var dx = [Double](repeating: 0, count: g.inputShape.count)
        walk(g) { xi, wi, yi, _, _ in dx[xi] += Double(dy[yi]) * Double(w[wi]) }
        return dx
    }

    static func backwardWeights(_ g: ConvGeometry, _ x: [Float], _ dy: [Float]) -> (dw: [Double], db: [Double]) {
        var dw = [Double](repeating: 0, count: g.weightShape.count)
        walk(g) { xi, wi, yi, _, _ in dw[wi] += Double(dy[yi]) * Double(x[xi]) }
        var db = [Double](repeating: 0, count: g.outChannels)
        let spatial = g.outHeight * g.outWidth
        for (i, v) in dy.enumerated() { db[(i / spatial) % g.outChannels] += Double(v) }
        return (dw, db)
    }
}

/// The context these tests run on: the test device, with programs built without optimisation, so that
/// PoCL compiles each of the many kernel variants covered here in a fraction of a second instead of
/// several. `testOptimizedBuildsAgree` runs the default (optimised) builds of each kernel family.
enum GemmTestSupport {
    nonisolated(unsafe) private static var unoptimized: OpenCLContext?

    static func backend(_ tilings: [GemmTiling]? = nil) throws -> OpenCLBackend {
        let shared = try OpenCLTestSupport.context()
        let ctx: OpenCLContext
        if let c = unoptimized { ctx = c } else {
            ctx = try OpenCLContext(device: shared.device)
            ctx.baseBuildOptions += " -cl-opt-disable"
            unoptimized = ctx
        }
        var tuning = OpenCLTuning.forDevice(ctx.device.info)
        if let tilings { tuning.gemmTilings = tilings }
        return OpenCLBackend(context: ctx, tuning: tuning)
    }
}
