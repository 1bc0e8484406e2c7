// Convolution (Core ML ConvolutionLayerParams, not deconvolution).
//
// x [N, Cin, H, W], w [Cout, Cin/G, kH, kW], b [Cout], y [N, Cout, Ho, Wo], G = groups.
// Output channel co belongs to group co / (Cout/G) and reads input channels
// group * (Cin/G) ..< (group + 1) * (Cin/G). Output (oh, ow) reads input row
// ih = oh * strideH - padTop + kh * dilationH and column iw = ow * strideW - padLeft + kw * dilationW;
// positions outside the input are zero padding. All three directions walk the same loop nest.

extension Reference {
    /// Checks the parts of a geometry the loops rely on (a geometry from `ConvolutionSpec.geometry`
    /// always passes; this guards hand-built ones).
    static func validate(_ g: ConvGeometry) throws {
        try requireSizes([("batch", g.batch), ("input height", g.inHeight), ("input width", g.inWidth),
                          ("output height", g.outHeight), ("output width", g.outWidth)], op: "convolution")
        try requireSizes([("input channels", g.inChannels), ("output channels", g.outChannels),
                          ("kernel height", g.kernelH), ("kernel width", g.kernelW),
                          ("stride height", g.strideH), ("stride width", g.strideW),
                          ("dilation height", g.dilationH), ("dilation width", g.dilationW),
                          ("groups", g.groups)], positive: true, op: "convolution")
        guard g.inChannels % g.groups == 0, g.outChannels % g.groups == 0 else {
            throw UpdraftError(.invalidArgument,
                "reference convolution: groups \(g.groups) must divide \(g.inChannels) input and \(g.outChannels) output channels")
        }
    }

    /// The output channel of y's index `o`.
    private static func outputChannel(_ g: ConvGeometry, _ o: Int) -> Int { o / (g.outHeight * g.outWidth) % g.outChannels }

    /// Calls `tap(o, i, k)` for every in-bounds tap: output index o reads input index i through weight
    /// index k. The one loop nest all three directions walk, so each sums in the same order.
    private static func forEachTap(_ g: ConvGeometry, _ tap: (_ o: Int, _ i: Int, _ k: Int) -> Void) {
        let (N, Cin, H, W) = (g.batch, g.inChannels, g.inHeight, g.inWidth)
        let (Cout, Ho, Wo, kH, kW) = (g.outChannels, g.outHeight, g.outWidth, g.kernelH, g.kernelW)
        let cinG = Cin / g.groups, coutG = Cout / g.groups
        for n in 0..<N {
            for co in 0..<Cout {
                let group = co / coutG
                for oh in 0..<Ho {
                    for ow in 0..<Wo {
                        let o = ((n * Cout + co) * Ho + oh) * Wo + ow
                        for ci in 0..<cinG {
                            let c = group * cinG + ci  // input channel
                            for kh in 0..<kH {
                                let ih = oh * g.strideH - g.padTop + kh * g.dilationH
                                if ih < 0 || ih >= H { continue }
                                for kw in 0..<kW {
                                    let iw = ow * g.strideW - g.padLeft + kw * g.dilationW
                                    if iw < 0 || iw >= W { continue }
                                    tap(o, ((n * Cin + c) * H + ih) * W + iw, ((co * cinG + ci) * kH + kh) * kW + kw)
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// y = conv(x, w) + b, then max(0, y) when `fusedReLU`.
    public static func convolutionForward(_ g: ConvGeometry, input x: [Double], weights w: [Double],
                                          bias b: [Double]?, fusedReLU: Bool) throws -> [Double] {
        try convolutionForward(g, input: x, weights: w, bias: b, epilogue: fusedReLU ? .relu : nil)
    }

    /// y = conv(x, w) + b (+ `residual`, of y's shape: a residual add fused into the convolution), then
    /// the `epilogue` function (per-channel constants by output channel).
    /// `bias` nil means no bias. x [N, Cin, H, W], w [Cout, Cin/G, kH, kW], b [Cout] -> y [N, Cout, Ho, Wo].
    public static func convolutionForward(_ g: ConvGeometry, input x: [Double], weights w: [Double],
                                          bias b: [Double]?, residual: [Double]? = nil, epilogue: Activation? = nil) throws -> [Double] {
        try validate(g)
        if let residual { try require(residual, count: g.outputShape.count, "convolution residual") }
        try require(x, count: g.inputShape.count, "convolution input")
        try require(w, count: g.weightShape.count, "convolution weights")
        if let b { try require(b, count: g.outChannels, "convolution bias") }
        var y = [Double](repeating: 0, count: g.outputShape.count)
        if let b { for o in y.indices { y[o] = b[outputChannel(g, o)] } }
        forEachTap(g) { o, i, k in y[o] += x[i] * w[k] }
        if let residual { for i in y.indices { y[i] += residual[i] } }
        guard let epilogue else { return y }
        return try activationForward(epilogue, ActivationGeometry(shape: g.outputShape), input: y)
    }

    /// dx = the transpose of the convolution applied to dy (no ReLU: mask dy first for a fused ReLU).
    /// dy [N, Cout, Ho, Wo], w [Cout, Cin/G, kH, kW] -> dx [N, Cin, H, W].
    public static func convolutionBackwardData(_ g: ConvGeometry, outputGradient dy: [Double],
                                               weights w: [Double]) throws -> [Double] {
        try validate(g)
        try require(dy, count: g.outputShape.count, "convolution output gradient")
        try require(w, count: g.weightShape.count, "convolution weights")
        var dx = [Double](repeating: 0, count: g.inputShape.count)
        forEachTap(g) { o, i, k in dx[i] += dy[o] * w[k] }
        return dx
    }

    /// dw = sum over (n, oh, ow) of dy * x at the tap's input position; db[co] = sum of dy[:, co, :, :].
    /// x [N, Cin, H, W], dy [N, Cout, Ho, Wo] -> dw [Cout, Cin/G, kH, kW], db [Cout].
    public static func convolutionBackwardWeights(_ g: ConvGeometry, input x: [Double],
                                                  outputGradient dy: [Double]) throws -> (weights: [Double], bias: [Double]) {
        try validate(g)
        try require(x, count: g.inputShape.count, "convolution input")
        try require(dy, count: g.outputShape.count, "convolution output gradient")
        var dw = [Double](repeating: 0, count: g.weightShape.count)
        var db = [Double](repeating: 0, count: g.outChannels)
        for o in dy.indices { db[outputChannel(g, o)] += dy[o] }
        forEachTap(g) { o, i, k in dw[k] += dy[o] * x[i] }
        return (dw, db)
    }
}
