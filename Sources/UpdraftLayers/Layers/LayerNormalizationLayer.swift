import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// Layer normalization (an open family: `LayerNormalizationOp`, Layers+LayerNormalization.swift) with its
/// frozen gamma and beta as the layer's weights and bias: `Backend.layerNormalizationForward` and, for
/// the input's gradient, `layerNormalizationBackward` (DeviceOps+LayerNormalization.swift).
enum LayerNormalizationLayer: LayerKind {
    static func kernelFamilies(_ op: LayerOp) -> [KernelFamily] { [.layerNormalization] }
    /// Groups never span two examples.
    static func computesEachImageAlone(_ op: LayerOp) -> Bool { true }

    static func geometry(_ layer: GraphLayer, batch: Int) throws -> LayerNormalizationGeometry {
        guard let op = layer.op.family(as: LayerNormalizationOp.self) else {
            throw UpdraftError(.invalidModel, "layer '\(layer.name)' (\(layer.op.name)) is not a layer normalization")
        }
        return op.geometry(batch: batch, input: layer.inputShapes[0])
    }

    /// gamma and beta on the layer's device.
    static func scaleAndShift(_ layer: GraphLayer, _ p: LayerParameterBuffers) throws -> (gamma: DeviceBuffer, beta: DeviceBuffer) {
        guard let gamma = p.weights, let beta = p.bias else {
            throw UpdraftError(.invalidModel, "layer normalization layer '\(layer.name)' has no gamma and beta on its device")
        }
        return (gamma, beta)
    }

    static func forward(_ c: ForwardCall) throws {
        let (gamma, beta) = try scaleAndShift(c.layer, c.parameters)
        try c.backend.layerNormalizationForward(try geometry(c.layer, batch: c.batch), input: c.inputs[0], gamma: gamma, beta: beta,
                                                output: c.output)
    }

    static func backward(_ c: BackwardCall) throws {
        try c.inputGradient { dx in
            try c.backend.layerNormalizationBackward(try geometry(c.layer, batch: c.batch), input: try c.input(0),
                                                     gamma: try scaleAndShift(c.layer, c.parameters).gamma,
                                                     outputGradient: c.outputGradient, inputGradient: dx)
        }
    }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        let g = try geometry(layer, batch: batch)
        return .passes(forward: g.forwardCost, backward: g.backwardCost, backwardData: backwardData)
    }
}

extension LayerNormalizationOp: FamilyLayerKind {
    package static var kind: any LayerKind.Type { LayerNormalizationLayer.self }
}
