import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftPlacement

/// The two GEMM engines (in-house tiled kernels, CLBlast) and the tuning that picks between them:
/// every variant against the Double reference, and a tuned choice loaded from the calibration cache
/// changing which kernel runs.
final class OpenCLEnginesTests: XCTestCase {
    private func backend(forced: KernelVariant?) throws -> OpenCLBackend {
        let ctx = try OpenCLTestSupport.context()
        var t = OpenCLTuning.forDevice(ctx.device.info)
        t.forced = forced
        return OpenCLBackend(context: ctx, tuning: t)
    }

    /// The GEMM-shaped cases of the shared awkward-size list: pointwise convolutions (CLBlast's
    /// batched GEMM with a bias epilogue), a 3x3 one (in-house only) and every inner product.
    private var cases: [OpCase] {
        [OpCase].full.filter { c in
            if let conv = c.subject(as: ConvolutionCase.self) {
                let (spec, input) = (conv.spec, conv.input)
                return (spec.kernelH == 1 && spec.kernelW == 1) || (spec.kernelH == 3 && input.c == 7 && spec.outputChannels == 7)
            }
            return c.subject is InnerProductCase
        } + [.convolution([2, 9, 5, 3], outputChannels: 5, kernel: (1, 1), bias: false, fusedReLU: true),
             .convolution([3, 6, 4, 4], outputChannels: 4, kernel: (1, 1), fusedReLU: true)]
    }

    private func assertAgrees(_ cl: OpenCLBackend, cases: [OpCase]? = nil, file: StaticString = #filePath, line: UInt = #line) {
        let rows = BackendComparison(backend: cl).run(cases ?? self.cases)
        let failures = rows.filter { !$0.ok }
        XCTAssertFalse(rows.isEmpty, file: file, line: line)
        XCTAssertTrue(failures.isEmpty, "\(cl.tuning.forced.map { "\($0)" } ?? "table")\n" + ComparisonRow.table(failures),
                      file: file, line: line)
    }

    func testCLBlastAgreesWithTheReferenceAndReallyRuns() throws {
        let cl = try backend(forced: .clblast)
        assertAgrees(cl)
        XCTAssertEqual(cl.gemmWorkspace.clblastRefusals, [:])
        // The pointwise forward and the inner product really went to CLBlast (plus the epilogue pass).
        let g = try ConvolutionSpec(inputChannels: 9, outputChannels: 5, kernelH: 1, kernelW: 1).geometry(input: [2, 9, 5, 3])
        let records = try cl.recordLaunches {
            try cl.convolutionForward(g, input: try cl.makeBuffer(count: 270), weights: try cl.makeBuffer(count: 45),
                                      bias: try cl.makeBuffer(count: 5), output: try cl.makeBuffer(count: 150), fusedReLU: true)
        }
        XCTAssertEqual(records.map(\.kernel), ["clblast_sgemm", "gemm_epilogue"])
    }

