import UpdraftCore
import UpdraftModel

/// CHANNEL_FIRST flatten: the same memory layout in NCHW, so a copy forward and the gradient copied back.
enum FlattenLayer: LayerKind {
    static func forward(_ c: ForwardCall) throws {
        try c.backend.copy(c.inputs[0], to: c.output)
    }

    static func backward(_ c: BackwardCall) throws {
        try c.inputGradient { dx in try c.backend.copy(c.outputGradient, to: dx) }
    }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        .copy(count: layer.outputShape.withBatch(batch).count, backwardData: backwardData)
    }
}
