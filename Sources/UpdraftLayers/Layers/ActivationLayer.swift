import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// An element-wise function (Core ML's activation, clip and unary layers): one kernel each way, the
/// function chosen by `-D` from the activation table. Fused into a convolution or inner product
/// before it when `TrainingGraph` can (it then never runs on its own).
enum ActivationLayer: LayerKind {
    static func kernelFamilies(_ op: LayerOp) -> [KernelFamily] { [.activation] }
    static func computesEachImageAlone(_ op: LayerOp) -> Bool { true }

    static func forward(_ c: ForwardCall) throws {
        guard case let .activation(a) = c.layer.op else { return }
        try c.backend.activationForward(a, ActivationGeometry(shape: c.outputShape), input: c.inputs[0], output: c.output)
    }

    static func backward(_ c: BackwardCall) throws {
        guard case let .activation(a) = c.layer.op, let y = c.output else { return }
        try c.inputGradient { dx in
            try c.backend.activationBackward(a, ActivationGeometry(shape: c.outputShape), input: try c.input(0),
                                             output: y, outputGradient: c.outputGradient, inputGradient: dx)
        }
    }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        guard case let .activation(a) = layer.op else { return LayerWork() }
        let count = layer.outputShape.withBatch(batch).count
        return .passes(forward: a.forwardCost(count: count), backward: a.backwardCost(count: count), backwardData: backwardData)
    }
}
