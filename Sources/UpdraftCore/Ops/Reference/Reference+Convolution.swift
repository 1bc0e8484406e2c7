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
        let (N, Cin, H, W) = (g.batch, g.inChannels, g.inHeight, g.inWidth)
        let (Cout, Ho, Wo, kH, kW) = (g.outChannels, g.outHeight, g.outWidth, g.kernelH, g.kernelW)
        let cinG = Cin / g.groups, coutG = Cout / g.groups
        var y = [Double](repeating: 0, count: g.outputShape.count)
        for n in 0..<N {
            for co in 0..<Cout {
                let group = co / coutG
                for oh in 0..<Ho {
                    for ow in 0..<Wo {
                        var sum = b?[co] ?? 0
                        for ci in 0..<cinG {
                            let c = group * cinG + ci  // input channel
                            for kh in 0..<kH {
                                let ih = oh * g.strideH - g.padTop + kh * g.dilationH
                                if ih < 0 || ih >= H { continue }
                                for kw in 0..<kW {
                                    let iw = ow * g.strideW - g.padLeft + kw * g.dilationW
                                    if iw < 0 || iw >= W { continue }
                                    sum += x[((n * Cin + c) * H + ih) * W + iw] * w[((co * cinG + ci) * kH + kh) * kW + kw]
                                }
                            }
                        }
                        let i = ((n * Cout + co) * Ho + oh) * Wo + ow
                        y[i] = sum + (residual?[i] ?? 0)
                    }
                }
            }
        }
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
        let (N, Cin, H, W) = (g.batch, g.inChannels, g.inHeight, g.inWidth)
        let (Cout, Ho, Wo, kH, kW) = (g.outChannels, g.outHeight, g.outWidth, g.kernelH, g.kernelW)
        let cinG = Cin / g.groups, coutG = Cout / g.groups
        var dx = [Double](repeating: 0, count: g.inputShape.count)
        for n in 0..<N {
            for co in 0..<Cout {
                let group = co / coutG
                for oh in 0..<Ho {
                    for ow in 0..<Wo {
                        let d = dy[((n * Cout + co) * Ho + oh) * Wo + ow]
                        for ci in 0..<cinG {
                            let c = group * cinG + ci
                            for kh in 0..<kH {
                                let ih = oh * g.strideH - g.padTop + kh * g.dilationH
                                if ih < 0 || ih >= H { continue }
                                for kw in 0..<kW {
                                    let iw = ow * g.strideW - g.padLeft + kw * g.dilationW
                                    if iw < 0 || iw >= W { continue }
                                    dx[((n * Cin + c) * H + ih) * W + iw] += d * w[((co * cinG + ci) * kH + kh) * kW + kw]
                                }
                            }
                        }
                    }
                }
            }
        }
        return dx
    }

    /// dw = sum over (n, oh, ow) of dy * x at the tap's input position; db[co] = sum of dy[:, co, :, :].
    /// x [N, Cin, H, W], dy [N, Cout, Ho, Wo] -> dw [Cout, Cin/G, kH, kW], db [Cout].
    public static func convolutionBackwardWeights(_ g: ConvGeometry, input x: [Double],
                                                  outputGradient dy: [Double]) throws -> (weights: [Double], bias: [Double]) {
        try validate(g)
        try require(x, count: g.inputShape.count, "convolution input")
        try require(dy, count: g.outputShape.count, "convolution output gradient")
        let (N, Cin, H, W) = (g.batch, g.inChannels, g.inHeight, g.inWidth)
        let (Cout, Ho, Wo, kH, kW) = (g.outChannels, g.outHeight, g.outWidth, g.kernelH, g.kernelW)
        let cinG = Cin / g.groups, coutG = Cout / g.groups
        var dw = [Double](repeating: 0, count: g.weightShape.count)
        var db = [Double](repeating: 0, count: Cout)
        for n in 0..<N {
            for co in 0..<Cout {
                let group = co / coutG
                for oh in 0..<Ho {
                    for ow in 0..<Wo {
                        let d = dy[((n * Cout + co) * Ho + oh) * Wo + ow]
                        db[co] += d
                        for ci in 0..<cinG {
                            let c = group * cinG + ci
                            for kh in 0..<kH {
                                let ih = oh * g.strideH - g.padTop + kh * g.dilationH
                                if ih < 0 || ih >= H { continue }
                                for kw in 0..<kW {
                                    let iw = ow * g.strideW - g.padLeft + kw * g.dilationW
                                    if iw < 0 || iw >= W { continue }
                                    dw[((co * cinG + ci) * kH + kh) * kW + kw] += d * x[((n * Cin + c) * H + ih) * W + iw]
                                }
                            }
                        }
                    }
                }
            }
        }
        return (dw, db)
    }
}
