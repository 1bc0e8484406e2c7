// Resampling (upsample and the layers that resize on a grid, Ops/Resample.swift): every output reads
// the 2 x 2 taps of its row and column with the bilinear weights; backward scatters dy to the same
// taps with the same weights, which is the definition of the gradient.

extension Reference {
    static func resampleForward(_ g: SpatialGeometry, _ x: [Double]) throws -> [Double] {
        let (H, W) = (g.inHeight, g.inWidth)
        var y = [Double](repeating: 0, count: g.outputShape.count)
        try resampleWalk(g) { yi, plane, th, tw in
            func at(_ h: Int, _ w: Int) -> Double { x[(plane * H + h) * W + w] }
            let top = (1 - tw.f) * at(th.i0, tw.i0) + tw.f * at(th.i0, tw.i1)
            let bottom = (1 - tw.f) * at(th.i1, tw.i0) + tw.f * at(th.i1, tw.i1)
            y[yi] = (1 - th.f) * top + th.f * bottom
        }
        return y
    }

    static func resampleBackward(_ g: SpatialGeometry, _ dy: [Double]) throws -> [Double] {
        let (H, W) = (g.inHeight, g.inWidth)
        var dx = [Double](repeating: 0, count: g.inputShape.count)
        try resampleWalk(g) { yi, plane, th, tw in
            let d = dy[yi]
            func add(_ h: Int, _ w: Int, _ weight: Double) { dx[(plane * H + h) * W + w] += weight * d }
            add(th.i0, tw.i0, (1 - th.f) * (1 - tw.f))
            add(th.i0, tw.i1, (1 - th.f) * tw.f)
            add(th.i1, tw.i0, th.f * (1 - tw.f))
            add(th.i1, tw.i1, th.f * tw.f)
        }
        return dx
    }

    /// Both directions' loop: every output element `yi` of `plane` with the taps of its row `th` and
    /// column `tw` (from the table of the plane's example), planes then rows then columns.
    private static func resampleWalk(_ g: SpatialGeometry,
                                     _ body: (_ yi: Int, _ plane: Int, _ th: ResampleTap, _ tw: ResampleTap) -> Void) throws {
        let table = try g.resampleTable()
        let (Ho, Wo) = (g.outHeight, g.outWidth)
        for plane in 0..<(g.batch * g.channels) {
            let t = table.index(ofExample: plane / max(g.channels, 1))
            let rows = table.rows[t], columns = table.columns[t]
            for oh in 0..<Ho {
                for ow in 0..<Wo { body((plane * Ho + oh) * Wo + ow, plane, rows[oh], columns[ow]) }
            }
        }
    }
}
