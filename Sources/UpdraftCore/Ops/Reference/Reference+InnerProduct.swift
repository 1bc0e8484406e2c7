// Inner product (fully connected), Core ML InnerProductLayerParams.
//
// x [N, Cin] (any NCHW input with C*H*W = Cin reads as [N, Cin]), w [Cout, Cin], b [Cout], y [N, Cout].
// y[n, o] = b[o] + sum_i w[o, i] * x[n, i].

extension Reference {
    static func validate(_ g: InnerProductGeometry) throws {
        try requireSizes([("batch", g.batch), ("input channels", g.inputChannels),
                          ("output channels", g.outputChannels)], op: "inner product")
    }

    /// x [N, Cin], w [Cout, Cin], b [Cout] (nil: no bias) -> y [N, Cout], then the `epilogue`
    /// function (per-channel constants by output channel).
    public static func innerProductForward(_ g: InnerProductGeometry, input x: [Double], weights w: [Double],
                                           bias b: [Double]?, epilogue: Activation? = nil) throws -> [Double] {
        try validate(g)
        let (N, Cin, Cout) = (g.batch, g.inputChannels, g.outputChannels)
        try require(x, count: N * Cin, "inner product input")
        try require(w, count: Cout * Cin, "inner product weights")
        if let b { try require(b, count: Cout, "inner product bias") }
        var y = [Double](repeating: 0, count: N * Cout)
        for n in 0..<N {
            for o in 0..<Cout {
                var sum = b?[o] ?? 0
                for i in 0..<Cin {
                    sum += w[o * Cin + i] * x[n * Cin + i]
                }
                y[n * Cout + o] = sum
            }
        }
        guard let epilogue else { return y }
        return try activationForward(epilogue, ActivationGeometry(batch: N, channels: Cout, spatial: 1), input: y)
    }

    /// dx[n, i] = sum_o dy[n, o] * w[o, i].  dy [N, Cout], w [Cout, Cin] -> dx [N, Cin].
    public static func innerProductBackwardData(_ g: InnerProductGeometry, outputGradient dy: [Double],
                                                weights w: [Double]) throws -> [Double] {
        try validate(g)
        let (N, Cin, Cout) = (g.batch, g.inputChannels, g.outputChannels)
        try require(dy, count: N * Cout, "inner product output gradient")
        try require(w, count: Cout * Cin, "inner product weights")
        var dx = [Double](repeating: 0, count: N * Cin)
        for n in 0..<N {
            for i in 0..<Cin {
                var sum = 0.0
                for o in 0..<Cout {
                    sum += dy[n * Cout + o] * w[o * Cin + i]
                }
                dx[n * Cin + i] = sum
            }
        }
        return dx
    }

    /// dw[o, i] = sum_n dy[n, o] * x[n, i]; db[o] = sum_n dy[n, o].
    /// x [N, Cin], dy [N, Cout] -> dw [Cout, Cin], db [Cout].
    public static func innerProductBackwardWeights(_ g: InnerProductGeometry, input x: [Double],
                                                   outputGradient dy: [Double]) throws -> (weights: [Double], bias: [Double]) {
        try validate(g)
        let (N, Cin, Cout) = (g.batch, g.inputChannels, g.outputChannels)
        try require(x, count: N * Cin, "inner product input")
        try require(dy, count: N * Cout, "inner product output gradient")
        var dw = [Double](repeating: 0, count: Cout * Cin)
        var db = [Double](repeating: 0, count: Cout)
        for o in 0..<Cout {
            for n in 0..<N {
                db[o] += dy[n * Cout + o]
            }
            for i in 0..<Cin {
                var sum = 0.0
                for n in 0..<N {
                    sum += dy[n * Cout + o] * x[n * Cin + i]
                }
                dw[o * Cin + i] = sum
            }
        }
        return (dw, db)
    }
}
