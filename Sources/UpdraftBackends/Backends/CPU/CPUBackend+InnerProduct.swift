// Inner product as one GEMM over the whole batch (x [N, Cin], w [Cout, Cin], y [N, Cout]):
//   forward          y  [N, Cout]   = x [N, Cin] x w^T [Cin, Cout]   (C starts as the bias rows, beta = 1)
//   backward data    dx [N, Cin]    = dy [N, Cout] x w [Cout, Cin]
//   backward weights dw [Cout, Cin] = dy^T [Cout, N] x x [N, Cin];  db = column sums of dy
import UpdraftCore

extension CPUBackend {
    func validate(_ g: InnerProductGeometry) throws {
        try requireSizes(["batch": g.batch, "input channels": g.inputChannels, "output channels": g.outputChannels],
                         op: "inner product")
        let limit = Int(Int32.max)
        let (a, o1) = g.batch.multipliedReportingOverflow(by: max(g.inputChannels, g.outputChannels))
        let (b, o2) = g.inputChannels.multipliedReportingOverflow(by: g.outputChannels)
        guard !o1, !o2, a < limit, b < limit else {
            throw UpdraftError(.unsupported, "\(name) inner product \(g.inputShape) -> \(g.outputShape) is too large for one call",
                               hint: "use a smaller batch")
        }
    }

    /// One SGEMM over the whole batch (output rows start as the bias, beta 1), then the epilogue in one pass. Throws `.unsupported` when a matrix passes 2^31 elements.
    public func innerProductForward(_ g: InnerProductGeometry, input: DeviceBuffer, weights: DeviceBuffer,
                                    bias: DeviceBuffer?, output: DeviceBuffer, epilogue: Activation?) throws {
        try validate(g)
        try requireBias(g.hasBias, bias, "inner product")
        let plan = try epilogue.map { try CPUActivationPlan($0, channels: g.outputChannels, spatial: 1) }
        let (N, Cin, Cout) = (g.batch, g.inputChannels, g.outputChannels)
        let x = try pointer(input, N * Cin, "inner product input")
        let w = try pointer(weights, Cout * Cin, "inner product weights")
        let b = try bias.map { try pointer($0, Cout, "inner product bias") }
        let y = try pointer(output, N * Cout, "inner product output")
        if try oneDNNInnerProductForward(g, x: x, w: w, bias: b, y: y, plan: plan) { return }
        if let b {
            for n in 0..<N { (y + n * Cout).update(from: b, count: Cout) }
        }
        CPUKernels.withSingleThreadedBLAS {
            parallelSGEMM(transB: true, m: N, n: Cout, k: Cin, a: x, lda: Cin, b: w, ldb: Cin,
                          beta: b == nil ? 0 : 1, c: y, ldc: Cout)
        }
        if let plan { applyEpilogue(plan, y, count: N * Cout, parallel: true) }
    }

    /// dx = dy x w, one SGEMM over the batch split into row or column blocks.
    public func innerProductBackwardData(_ g: InnerProductGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                         inputGradient: DeviceBuffer) throws {
        try validate(g)
        let (N, Cin, Cout) = (g.batch, g.inputChannels, g.outputChannels)
        let dy = try pointer(outputGradient, N * Cout, "inner product output gradient")
        let w = try pointer(weights, Cout * Cin, "inner product weights")
        let dx = try pointer(inputGradient, N * Cin, "inner product input gradient")
        if try oneDNNInnerProductBackwardData(g, dy: dy, w: w, dx: dx) { return }
        CPUKernels.withSingleThreadedBLAS {
            parallelSGEMM(m: N, n: Cin, k: Cout, a: dy, lda: Cout, b: w, ldb: Cin, c: dx, ldc: Cin)
        }
    }

    /// dw = dy^T x x in one SGEMM; the bias gradient sums dy's rows in order, so it is the same on any thread count.
    public func innerProductBackwardWeights(_ g: InnerProductGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                            weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws {
        try validate(g)
        try requireBiasGradient(g.hasBias, biasGradient, "inner product")
        let (N, Cin, Cout) = (g.batch, g.inputChannels, g.outputChannels)
        let x = try pointer(input, N * Cin, "inner product input")
        let dy = try pointer(outputGradient, N * Cout, "inner product output gradient")
        let dw = try pointer(weightGradient, Cout * Cin, "inner product weight gradient")
        let db = try biasGradient.map { try pointer($0, Cout, "inner product bias gradient") }
        if try oneDNNInnerProductBackwardWeights(g, x: x, dy: dy, dw: dw, db: db) { return }
        CPUKernels.withSingleThreadedBLAS {
            parallelSGEMM(transA: true, m: Cout, n: Cin, k: N, a: dy, lda: Cout, b: x, ldb: Cin, c: dw, ldc: Cin)
        }
        if let db {
            // Rows of dy added in order: contiguous, vectorised, and the same order for every column.
            db.update(repeating: 0, count: Cout)
            for n in 0..<N {
                let row = dy + n * Cout
                for o in 0..<Cout { db[o] += row[o] }
            }
        }
    }
}
