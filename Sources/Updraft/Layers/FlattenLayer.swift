/// CHANNEL_FIRST flatten: the same memory layout in NCHW, so a copy forward and the gradient copied back.
enum FlattenLayer: LayerKind {
    static func forward(_ c: ForwardCall) throws {
        try c.backend.copy(c.inputs[0], to: c.output)
    }

    static func backward(_ c: BackwardCall) throws {
        guard c.wantsInput[0] else { return }
        let dx = try c.newInputGradient(0)
        try c.backend.copy(c.outputGradient, to: dx)
        try c.addInputGradient(0, dx)
    }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        let count = layer.outputShape.withBatch(batch).count
        var w = LayerWork()
        w.forward = [KernelWork(OpCost(flops: 0, bytes: f32Bytes(count, count)))]
        if backwardData { w.backwardData = [KernelWork(OpCost(flops: 0, bytes: f32Bytes(count, count)))] }
        return w
    }
}