    /// Convolution weight gradients on CLBlast against the reference on awkward sizes, both ways
    /// (OpenCLBackend+CLBlastWeights.swift), the scratch limit choosing: batched GEMMs into slabs added
    /// by sum_slabs, in one run or several (the middle one adding into the running total in place),
    /// and one GEMM per image adding into dw; im2col first unless pointwise. Grouped ones stay in-house.
    func testCLBlastWeightGradientsAgreeAndReallyRun() throws {
        let cl = try backend(forced: .clblast)
        let pointwise = ConvolutionSpec(inputChannels: 9, outputChannels: 5, kernelH: 1, kernelW: 1)
        let strided = ConvolutionSpec(inputChannels: 6, outputChannels: 7, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                                      padding: .valid(top: 1, bottom: 0, left: 1, right: 0), hasBias: false)
        let dilated = ConvolutionSpec(inputChannels: 4, outputChannels: 11, kernelH: 3, kernelW: 3, dilationH: 2, dilationW: 2,
                                      padding: .valid(top: 2, bottom: 1, left: 0, right: 2))
        let (gemm, im2col, sum) = ("clblast_sgemm", "conv_im2col", "sum_slabs")
        // Scratch floats: pointwise 45 per image's product; strided 378 + 864 of im2col per image (runs
        // of 2 within 3000); dilated 396 + 2304 (not even two images within 3000: one GEMM per image).
        let cases: [(ConvolutionSpec, Shape, Int, [String])] = [
            (pointwise, [3, 9, 5, 7], 2000, [gemm, sum]),
            (pointwise, [3, 9, 5, 7], 100, [gemm, gemm, gemm]),
            (strided, [5, 6, 9, 8], 3000, [im2col, gemm, sum, im2col, gemm, sum, im2col, gemm, sum]),
            (dilated, [2, 4, 9, 10], 3000, [im2col, gemm, im2col, gemm]),
            (ConvolutionSpec(inputChannels: 8, outputChannels: 6, kernelH: 3, kernelW: 3, groups: 2), [2, 8, 7, 6], 1 << 20, []),
        ]
        for (spec, input, limit, expected) in cases {
            cl.gemmWorkspace.scratchLimit = limit
            let g = try spec.geometry(input: input)
            XCTAssertEqual(KernelShape(g, .convBackwardWeights).clblastCan, spec.groups == 1)
            let p = KernelTuningProblem(name: "dW", op: .convolution(g, .convBackwardWeights, fusedReLU: false))
            var got: [Double] = []
            let launches = try cl.recordLaunches { got = try p.result(on: cl) }
            let e = ComparisonError(got: got, reference: try p.result(on: ReferenceBackend()), tolerance: .float32)
            XCTAssertTrue(e.ok, "\(p.shape) scratch \(limit): max abs error \(e.maxAbs)")
            XCTAssertEqual(launches.map(\.kernel).filter { [gemm, im2col, sum].contains($0) }, expected, "\(p.shape) scratch \(limit)")
        }
        XCTAssertEqual(cl.gemmWorkspace.clblastRefusals, [:])

        // The per-image way as a variant (what the tuner times beside the batched one), scratch to spare.
        let perImage = try backend(forced: .clblastPerImage)
        let g = try strided.geometry(input: [5, 6, 9, 8])
        let p = KernelTuningProblem(name: "dW", op: .convolution(g, .convBackwardWeights, fusedReLU: false))
        var got: [Double] = []
        let launches = try perImage.recordLaunches { got = try p.result(on: perImage) }
        XCTAssertTrue(ComparisonError(got: got, reference: try p.result(on: ReferenceBackend()), tolerance: .float32).ok)
        XCTAssertEqual(launches.map(\.kernel).filter { [gemm, im2col, sum].contains($0) }, [im2col] + Array(repeating: gemm, count: 5))
        let candidates = KernelTuner(context: perImage.context, space: .tiny).candidates(for: p.shape)
        XCTAssertTrue(candidates.contains(.clblast) && candidates.contains(.clblastPerImage), "\(candidates)")
        XCTAssertEqual("\(KernelVariant.clblastPerImage)", "CLBlast, one GEMM per image")
    }

