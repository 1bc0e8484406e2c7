// Padding and upsampling (the spatial ops that move values), and the entry points of every spatial
// op (`SpatialGeometry`). Backward passes scatter: every output position adds its dy to the input
// positions it read, with the weight it read them with, which is the definition of the gradient.

extension Reference {
    /// x [N, C, H, W] -> y of `g.outputShape`.
    public static func spatialForward(_ g: SpatialGeometry, input x: [Double]) throws -> [Double] {
        try require(x, count: g.inputShape.count, "\(g.op.familyName) input \(g.inputShape)")
        switch g.op {
        case let .padding(p): return paddingForward(g, p, x)
        case let .upsample(u): return upsampleForward(g, u, x)
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
        case let .upsample(u): return upsampleBackward(g, u, dy)
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

    // MARK: Upsample

    /// Output position o of an axis reads input positions i0 and i1 with weights (1 - f) and f.
    package static func upsampleTaps(_ u: UpsampleSpec, o: Int, inSize: Int, outSize: Int, scale: Int)
        -> (i0: Int, i1: Int, f: Double) {
        switch u.mode {
        case .nearest:
            return (o / scale, o / scale, 0)
        case let .bilinear(mode):
            let (a, b) = SpatialGeometry.linearGrid(mode, inSize: inSize, outSize: outSize)
            let grid = min(Double(inSize - 1), max(0, Double(o) * a + b))
            let i0 = Int(grid.rounded(.down))
            return (i0, min(i0 + 1, inSize - 1), grid - Double(i0))
        }
    }

    static func upsampleForward(_ g: SpatialGeometry, _ u: UpsampleSpec, _ x: [Double]) -> [Double] {
        let (H, W) = (g.inHeight, g.inWidth)
        var y = [Double](repeating: 0, count: g.outputShape.count)
        upsampleWalk(g, u) { yi, plane, th, tw in
            func at(_ h: Int, _ w: Int) -> Double { x[(plane * H + h) * W + w] }
            let top = (1 - tw.f) * at(th.i0, tw.i0) + tw.f * at(th.i0, tw.i1)
            let bottom = (1 - tw.f) * at(th.i1, tw.i0) + tw.f * at(th.i1, tw.i1)
            y[yi] = (1 - th.f) * top + th.f * bottom
        }
        return y
    }

    static func upsampleBackward(_ g: SpatialGeometry, _ u: UpsampleSpec, _ dy: [Double]) -> [Double] {
        let (H, W) = (g.inHeight, g.inWidth)
        var dx = [Double](repeating: 0, count: g.inputShape.count)
        upsampleWalk(g, u) { yi, plane, th, tw in
            let d = dy[yi]
            func add(_ h: Int, _ w: Int, _ weight: Double) { dx[(plane * H + h) * W + w] += weight * d }
            add(th.i0, tw.i0, (1 - th.f) * (1 - tw.f))
            add(th.i0, tw.i1, (1 - th.f) * tw.f)
            add(th.i1, tw.i0, th.f * (1 - tw.f))
            add(th.i1, tw.i1, th.f * tw.f)
        }
        return dx
    }

    /// Both directions' loop: every output element `yi` of `plane` with its two row taps `th` and
    /// column taps `tw` (input indices and the second one's weight), planes then rows then columns.
    private static func upsampleWalk(_ g: SpatialGeometry, _ u: UpsampleSpec,
                                     _ body: (_ yi: Int, _ plane: Int, _ th: (i0: Int, i1: Int, f: Double),
                                              _ tw: (i0: Int, i1: Int, f: Double)) -> Void) {
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        for plane in 0..<(g.batch * g.channels) {
            for oh in 0..<Ho {
                let th = upsampleTaps(u, o: oh, inSize: H, outSize: Ho, scale: u.scaleH)
                for ow in 0..<Wo {
                    body((plane * Ho + oh) * Wo + ow, plane, th, upsampleTaps(u, o: ow, inSize: W, outSize: Wo, scale: u.scaleW))
                }
            }
        }
    }
}
