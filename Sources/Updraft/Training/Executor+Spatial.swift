/// Forward and backward of the spatial layers (padding, upsample, LRN, L2 normalize) and of instance
/// normalization, which runs the plane statistics (Backend.spatialForward) and then its frozen gamma
/// and beta as a channel affine.
extension Executor {
    func spatialForward(_ layer: GraphLayer, input x: DeviceBuffer, output y: DeviceBuffer, batch: Int,
                        backend: Backend) throws {
        guard let g = try layer.spatialGeometry(batch: batch) else { return }
        guard case .instanceNormalization = layer.op else {
            return try backend.spatialForward(g, input: x, output: y)
        }
        let p = params(layer)
        guard let scale = p.scale, let shift = p.shift else {
            throw UpdraftError(.invalidModel, "instance normalization layer '\(layer.name)' has no gamma and beta on its device")
        }
        // The affine runs in place (every backend's channel affine reads element i before writing it).
        try backend.spatialForward(g, input: x, output: y)
        try backend.channelAffine(g.outputShape, input: y, scale: scale, shift: shift, output: y)
    }

    func spatialBackward(_ layer: GraphLayer, input x: DeviceBuffer, output y: DeviceBuffer, outputGradient dy: DeviceBuffer,
                         inputGradient dx: DeviceBuffer, ws: Workspace, backend: Backend) throws {
        guard let g = try layer.spatialGeometry(batch: ws.batch) else { return }
        guard case .instanceNormalization = layer.op else {
            return try backend.spatialBackward(g, input: x, output: y, outputGradient: dy, inputGradient: dx)
        }
        guard let scale = params(layer).scale else {
            throw UpdraftError(.invalidModel, "instance normalization layer '\(layer.name)' has no gamma on its device")
        }
        let dNormalized = try ws.acquire(g.outputShape.count, on: backend)
        defer { ws.release(dNormalized, from: backend) }
        try backend.channelAffineBackward(g.outputShape, outputGradient: dy, scale: scale, inputGradient: dNormalized)
        try backend.spatialBackward(g, input: x, output: y, outputGradient: dNormalized, inputGradient: dx)
    }
}

extension LayerOp {
    /// The per-channel scale and shift a layer applies with Backend.channelAffine (frozen batchnorm,
    /// instance normalization's gamma and beta); nil for other ops.
    var channelScaleShift: (scale: [Float], shift: [Float])? {
        switch self {
        case let .batchnorm(scale, shift), let .instanceNormalization(_, scale, shift): return (scale, shift)
        default: return nil
        }
    }
}

extension CostModel {
    /// The spatial op's kernel (and for instance normalization the channel affine after it).
    static func spatialWork(for layer: GraphLayer, batch: Int, backwardData: Bool) throws -> LayerWork {
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
