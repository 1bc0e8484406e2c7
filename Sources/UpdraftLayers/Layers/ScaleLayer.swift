import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// Core ML's scale and bias layers (an open family: `ScaleOp`, Layers+Scale.swift) on the broadcasting
/// ops: y = x · scale, then + bias in place; dx = dy · scale. The constants are frozen (the layer's
/// weights and bias), so no gradient goes to them.
enum ScaleLayer: LayerKind {
    static func kernelFamilies(_ op: LayerOp) -> [KernelFamily] { [.broadcast] }
    static func computesEachImageAlone(_ op: LayerOp) -> Bool { true }

    static func op(_ layer: GraphLayer) throws -> ScaleOp {
        guard let op = layer.op.family(as: ScaleOp.self) else {
            throw UpdraftError(.invalidModel, "layer '\(layer.name)' (\(layer.op.name)) is not a scale or bias layer")
        }
        return op
    }

    /// The layer's constant on its device: the scale (its weights) or the bias.
    static func constant(_ layer: GraphLayer, _ buffer: DeviceBuffer?, _ what: String) throws -> DeviceBuffer {
        guard let buffer else { throw UpdraftError(.invalidModel, "\(layer.op.name) layer '\(layer.name)' has no \(what) on its device") }
        return buffer
    }

    static func forward(_ c: ForwardCall) throws {
        let op = try op(c.layer), p = c.parameters
        var input = c.inputs[0]
        if let dims = op.scaleDims {
            try c.backend.broadcastBinary(try op.geometry(.multiply, dims, batch: c.batch), input, try constant(c.layer, p.weights, "scale"),
                                          output: c.output)
            input = c.output  // the bias is added in place: each element is read before it is written
        }
        if let dims = op.biasDims {
            try c.backend.broadcastBinary(try op.geometry(.add, dims, batch: c.batch), input, try constant(c.layer, p.bias, "bias"),
                                          output: c.output)
        }
    }

    static func backward(_ c: BackwardCall) throws {
        let op = try op(c.layer)
        try c.inputGradient { dx in
            if let dims = op.scaleDims {
                try c.backend.broadcastBinary(try op.geometry(.multiply, dims, batch: c.batch), c.outputGradient,
                                              try constant(c.layer, c.parameters.weights, "scale"), output: dx)
            } else {
                try c.backend.copy(c.outputGradient, to: dx)
            }
        }
    }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        let op = try op(layer)
        var w = LayerWork()
        let passes = [(BinaryOp.multiply, op.scaleDims), (.add, op.biasDims)].compactMap { o, d in d.map { (o, $0) } }
        w.forward = try passes.map { KernelWork(try op.geometry($0.0, $0.1, batch: batch).cost) }
        if backwardData, let first = passes.first { w.backwardData = [KernelWork(try op.geometry(.multiply, first.1, batch: batch).cost)] }
        return w
    }
}

extension ScaleOp: FamilyLayerKind {
    package static var kind: any LayerKind.Type { ScaleLayer.self }
}
