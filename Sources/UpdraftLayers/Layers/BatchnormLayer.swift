import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// Frozen batchnorm as a per-channel affine, y = scale[c] * x + shift[c] (`Backend.channelAffine`),
/// with scale and shift precomputed from gamma, beta, mean and variance when the graph is built.
enum BatchnormLayer: LayerKind {
    static func kernelFamilies(_ op: LayerOp) -> [KernelFamily] { [.elementwise] }
    static func computesEachImageAlone(_ op: LayerOp) -> Bool { true }

    static func forward(_ c: ForwardCall) throws {
        let p = c.parameters
        try c.backend.channelAffine(c.outputShape, input: c.inputs[0], scale: p.scale!, shift: p.shift!, output: c.output)
    }

    static func backward(_ c: BackwardCall) throws {
        try c.inputGradient { dx in
            try c.backend.channelAffineBackward(c.outputShape, outputGradient: c.outputGradient, scale: c.parameters.scale!,
                                                inputGradient: dx)
        }
    }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        let count = layer.outputShape.withBatch(batch).count
        return .passes(forward: OpCost(flops: Double(2 * count), bytes: f32Bytes(count, count)),
                       backward: OpCost(flops: Double(count), bytes: f32Bytes(count, count)), backwardData: backwardData)
    }
}
