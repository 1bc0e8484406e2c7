import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// Softmax over channels (`Backend.softmax*` with `SoftmaxGeometry(shape:)`); backward reads only y.
enum SoftmaxLayer: LayerKind {
    static func kernelFamilies(_ op: LayerOp) -> [KernelFamily] { [.softmax] }

    static func forward(_ c: ForwardCall) throws {
        try c.backend.softmaxForward(SoftmaxGeometry(shape: c.outputShape), input: c.inputs[0], output: c.output)
    }

    static func backward(_ c: BackwardCall) throws {
        guard let y = c.output else { return }
        try c.inputGradient { dx in
            try c.backend.softmaxBackward(SoftmaxGeometry(shape: c.outputShape), output: y, outputGradient: c.outputGradient,
                                          inputGradient: dx)
        }
    }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        let count = layer.outputShape.withBatch(batch).count
        return .passes(forward: SoftmaxGeometry(shape: layer.outputShape.withBatch(batch)).cost,
                       backward: OpCost(flops: Double(4 * count), bytes: f32Bytes(count, count, count)), backwardData: backwardData)
    }
}
