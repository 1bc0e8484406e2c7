/// Softmax over channels (`Backend.softmax*` with `SoftmaxGeometry(shape:)`); backward reads only y.
enum SoftmaxLayer: LayerKind {
    static func forward(_ c: ForwardCall) throws {
        try c.backend.softmaxForward(SoftmaxGeometry(shape: c.outputShape), input: c.inputs[0], output: c.output)
    }

    static func backward(_ c: BackwardCall) throws {
        guard c.wantsInput[0], let y = c.output else { return }
        let dx = try c.newInputGradient(0)
        try c.backend.softmaxBackward(SoftmaxGeometry(shape: c.outputShape), output: y, outputGradient: c.outputGradient,
                                      inputGradient: dx)
        try c.addInputGradient(0, dx)
    }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        let count = layer.outputShape.withBatch(batch).count
        var w = LayerWork()
        w.forward = [KernelWork(SoftmaxGeometry(shape: layer.outputShape.withBatch(batch)).cost)]
        if backwardData { w.backwardData = [KernelWork(OpCost(flops: Double(4 * count), bytes: f32Bytes(count, count, count)))] }
        return w
    }
}
