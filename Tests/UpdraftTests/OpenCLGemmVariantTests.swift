import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftPlacement

/// The in-house GEMM's k unroll (KUNROLL) and local staging (STAGE_LOCAL) knobs: every combination
/// against the Double reference on awkward sizes, in the plain GEMM and in the convolution kernels
/// that share its core, and the defines really reaching the kernels.
final class OpenCLGemmVariantTests: XCTestCase {
    private func backend(forced: KernelVariant) throws -> OpenCLBackend {
        let ctx = try OpenCLTestSupport.context()
        var t = OpenCLTuning.forDevice(ctx.device.info)
        t.forced = forced
        return OpenCLBackend(context: ctx, tuning: t)
    }

    /// A 19x23x37 GEMM (no size a multiple of the 16x16x16 tile) over a batch of 2 with offsets and
    /// padded strides, with the given transposes and optional bias and ReLU.
    private func gemm(_ transA: Bool, _ transB: Bool, epilogue: Bool) -> GemmOperation {
        var op = GemmOperation(m: 19, n: 23, k: 37, transA: transA, transB: transB, batch: 2)
        op.offsetA = 3; op.offsetB = 5; op.offsetC = 2
        op.strideA += 4; op.strideC += 1
        if epilogue { op.bias = transA ? .perRow : .perColumn; op.relu = true; op.alpha = 0.5 }
        return op
    }

    private func conv(_ spec: ConvolutionSpec, _ input: Shape, _ kind: KernelShape.Kind) throws -> KernelTuningProblem {
        KernelTuningProblem(name: "conv", op: .convolution(try spec.geometry(input: input), kind, fusedReLU: kind == .convForward))
    }

    /// Each combination of k unroll (whole slice, 1, 2, 4, 8) and staging (local tiles, global
    /// reads) but the default, on .tiny (16x16x16 tiles; unpadded local rows for the staged unrolls
    /// 2, 4 and 8): one plain GEMM (each transpose both split along K and with bias and ReLU, across the
    /// combinations) and one convolution direction each (3x3 with the k table forward and backward
    /// data, strided and dilated; the weight gradient split along K; pointwise).
    func testUnrollAndStagingCombinationsAgreeWithTheReference() throws {
        let threeByThree = ConvolutionSpec(inputChannels: 5, outputChannels: 7, kernelH: 3, kernelW: 3,
                                           padding: .valid(top: 1, bottom: 1, left: 1, right: 1))
        let strided = ConvolutionSpec(inputChannels: 6, outputChannels: 9, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                                      padding: .valid(top: 1, bottom: 0, left: 1, right: 0), hasBias: false)
        let dilated = ConvolutionSpec(inputChannels: 4, outputChannels: 11, kernelH: 3, kernelW: 3, dilationH: 2, dilationW: 2)
        let pointwise = ConvolutionSpec(inputChannels: 19, outputChannels: 13, kernelH: 1, kernelW: 1)
        let convs: [KernelTuningProblem] = [
            try conv(threeByThree, [2, 5, 9, 7], .convForward),
            try conv(strided, [2, 6, 9, 8], .convBackwardData),
            try conv(threeByThree, [3, 5, 8, 9], .convBackwardWeights),
            try conv(pointwise, [2, 19, 5, 7], .convForward),
            try conv(dilated, [2, 4, 9, 10], .convBackwardData),
        ]
        var combos: [(kUnroll: Int, stageLocal: Bool)] = []
        for stage in [true, false] { for u in [0, 1, 2, 4, 8] where !(u == 0 && stage) { combos.append((u, stage)) } }
        XCTAssertEqual(combos.count, 9)
        let transposes = [(false, false), (true, false), (false, true), (true, true)]
        for (i, combo) in combos.enumerated() {
            var tiling = GemmTiling.tiny.with(kUnroll: combo.kUnroll, stageLocal: combo.stageLocal)
            if combo.stageLocal && combo.kUnroll >= 2 { tiling.padding = 0 }
            XCTAssertTrue(tiling.isWellFormed)
            let split = i % 2 == 0                     // even: split-K 2 (no epilogue); odd: bias and ReLU
            let cl = try backend(forced: .inHouse(tiling, splits: split ? 2 : nil))
            let (ta, tb) = transposes[(i + i / 4) % 4]
            let problems = [KernelTuningProblem(name: "gemm", op: .gemm(gemm(ta, tb, epilogue: !split))), convs[i % convs.count]]
            for p in problems {
                var got: [Double] = []
                let launches = try cl.recordLaunches { got = try p.result(on: cl) }
                let want = try p.result(on: ReferenceBackend())
                let e = ComparisonError(got: got, reference: want, tolerance: .float32)
                XCTAssertTrue(e.ok, "\(tiling) split \(split) on \(p.shape): max abs error \(e.maxAbs)")
                // The knobs reached the GEMM kernel (the other launches are reductions and epilogues).
                let main = try XCTUnwrap(launches.first { $0.defines["TM"] != nil }, "\(p.shape)")
                XCTAssertEqual(main.defines["KUNROLL"], combo.kUnroll == 0 ? nil : "\(combo.kUnroll)", "\(p.shape)")
                XCTAssertEqual(main.defines["STAGE_LOCAL"], combo.stageLocal ? nil : "0", "\(p.shape)")
                XCTAssertEqual(main.defines["PAD"], tiling.padding == 1 ? nil : "0", "\(p.shape)")
                if split && p.shape.splittable && p.shape.depth > tiling.tileK {
                    XCTAssertTrue(launches.contains { $0.kernel == "sum_slabs" }, "\(p.shape) was not split")
                }
            }
        }
    }

