import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// The spatial layers (padding, the resampling layers, LRN, L2 normalize: `Backend.spatial*` with the
/// op's geometry) and instance normalization, which runs the plane statistics (`Backend.spatialForward`)
/// and then its frozen gamma and beta as a channel affine. cropResize reads its boxes from its second
/// input into the geometry before it runs, and passes them no gradient.
enum SpatialLayer: LayerKind {
    static func kernelFamilies(_ op: LayerOp) -> [KernelFamily] {
        switch op {
        case .spatial(.padding): return [.padding]
        case .spatial(.resampling): return [.resampling]
        default: return [.normalization, .elementwise]
        }
    }
    static func computesEachImageAlone(_ op: LayerOp) -> Bool { true }

    /// The layer's geometry for the batch, with cropResize's boxes read from `boxes` (its second input).
    static func geometry(_ layer: GraphLayer, batch: Int, boxes: () throws -> DeviceBuffer, on backend: Backend) throws -> SpatialGeometry? {
        guard let g = try layer.spatialGeometry(batch: batch) else { return nil }
        guard case let .resampling(.cropResize(spec)) = g.op else { return g }
        let values = try backend.download(try boxes(), offset: 0, count: batch * spec.boxLength)
        do {
            return try SpatialOp.resampling(.cropResize(spec.reading(boxes: values, batch: batch))).geometry(input: g.inputShape)
        } catch let e as UpdraftError {
            throw UpdraftError(e.kind, "layer '\(layer.name)' (cropResize), boxes '\(layer.inputs[1])': \(e.message)", hint: e.hint)
        }
    }

    static func forward(_ c: ForwardCall) throws {
        guard let g = try geometry(c.layer, batch: c.batch, boxes: { c.inputs[1] }, on: c.backend) else { return }
        guard case .instanceNormalization = c.layer.op else {
            return try c.backend.spatialForward(g, input: c.inputs[0], output: c.output)
        }
        let p = c.parameters
        guard let scale = p.scale, let shift = p.shift else {
            throw UpdraftError(.invalidModel, "instance normalization layer '\(c.layer.name)' has no gamma and beta on its device")
        }
        // The affine runs in place (every backend's channel affine reads element i before writing it).
        try c.backend.spatialForward(g, input: c.inputs[0], output: c.output)
        try c.backend.channelAffine(g.outputShape, input: c.output, scale: scale, shift: shift, output: c.output)
    }

    static func backward(_ c: BackwardCall) throws {
        if c.wantsInput.count > 1, c.wantsInput[1] {
            throw UpdraftError(.unsupported,
                "layer '\(c.layer.name)' (\(c.layer.op.name)): its boxes '\(c.layer.inputs[1])' come from trained layers, but cropResize passes no gradient to its boxes",
                hint: "feed the boxes from a constant or from layers that do not train")
        }
        guard c.wantsInput[0], let y = c.output,
              let g = try geometry(c.layer, batch: c.batch, boxes: { try c.value(ofInput: 1) }, on: c.backend) else { return }
        let dx = try c.newInputGradient(0)
        let x = try c.input(0), dy = c.outputGradient
        if case .instanceNormalization = c.layer.op {
            guard let scale = c.parameters.scale else {
                throw UpdraftError(.invalidModel, "instance normalization layer '\(c.layer.name)' has no gamma on its device")
            }
            let dNormalized = try c.ws.acquire(g.outputShape.count, on: c.backend)
            defer { c.ws.release(dNormalized, from: c.backend) }
            try c.backend.channelAffineBackward(g.outputShape, outputGradient: dy, scale: scale, inputGradient: dNormalized)
            try c.backend.spatialBackward(g, input: x, output: y, outputGradient: dNormalized, inputGradient: dx)
        } else {
            try c.backend.spatialBackward(g, input: x, output: y, outputGradient: dy, inputGradient: dx)
        }
        try c.addInputGradient(0, dx)
    }

    /// The spatial op's kernel (and for instance normalization the channel affine after it).
    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        var w = LayerWork()
        guard let g = try layer.spatialGeometry(batch: batch) else { return w }
        let count = g.outputShape.count
        let affine = KernelWork(OpCost(flops: Double(2 * count), bytes: f32Bytes(count, count)))
        let isInstance: Bool = { if case .instanceNormalization = layer.op { return true } else { return false } }()
        w.forward = [KernelWork(g.forwardCost)] + (isInstance ? [affine] : [])
        if backwardData { w.backwardData = [KernelWork(g.backwardCost)] + (isInstance ? [affine] : []) }
        return w
    }
}