    /// conv_im2col (Kernels/im2col.cl) against its CPU twin, CPUBackend.im2col, on a strided, dilated,
    /// unevenly padded geometry, starting at the second image of the batch.
    func testIm2colMatchesTheCPU() throws {
        let cl = try backend(forced: .clblast)
        let g = try ConvolutionSpec(inputChannels: 3, outputChannels: 2, kernelH: 3, kernelW: 2, strideH: 2, strideW: 1,
                                    dilationH: 1, dilationW: 2, padding: .valid(top: 1, bottom: 2, left: 0, right: 1))
            .geometry(input: [3, 3, 7, 6])
        var x = Tensor(shape: g.inputShape, uniformIn: -1...1, seed: 5).data
        let perImage = g.gemmK * g.outHeight * g.outWidth, imageSize = 3 * 7 * 6
        let col = try cl.context.makeBuffer(count: 2 * perImage + 5)
        try cl.enqueue(try cl.opsKernel("im2col.cl", "conv_im2col"), [.buffer(try cl.cl(try cl.makeBuffer(x))), .int(1), .buffer(col), .int(5)]
                        + [3, 7, 6, g.outHeight, g.outWidth, 3, 2, 2, 1, 1, 2, 1, 0].map { .int($0) },
                       global: [g.outHeight * g.outWidth, g.gemmK, 2], local: nil, defines: [:])
        let got = Array(try cl.download(col).dropFirst(5))
        var want = [Float](repeating: .nan, count: 2 * perImage)
        let cpu = CPUBackend()
        x.withUnsafeMutableBufferPointer { xp in
            want.withUnsafeMutableBufferPointer { wp in
                for i in 0..<2 {
                    cpu.im2col(g, image: xp.baseAddress! + (i + 1) * imageSize, col: wp.baseAddress! + i * perImage, parallel: false)
                }
            }
        }
        XCTAssertEqual(got, want)
    }

    /// CLBlast writing a channel slice of a wider output, with bias and ReLU; the rest untouched.
    func testCLBlastWritesAChannelSlice() throws {
        let cl = try backend(forced: .clblast), reference = ReferenceBackend()
        let g = try ConvolutionSpec(inputChannels: 5, outputChannels: 3, kernelH: 1, kernelW: 1).geometry(input: [3, 5, 7, 6])
        let x = Tensor(shape: g.inputShape, uniformIn: -1...1, seed: 1), w = Tensor(shape: g.weightShape, uniformIn: -1...1, seed: 2)
        let b = Tensor(shape: [3], uniformIn: -1...1, seed: 3), wide = Tensor(shape: [3, 8, 7, 6], uniformIn: 5...6, seed: 4)
        func run(_ be: Backend) throws -> [Float] {
            let y = try be.makeBuffer(wide)
            try be.convolutionForward(g, input: try be.makeBuffer(x), weights: try be.makeBuffer(w), bias: try be.makeBuffer(b),
                                      output: y, channelOffset: 4, outputChannels: 8, fusedReLU: true)
            return try be.download(y)
        }
        let want = try run(reference).map(Double.init), got = try run(cl).map(Double.init)
        XCTAssertTrue(ComparisonError(got: got, reference: want, tolerance: .float32).ok)
        XCTAssertEqual(cl.gemmWorkspace.clblastRefusals, [:])
    }

