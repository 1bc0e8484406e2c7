/// An element-wise function (Core ML's activation, clip and unary layers): one kernel each way, the
/// function chosen by `-D` from the activation table. Fused into a convolution or inner product
/// before it when `TrainingGraph` can (it then never runs on its own).
enum ActivationLayer: LayerKind {
    static func forward(_ c: ForwardCall) throws {
        guard case let .activation(a) = c.layer.op else { return }
        try c.backend.activationForward(a, ActivationGeometry(shape: c.outputShape), input: c.inputs[0], output: c.output)
    }

    static func backward(_ c: BackwardCall) throws {
        guard case let .activation(a) = c.layer.op, c.wantsInput[0], let y = c.output else { return }
        let dx = try c.newInputGradient(0)
        try c.backend.activationBackward(a, ActivationGeometry(shape: c.outputShape), input: try c.input(0),
                                         output: y, outputGradient: c.outputGradient, inputGradient: dx)
        try c.addInputGradient(0, dx)
    }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        var w = LayerWork()
        guard case let .activation(a) = layer.op else { return w }
        let count = layer.outputShape.withBatch(batch).count
        w.forward = [KernelWork(a.forwardCost(count: count))]
        if backwardData { w.backwardData = [KernelWork(a.backwardCost(count: count))] }
        return w
    }
}