    /// The knobs' constraints, their defines and names, and tunings stored before they existed.
    func testUnrollAndStagingAreValidatedAndDecodeFromOldFiles() throws {
        XCTAssertFalse(GemmTiling.minimal.with(kUnroll: 8).isWellFormed, "KUNROLL must divide TK (4)")
        XCTAssertFalse(GemmTiling.tiny.with(kUnroll: 3).isWellFormed)
        XCTAssertTrue(GemmTiling.minimal.with(kUnroll: 4).isWellFormed)
        let direct = GemmTiling.large.with(kUnroll: 2, stageLocal: false)
        XCTAssertEqual(direct.localMemoryBytes, 0)
        XCTAssertEqual(direct.defines["KUNROLL"], "2")
        XCTAssertEqual(direct.defines["STAGE_LOCAL"], "0")
        XCTAssertNil(GemmTiling.large.defines["KUNROLL"])
        XCTAssertNil(GemmTiling.large.defines["STAGE_LOCAL"])
        XCTAssertTrue("\(KernelVariant.inHouse(direct))".hasSuffix("k-unroll 2, global reads"), "\(KernelVariant.inHouse(direct))")
        XCTAssertNotEqual(KernelVariant.inHouse(direct), .inHouse(.large))

        // Round trip, and a file from before the knobs: whole-slice unroll, staged.
        let data = try JSONEncoder().encode(KernelVariant.inHouse(direct, splits: 4))
        XCTAssertEqual(try JSONDecoder().decode(KernelVariant.self, from: data), .inHouse(direct, splits: 4))
        let old = #"{"tileM":32,"tileN":32,"tileK":16,"workM":4,"workN":4,"vectorM":4,"vectorN":4}"#
        XCTAssertEqual(try JSONDecoder().decode(GemmTiling.self, from: Data(old.utf8)), .small)

        // The quick and full spaces search both knobs.
        let ctx = try OpenCLTestSupport.context()
        let shape = KernelShape(kind: .gemm, rows: 300, columns: 300, depth: 300)
        for space in [KernelTuningSpace.quick, .tiny] {
            let tilings = KernelTuner(context: ctx, space: space).candidates(for: shape).compactMap { $0?.tiling }
            XCTAssertTrue(tilings.contains { $0.kUnroll != 0 }, "\(space)")
            XCTAssertTrue(tilings.contains { !$0.stageLocal }, "\(space)")
        }
        let full = KernelTuner.fullSpace
        XCTAssertTrue(full.contains { $0.kUnroll == 8 } && full.contains { !$0.stageLocal && $0.kUnroll == 4 })
        XCTAssertTrue(full.allSatisfy(\.isWellFormed))
    }
}
