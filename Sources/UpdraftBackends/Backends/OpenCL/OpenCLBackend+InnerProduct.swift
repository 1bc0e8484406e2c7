import UpdraftCore

/// Inner product on OpenCL through the tiled SGEMM (Kernels/gemm.cl). x [N, Cin], w [Cout, Cin]
/// (Core ML's layout), b [Cout], y [N, Cout]:
/// - forward:          y  = f(x . w^T + b)       (M = N, columns Cout, K = Cin; bias, f's constants per column)
/// - backward data:    dx = dy . w               (M = N, columns Cin, K = Cout)
/// - backward weights: dw = dy^T . x             (M = Cout, columns Cin, K = N, split along N when long),
///                     db = column sums of dy    (tree reduction, fixed order)
extension OpenCLBackend {
    /// y = f(x . w^T + b) as one `sgemm` with the bias and activation as its epilogue (fused in the in-house
    /// kernel; one more pass when tuning chose CLBlast).
    public func innerProductForward(_ g: InnerProductGeometry, input: DeviceBuffer, weights: DeviceBuffer,
                                    bias: DeviceBuffer?, output: DeviceBuffer, epilogue: Activation?) throws {
        let b = try bias.map { try cl($0) }
        try checkInnerProduct(g)
        try checkBias(g.hasBias, b, count: g.outputChannels, "inner product forward")
        var op = GemmOperation(m: g.batch, n: g.outputChannels, k: g.inputChannels, transB: true)
        op.bias = b == nil ? .none : .perColumn
        op.activation = epilogue
        try sgemm(op, a: input, b: weights, c: output, bias: b)
    }

    /// dx = dy . w as one `sgemm`.
    public func innerProductBackwardData(_ g: InnerProductGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                         inputGradient: DeviceBuffer) throws {
        try checkInnerProduct(g)
        let op = GemmOperation(m: g.batch, n: g.inputChannels, k: g.outputChannels)
        try sgemm(op, a: outputGradient, b: weights, c: inputGradient)
    }

    /// dw = dy^T . x (split along the batch when long, summed in fixed order); db = column sums of dy by tree reduction.
    public func innerProductBackwardWeights(_ g: InnerProductGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                            weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws {
        let db = try biasGradient.map { try cl($0) }
        try checkInnerProduct(g)
        try checkBias(g.hasBias, db, count: g.outputChannels, "inner product backward weights")
        // The bias reduction goes first: it and the split-K slices share the scratch buffer, in queue order.
        if let db {
            let dy = try cl(outputGradient)
            guard dy.count >= g.batch * g.outputChannels else {
                throw UpdraftError(.invalidArgument,
                    "\(name) inner product backward weights: output gradient holds \(dy.count) values, the op needs \(g.batch * g.outputChannels)")
            }
            try self.biasGradient(dy, images: g.batch, channels: g.outputChannels, spatial: 1, into: db)
        }
        let op = GemmOperation(m: g.outputChannels, n: g.inputChannels, k: g.batch, transA: true)
        try sgemm(op, a: outputGradient, b: input, c: weightGradient)
    }

    private func checkInnerProduct(_ g: InnerProductGeometry) throws {
        guard g.batch >= 0, g.inputChannels >= 1, g.outputChannels >= 1 else {
            throw UpdraftError(.invalidArgument, "\(name) inner product: invalid geometry \(g)",
                               hint: "build geometries with InnerProductSpec.geometry(input:)")
        }
    }
}
