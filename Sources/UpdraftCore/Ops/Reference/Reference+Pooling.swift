// Pooling (Core ML PoolingLayerParams: MAX and AVERAGE; global pooling arrives as a geometry whose
// window is the whole plane).
//
// x [N, C, H, W] -> y [N, C, Ho, Wo]. Window (oh, ow) covers input rows h0 ..< h0 + kH with
// h0 = oh * strideH - padTop, and columns w0 ..< w0 + kW with w0 = ow * strideW - padLeft; only the
// positions inside the input take part (padding is never a candidate for the max).
//   max:     the largest in-image value; ties go to the first in row-major window order (kh, then kw),
//            and backward routes the whole gradient to that element.
//   average: the sum of the in-image values divided by
//            - the number of in-image positions when excludePadding, or
//            - the number of window positions inside the padded extent [-padTop, H + padBottom) x
//              [-padLeft, W + padRight) otherwise (a ceil-mode window hanging past that extent counts
//              only its part inside it).
// A window with no in-image position (only possible when padding >= kernel) yields 0 and passes no gradient.

extension Reference {
    static func validate(_ g: PoolGeometry) throws {
        try requireSizes([("batch", g.batch), ("channels", g.channels), ("input height", g.inHeight),
                          ("input width", g.inWidth), ("output height", g.outHeight), ("output width", g.outWidth),
                          ("top padding", g.padTop), ("bottom padding", g.padBottom),
                          ("left padding", g.padLeft), ("right padding", g.padRight)], op: "pooling")
        try requireSizes([("kernel height", g.kernelH), ("kernel width", g.kernelW),
                          ("stride height", g.strideH), ("stride width", g.strideW)], positive: true, op: "pooling")
    }

    /// The in-image part of window (oh, ow): rows and columns, clipped to the input.
    static func poolWindow(_ g: PoolGeometry, oh: Int, ow: Int) -> (rows: Range<Int>, cols: Range<Int>) {
        let h0 = oh * g.strideH - g.padTop, w0 = ow * g.strideW - g.padLeft
        let rows = max(0, h0)..<max(0, min(g.inHeight, h0 + g.kernelH))
        let cols = max(0, w0)..<max(0, min(g.inWidth, w0 + g.kernelW))
        return (rows, cols)
    }

    /// The average-pooling divisor of window (oh, ow) (0 only for an empty window).
    static func poolDivisor(_ g: PoolGeometry, oh: Int, ow: Int) -> Int {
        let (rows, cols) = poolWindow(g, oh: oh, ow: ow)
        if g.excludePadding { return rows.count * cols.count }
        let h0 = oh * g.strideH - g.padTop, w0 = ow * g.strideW - g.padLeft
        let paddedRows = max(-g.padTop, h0)..<max(-g.padTop, min(g.inHeight + g.padBottom, h0 + g.kernelH))
        let paddedCols = max(-g.padLeft, w0)..<max(-g.padLeft, min(g.inWidth + g.padRight, w0 + g.kernelW))
        return paddedRows.count * paddedCols.count
    }

    /// The flat input index (within one [H, W] plane) of window (oh, ow)'s first maximum, or nil for
    /// an empty window. `plane` is the offset of the (n, c) plane in x.
    static func poolArgMax(_ g: PoolGeometry, _ x: [Double], plane: Int, oh: Int, ow: Int) -> Int? {
        let (rows, cols) = poolWindow(g, oh: oh, ow: ow)
        var best = -1, bestValue = 0.0
        for ih in rows {
            for iw in cols {
                let i = ih * g.inWidth + iw
                if best < 0 || x[plane + i] > bestValue { best = i; bestValue = x[plane + i] }  // strictly greater: first max wins
            }
        }
        return best < 0 ? nil : best
    }

    /// x [N, C, H, W] -> y [N, C, Ho, Wo].
    public static func poolingForward(_ g: PoolGeometry, input x: [Double]) throws -> [Double] {
        try validate(g)
        try require(x, count: g.inputShape.count, "pooling input")
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        var y = [Double](repeating: 0, count: g.outputShape.count)
        for nc in 0..<(g.batch * g.channels) {  // one (n, c) plane at a time
            let plane = nc * H * W
            for oh in 0..<Ho {
                for ow in 0..<Wo {
                    let out = (nc * Ho + oh) * Wo + ow
                    switch g.kind {
                    case .max:
                        if let i = poolArgMax(g, x, plane: plane, oh: oh, ow: ow) { y[out] = x[plane + i] }
                    case .average:
                        let (rows, cols) = poolWindow(g, oh: oh, ow: ow)
                        var sum = 0.0
                        for ih in rows {
                            for iw in cols { sum += x[plane + ih * W + iw] }
                        }
                        let divisor = poolDivisor(g, oh: oh, ow: ow)
                        y[out] = divisor > 0 ? sum / Double(divisor) : 0
                    }
                }
            }
        }
        return y
    }

    /// x [N, C, H, W], dy [N, C, Ho, Wo] -> dx [N, C, H, W]. Max pooling recomputes each window's
    /// first maximum from x; average pooling spreads dy / divisor over the window's in-image positions.
    public static func poolingBackward(_ g: PoolGeometry, input x: [Double], outputGradient dy: [Double]) throws -> [Double] {
        try validate(g)
        try require(x, count: g.inputShape.count, "pooling input")
        try require(dy, count: g.outputShape.count, "pooling output gradient")
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        var dx = [Double](repeating: 0, count: g.inputShape.count)
        for nc in 0..<(g.batch * g.channels) {
            let plane = nc * H * W
            for oh in 0..<Ho {
                for ow in 0..<Wo {
                    let d = dy[(nc * Ho + oh) * Wo + ow]
                    switch g.kind {
                    case .max:
                        if let i = poolArgMax(g, x, plane: plane, oh: oh, ow: ow) { dx[plane + i] += d }
                    case .average:
                        let divisor = poolDivisor(g, oh: oh, ow: ow)
                        guard divisor > 0 else { continue }
                        let (rows, cols) = poolWindow(g, oh: oh, ow: ow)
                        for ih in rows {
                            for iw in cols { dx[plane + ih * W + iw] += d / Double(divisor) }
                        }
                    }
                }
            }
        }
        return dx
    }
}
