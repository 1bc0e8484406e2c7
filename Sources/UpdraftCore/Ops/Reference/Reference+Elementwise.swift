// Concat along channels, frozen channel affine (batchnorm with frozen statistics), element-wise
// add and multiply. Flatten needs no function: in NCHW, [N, C, H, W] and [N, C*H*W] are the same
// memory, forward and backward.

extension Reference {
    /// inputs[i] [N, channels[i], S] -> y [N, sum(channels), S], S = H*W.
    public static func concatForward(_ inputs: [[Double]], channels: [Int], batch N: Int, spatial S: Int) throws -> [Double] {
        try requireConcat(inputs.count, channels: channels, batch: N, spatial: S)
        for (i, x) in inputs.enumerated() { try require(x, count: N * channels[i] * S, "concat input \(i)") }
        let C = channels.reduce(0, +)
        var y = [Double](repeating: 0, count: N * C * S)
        for n in 0..<N {
            var c0 = 0  // first output channel of input i
            for (i, x) in inputs.enumerated() {
                let Ci = channels[i]
                for c in 0..<Ci {
                    for s in 0..<S {
                        y[(n * C + c0 + c) * S + s] = x[(n * Ci + c) * S + s]
                    }
                }
                c0 += Ci
            }
        }
        return y
    }

    /// dy [N, sum(channels), S] -> dx[i] [N, channels[i], S]: each input gets its slice of dy.
    public static func concatBackward(_ dy: [Double], channels: [Int], batch N: Int, spatial S: Int) throws -> [[Double]] {
        try requireConcat(channels.count, channels: channels, batch: N, spatial: S)
        let C = channels.reduce(0, +)
        try require(dy, count: N * C * S, "concat output gradient")
        var dx = channels.map { [Double](repeating: 0, count: N * $0 * S) }
        for n in 0..<N {
            var c0 = 0
            for (i, Ci) in channels.enumerated() {
                for c in 0..<Ci {
                    for s in 0..<S {
                        dx[i][(n * Ci + c) * S + s] = dy[(n * C + c0 + c) * S + s]
                    }
                }
                c0 += Ci
            }
        }
        return dx
    }

    package static func requireConcat(_ inputCount: Int, channels: [Int], batch: Int, spatial: Int) throws {
        guard inputCount == channels.count else {
            throw UpdraftError(.invalidArgument, "concat got \(inputCount) inputs but \(channels.count) channel counts")
        }
        try requireSizes([("batch", batch), ("spatial size", spatial)] + channels.map { ("channel count", $0) }, op: "concat")
    }

    /// y[n, c, s] = scale[c] * x[n, c, s] + shift[c].  x [N, C, S], scale [C], shift [C] -> y [N, C, S].
    public static func channelAffine(_ shape: Shape, input x: [Double], scale: [Double], shift: [Double]) throws -> [Double] {
        let (N, C, S) = (shape.n, shape.c, shape.h * shape.w)
        try require(x, count: N * C * S, "channel affine input \(shape)")
        try require(scale, count: C, "channel affine scale")
        try require(shift, count: C, "channel affine shift")
        var y = [Double](repeating: 0, count: x.count)
        for n in 0..<N {
            for c in 0..<C {
                for s in 0..<S {
                    y[(n * C + c) * S + s] = scale[c] * x[(n * C + c) * S + s] + shift[c]
                }
            }
        }
        return y
    }

    /// dx[n, c, s] = scale[c] * dy[n, c, s] (scale and shift are frozen: no gradient for them).
    public static func channelAffineBackward(_ shape: Shape, outputGradient dy: [Double], scale: [Double]) throws -> [Double] {
        let (N, C, S) = (shape.n, shape.c, shape.h * shape.w)
        try require(dy, count: N * C * S, "channel affine output gradient \(shape)")
        try require(scale, count: C, "channel affine scale")
        var dx = [Double](repeating: 0, count: dy.count)
        for n in 0..<N {
            for c in 0..<C {
                for s in 0..<S {
                    dx[(n * C + c) * S + s] = scale[c] * dy[(n * C + c) * S + s]
                }
            }
        }
        return dx
    }

    /// y = a + b or a * b, element by element.
    public static func elementwise(_ op: ElementwiseOp, _ a: [Double], _ b: [Double]) throws -> [Double] {
        try require(b, count: a.count, "element-wise second operand")
        var y = [Double](repeating: 0, count: a.count)
        for i in 0..<a.count {
            switch op {
            case .add: y[i] = a[i] + b[i]
            case .multiply: y[i] = a[i] * b[i]
            }
        }
        return y
    }

    /// Gradients of `elementwise` (no `Backend` op: an engine builds them from copy and multiply):
    /// add: da = dy, db = dy; multiply: da = dy * b, db = dy * a.
    public static func elementwiseBackward(_ op: ElementwiseOp, _ a: [Double], _ b: [Double],
                                           outputGradient dy: [Double]) throws -> (a: [Double], b: [Double]) {
        try require(b, count: a.count, "element-wise second operand")
        try require(dy, count: a.count, "element-wise output gradient")
        var da = [Double](repeating: 0, count: a.count), db = da
        for i in 0..<a.count {
            switch op {
            case .add: da[i] = dy[i]; db[i] = dy[i]
            case .multiply: da[i] = dy[i] * b[i]; db[i] = dy[i] * a[i]
            }
        }
        return (da, db)
    }
}

extension Reference {
    /// 8-bit image samples to the network's input: y[n, c, s] = scale[c] * x[n, c, s] + shift[c] in
    /// Double (x in 0...255), or y = x without a scaler (`scale` and `shift` nil). Defines `Backend.uploadPixels`.
    public static func pixelsToFloat(_ shape: Shape, pixels: [UInt8], scale: [Double]?, shift: [Double]?) throws -> [Double] {
        let x = pixels.map(Double.init)
        guard let scale, let shift else {
            try require(x, count: shape.count, "pixels \(shape)")
            return x
        }
        return try channelAffine(Shape(n: shape.n, c: shape.c, h: shape.h * shape.w, w: 1), input: x, scale: scale, shift: shift)
    }
}