    /// Plain GEMMs on CLBlast with each transpose, offsets and strides, on both of its routines
    /// (strided batched for NN and TN, the pointwise convolutions' pair; single for NT and TT), and each
    /// epilogue. The in-house kernels run the same operations in OpenCLGemmVariantTests (every tuning
    /// knob) and OpenCLGemmTests (every table tiling); CLBlast kernels compile slowly on a cold PoCL
    /// cache, so each transpose runs on one routine only.
    func testPlainGemmsAgreeOnCLBlast() throws {
        var ops: [GemmOperation] = []
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            var op = GemmOperation(m: 19, n: 23, k: 37, transA: ta, transB: tb, batch: tb ? 1 : 2)
            op.offsetA = 3; op.offsetB = 5; op.offsetC = 2
            op.strideA += 4; op.strideC += 1
            if tb { op.lda += 2; op.ldc += 3 }
            ops.append(op)
        }
        var epilogue = GemmOperation(m: 7, n: 33, k: 5)
        epilogue.bias = .perRow; epilogue.relu = true
        ops.append(epilogue)
        epilogue.bias = .perColumn; epilogue.relu = false; epilogue.alpha = 0.5
        ops.append(epilogue)
        let cl = try backend(forced: .clblast)
        for op in ops {
            let p = KernelTuningProblem(name: "gemm", op: .gemm(op))
            var got: [Double] = []
            let launches = try cl.recordLaunches { got = try p.result(on: cl) }
            let e = ComparisonError(got: got, reference: try p.result(on: ReferenceBackend()), tolerance: .float32)
            XCTAssertTrue(e.ok, "CLBlast on \(p.shape): max abs error \(e.maxAbs)")
            XCTAssertEqual(launches.first?.kernel, "clblast_sgemm", "\(p.shape)")
        }
        XCTAssertEqual(cl.gemmWorkspace.clblastRefusals, [:])
    }

    // MARK: Tuning in the cache

    private func temporaryCache() throws -> CalibrationCache {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-tuning-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: dir) }
        return CalibrationCache(directory: dir)
    }

    private func entry(_ variants: [String: KernelVariant], info: OpenCLDeviceInfo) -> KernelTuningEntry {
        KernelTuningEntry(variants: variants, measurements: [:], device: info.name, driverVersion: info.driverVersion,
                          kernelSourceHash: DeviceCalibration.kernelSourceHash, space: "test")
    }

    /// The GEMM kernel's defines of each launch `body` makes (as `name(_:)` writes a tiling), or "CLBlast".
    private func kernelsRun(_ cl: OpenCLBackend, _ body: () throws -> Void) throws -> [String] {
        try cl.recordLaunches(body).compactMap { r in
            r.kernel == "clblast_sgemm" ? "CLBlast" : r.defines["TM"].map {
                "\($0)x\(r.defines["TN"]!) pad \(r.defines["PAD"] ?? "1") unroll \(r.defines["KUNROLL"] ?? "0") local \(r.defines["STAGE_LOCAL"] ?? "1")"
            }
        }
    }

    private func name(_ t: GemmTiling) -> String {
        "\(t.tileM)x\(t.tileN) pad \(t.padding) unroll \(t.kUnroll) local \(t.stageLocal ? 1 : 0)"
    }

    func testAStoredTuningIsLoadedAndChangesWhichKernelRuns() throws {
        let ctx = try OpenCLTestSupport.context()
        let info = ctx.device.info, cache = try temporaryCache()
        let conv = try ConvolutionSpec(inputChannels: 6, outputChannels: 10, kernelH: 3, kernelW: 3, hasBias: false)
            .geometry(input: [2, 6, 9, 8])
        let fc = GemmOperation(m: 4, n: 10, k: 50, transB: true)
        let x = try ctx.makeBuffer(count: conv.inputShape.count), w = try ctx.makeBuffer(count: conv.weightShape.count)
        let y = try ctx.makeBuffer(count: conv.outputShape.count)
        let a = try ctx.makeBuffer(count: 200), b = try ctx.makeBuffer(count: 500), c = try ctx.makeBuffer(count: 40)
        func run(_ cl: OpenCLBackend) throws -> [String] {
            try kernelsRun(cl) {
                try cl.convolutionForward(conv, input: x, weights: w, bias: nil, output: y, fusedReLU: false)
                try cl.sgemm(fc, a: a, b: b, c: c)
            }
        }
        let table = OpenCLTuning.forDevice(info)
        let untuned = try run(OpenCLBackend(context: ctx, tuning: table.withStoredTuning(for: info, cache: cache)))
        XCTAssertFalse(untuned.contains("CLBlast"))

        // The convolution gets an unrolled, unstaged tiling: the k unroll and staging knobs travel
        // through the cache file like the tile sizes.
        let direct = GemmTiling.tiny.with(kUnroll: 2, stageLocal: false)
        try cache.storeTuning(entry([KernelShape(conv, .convForward).classKey: .inHouse(direct),
                                     KernelShape(fc).classKey: .clblast], info: info), key: DeviceCalibration.tuningKey(info))
        let loaded = table.withStoredTuning(for: info, cache: cache)
        XCTAssertEqual(loaded.tuned.count, 2)
        XCTAssertEqual(loaded.tuned[KernelShape(conv, .convForward).classKey], .inHouse(direct))
        XCTAssertNotNil(loaded.tunedSource)
        let tuned = try run(OpenCLBackend(context: ctx, tuning: loaded))
        XCTAssertEqual(tuned, ["16x16 pad 1 unroll 2 local 0", "CLBlast"])
        XCTAssertNotEqual(tuned, untuned)

        // Off by the environment; and another driver or kernel source finds nothing.
        XCTAssertTrue(table.withStoredTuning(for: info, cache: cache, environment: [CalibrationCache.tuningVariable: "off"]).tuned.isEmpty)
        var other = info
        other.driverVersion += " (newer)"
        XCTAssertTrue(table.withStoredTuning(for: other, cache: cache).tuned.isEmpty)
        XCTAssertNotEqual(DeviceCalibration.tuningKey(other), DeviceCalibration.tuningKey(info))
        XCTAssertTrue(DeviceCalibration.tuningKey(info).hasSuffix("kernels \(DeviceCalibration.kernelSourceHash)"))

        // A corrupt file is ignored, and rewritten by the next store.
        try Data("{not json".utf8).write(to: cache.tuningFileURL)
        XCTAssertTrue(table.withStoredTuning(for: info, cache: cache).tuned.isEmpty)
        try cache.storeTuning(entry([:], info: info), key: "k")
        XCTAssertNotNil(cache.tuning("k"))
    }

    /// The tuner on a tiny space: it checks, times and stores; a backend loading the cache then runs
    /// what won for each shape (the table's choice where the table won).
    func testTheTunerOnATinySpaceStoresWhatWonAndItRuns() throws {
        let ctx = try OpenCLTestSupport.context()
        let info = ctx.device.info, cache = try temporaryCache()
        let pointwise = try ConvolutionSpec(inputChannels: 24, outputChannels: 40, kernelH: 1, kernelW: 1).geometry(input: [2, 24, 6, 6])
        var ip = GemmOperation(m: 8, n: 30, k: 64, transB: true)
        ip.bias = .perColumn
        let problems = [KernelTuningProblem(name: "pointwise forward", op: .convolution(pointwise, .convForward, fusedReLU: true)),
                        KernelTuningProblem(name: "ip forward", op: .gemm(ip))]
        let tuner = KernelTuner(context: ctx, space: .tiny, budgetSeconds: 600)
        XCTAssertEqual(tuner.candidates(for: problems[0].shape).count, 5, "table, three tilings, CLBlast")
        let report = try tuner.tune(problems, cache: cache)
        XCTAssertEqual(report.outcomes.count, 2)
        XCTAssertTrue(report.skipped.isEmpty)
        for o in report.outcomes {
            XCTAssertEqual(o.timed, 5, "\(o.problem): \(o.rejected)")
            XCTAssertNotNil(o.clblastSeconds)
            XCTAssertEqual(report.entry.measurements[o.problem.shape.classKey]?.candidates, 5)
        }
        let stored = try XCTUnwrap(cache.tuning(DeviceCalibration.tuningKey(info)))
        XCTAssertEqual(stored.variants, report.entry.variants)
        XCTAssertEqual(stored.measurements, report.entry.measurements)
        XCTAssertEqual(stored.kernelSourceHash, DeviceCalibration.kernelSourceHash)

        let loaded = OpenCLBackend(context: ctx, tuning: OpenCLTuning.forDevice(info).withStoredTuning(for: info, cache: cache))
        let plain = OpenCLBackend(context: ctx, tuning: OpenCLTuning.forDevice(info))
        for o in report.outcomes {
            let buffers = try o.problem.makeBuffers(loaded)
            let ran = try kernelsRun(loaded) { try o.problem.run(loaded, buffers) }
            let expected: [String]
            switch o.best?.engine {
            case .clblast?: expected = ["CLBlast"]
            case .inHouse?: expected = [name(o.best!.tiling!)]
            case nil: expected = try kernelsRun(plain) { try o.problem.run(plain, buffers) }
            }
            XCTAssertEqual(ran, expected, "\(o.problem) won with \(o.best.map { "\($0)" } ?? "the table")")
        }
    }

    /// A budget that runs out: the first (largest) problem still times the table, nothing beats it
    /// untried, and the rest keep the table without being timed.
    func testABudgetThatRunsOutKeepsTheTable() throws {
        let ctx = try OpenCLTestSupport.context()
        let problems = [KernelTuningProblem(name: "big", op: .gemm(GemmOperation(m: 40, n: 40, k: 40))),
                        KernelTuningProblem(name: "small", op: .gemm(GemmOperation(m: 4, n: 4, k: 4)))]
        let report = try KernelTuner(context: ctx, space: .tiny, budgetSeconds: 1e-6).run(problems)
        XCTAssertEqual(report.outcomes.map(\.problem.name), ["big"])
        XCTAssertEqual(report.outcomes.first?.timed, 1)
        XCTAssertNil(report.outcomes.first?.best)
        XCTAssertEqual(report.skipped.map(\.name), ["small"])
        XCTAssertTrue(report.entry.variants.isEmpty)
    }

    func testShapeClassesRoundSizesToPowersOfTwo() throws {
        XCTAssertEqual([0, 1, 2, 3, 5, 6, 11, 12, 1000, 10816].map(KernelShape.bucket), [0, 1, 2, 4, 4, 8, 8, 16, 1024, 8192])
        let a = KernelShape(kind: .gemm, rows: 64, columns: 1000, depth: 512, transB: true, epilogue: true)
        let b = KernelShape(kind: .gemm, rows: 60, columns: 1010, depth: 500, transB: true, epilogue: true)
        XCTAssertEqual(a.classKey, b.classKey)
        XCTAssertEqual(a.classKey, "gemm NT+e 64x1024x512")
        XCTAssertNotEqual(a.classKey, KernelShape(kind: .gemm, rows: 64, columns: 1000, depth: 512).classKey)
        let g = try ConvolutionSpec(inputChannels: 512, outputChannels: 1000, kernelH: 1, kernelW: 1).geometry(input: [64, 512, 13, 13])
        XCTAssertTrue(KernelShape(g, .convForward).clblastCan)
        XCTAssertTrue(KernelShape(g, .convBackwardWeights).clblastCan)
        // The default SqueezeNet problems cover conv10's weight gradient and the classifier's three GEMMs.
        let problems = try KernelTuningProblem.forTraining(NetworkGraph(model: SqueezeNet.build(.init(classes: 10))), batch: 64)
        let names = Set(problems.map(\.name))
        XCTAssertTrue(names.isSuperset(of: ["conv10 forward", "conv10 weight gradient", "fullyconnected0 forward",
                                            "fullyconnected0 weight gradient", "fullyconnected0 input gradient"]), "\(names)")
        XCTAssertFalse(names.contains("conv1 weight gradient"))
    }

    func testTuneRejectsBadOptions() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-tune-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        for (args, needle) in [(["tune", "--space", "huge"], "huge"), (["tune", "--budget", "-3"], "--budget"),
                               (["tune", "--quick", "--space", "full"], "disagree"), (["tune", "--model", "/nonexistent.mlmodel"], "nonexistent")] {
            let r = try runUpdraft(args, cacheDirectory: dir)
            XCTAssertNotEqual(r.status, 0, "\(args)")
            XCTAssertTrue(r.stderr.contains(needle), "\(args): \(r.stderr)")
            XCTAssertFalse(r.stderr.contains("Fatal error"), r.stderr)
        }
    }
}
