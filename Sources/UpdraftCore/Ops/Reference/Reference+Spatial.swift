// Padding (a spatial op that moves values), and the entry points of every spatial op
// (`SpatialGeometry`; resampling is in Reference+Resample.swift). Backward passes scatter: every output position adds its dy to the input
// positions it read, with the weight it read them with, which is the definition of the gradient.

extension Reference {
    /// x [N, C, H, W] -> y of `g.outputShape`.
    public static func spatialForward(_ g: SpatialGeometry, input x: [Double]) throws -> [Double] {
        try require(x, count: g.inputShape.count, "\(g.op.familyName) input \(g.inputShape)")
        switch g.op {
        case let .padding(p): return paddingForward(g, p, x)
        case .resampling: return try resampleForward(g, x)
        case let .lrn(l): return lrnForward(g, l, x)
        case let .l2Normalize(eps): return l2NormalizeForward(g, Double(eps), x)
        case let .instanceNormalization(eps): return instanceNormalizationForward(g, Double(eps), x)
        }
    }

    /// dx from x, y = forward(x) and dy.
    public static func spatialBackward(_ g: SpatialGeometry, input x: [Double], output y: [Double],
                                       outputGradient dy: [Double]) throws -> [Double] {
        try require(x, count: g.inputShape.count, "\(g.op.familyName) input \(g.inputShape)")
        try require(y, count: g.outputShape.count, "\(g.op.familyName) output \(g.outputShape)")
        try require(dy, count: g.outputShape.count, "\(g.op.familyName) output gradient \(g.outputShape)")
        switch g.op {
        case let .padding(p): return paddingBackward(g, p, dy)
        case .resampling: return try resampleBackward(g, dy)
        case let .lrn(l): return lrnBackward(g, l, x, dy)
        case let .l2Normalize(eps): return l2NormalizeBackward(g, Double(eps), x, dy)
        case let .instanceNormalization(eps): return instanceNormalizationBackward(g, Double(eps), x, dy)
        }
    }

    // MARK: Padding

    static func paddingForward(_ g: SpatialGeometry, _ p: PaddingSpec, _ x: [Double]) -> [Double] {
        var fill = 0.0
        if case let .constant(v) = p.mode { fill = Double(v) }
        var y = [Double](repeating: fill, count: g.outputShape.count)
        paddingWalk(g, p) { yi, xi in y[yi] = x[xi] }
        return y
    }

    static func paddingBackward(_ g: SpatialGeometry, _ p: PaddingSpec, _ dy: [Double]) -> [Double] {
        var dx = [Double](repeating: 0, count: g.inputShape.count)
        paddingWalk(g, p) { yi, xi in dx[xi] += dy[yi] }
        return dx
    }

    /// Both directions' loop: every output element `yi` that copies an input element (`xi`: the source
    /// the mode picks; constant padding's border has none), planes then rows then columns.
    private static func paddingWalk(_ g: SpatialGeometry, _ p: PaddingSpec, _ body: (_ yi: Int, _ xi: Int) -> Void) {
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        for plane in 0..<(g.batch * g.channels) {
            for oh in 0..<Ho {
                guard let h = SpatialGeometry.paddingSource(oh - p.top, size: H, mode: p.mode) else { continue }
                for ow in 0..<Wo {
                    guard let w = SpatialGeometry.paddingSource(ow - p.left, size: W, mode: p.mode) else { continue }
                    body((plane * Ho + oh) * Wo + ow, (plane * H + h) * W + w)
                }
            }
        }
    }
}
