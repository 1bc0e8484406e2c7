// Layout ops: each op's direct definition, and the strided copy the backends compose the ones that
// move values from.
//
// Transpose: x [N, d_0, ..., d_{R-1}] -> y [N, d_perm[0], ..., d_perm[R-1]]; for every output
// multi-index (n, o_0, ..., o_{R-1}): y[n, o] = x[n, i] with i_perm[k] = o_k. Backward is the
// inverse permutation of dy (TransposeGeometry.inverse). constantPad: y [N, d_k + before_k + after_k]
// holds x where before <= o < before + d on every axis and the value elsewhere; dx is dy's interior.
// concatND with interleave: K inputs [N, C, S] -> y [N, K * C, S], y[n, c * K + k, s] = x_k[n, c, s];
// dx_k is every K-th channel of dy from k. softmaxND and concatND are the softmax and
// concat references on (outer, axis, inner) geometries (Ops/Layout.swift). `layoutForward` /
// `layoutBackward` take any LayoutOp to its definition here; the backends run the same ops as
// strided copies (LayoutOp.execution), so a comparison with these checks the copies' geometry.

extension Reference {
    /// x [N, dims] -> y [N, outputDims]: y's axis k is x's axis perm[k].
    public static func transpose(_ g: TransposeGeometry, input x: [Double]) throws -> [Double] {
        try g.validate("reference transpose")
        try require(x, count: g.count, "transpose input")
        let rank = g.dims.count
        let outDims = g.outputDims
        var y = [Double](repeating: 0, count: g.count)
        var o = [Int](repeating: 0, count: rank)   // output multi-index
        for n in 0..<g.batch {
            for flat in 0..<g.exampleCount {
                var r = flat
                for k in stride(from: rank - 1, through: 0, by: -1) { o[k] = r % outDims[k]; r /= outDims[k] }
                var i = [Int](repeating: 0, count: rank)
                for k in 0..<rank { i[g.perm[k]] = o[k] }
                var src = 0
                for a in 0..<rank { src = src * g.dims[a] + i[a] }
                y[n * g.exampleCount + flat] = x[n * g.exampleCount + src]
            }
        }
        return y
    }

    /// dy [N, outputDims] -> dx [N, dims]: the inverse permutation.
    public static func transposeBackward(_ g: TransposeGeometry, outputGradient dy: [Double]) throws -> [Double] {
        try transpose(g.inverse, input: dy)
    }

    /// Where each of an example's `dims` values lands in its padded copy (row-major flat indices), and
    /// the padded copy's size: constantPad and its backward pass move values along the same map.
    private static func paddedOffsets(dims: [Int], before: [Int], after: [Int]) -> (offsets: [Int], paddedCount: Int) {
        let out = dims.indices.map { dims[$0] + before[$0] + after[$0] }
        var i = [Int](repeating: 0, count: dims.count)
        let offsets = (0..<dims.reduce(1, *)).map { flat in
            var r = flat
            for k in stride(from: dims.count - 1, through: 0, by: -1) { i[k] = r % dims[k]; r /= dims[k] }
            var o = 0
            for k in i.indices { o = o * out[k] + i[k] + before[k] }
            return o
        }
        return (offsets, out.reduce(1, *))
    }

    /// x [N, dims] -> y [N, dims + before + after]: y[n, o] = x[n, o - before] inside, `value` on the border.
    public static func constantPad(batch: Int, dims: [Int], before: [Int], after: [Int], value: Double,
                                   input x: [Double]) throws -> [Double] {
        try requireSizes([("batch", batch)] + dims.map { ("size", $0) } + (before + after).map { ("padding", $0) }, op: "constantPad")
        let count = dims.reduce(1, *)
        try require(x, count: batch * count, "constantPad input")
        let (offsets, outCount) = paddedOffsets(dims: dims, before: before, after: after)
        var y = [Double](repeating: value, count: batch * outCount)
        for n in 0..<batch {
            for (i, o) in offsets.enumerated() { y[n * outCount + o] = x[n * count + i] }
        }
        return y
    }

    /// dy [N, dims + before + after] -> dx [N, dims]: dx[n, i] = dy[n, i + before] (the border has no input).
    public static func constantPadBackward(batch: Int, dims: [Int], before: [Int], after: [Int],
                                           outputGradient dy: [Double]) throws -> [Double] {
        try requireSizes([("batch", batch)] + dims.map { ("size", $0) } + (before + after).map { ("padding", $0) }, op: "constantPad backward")
        let (offsets, outCount) = paddedOffsets(dims: dims, before: before, after: after)
        try require(dy, count: batch * outCount, "constantPad output gradient")
        var dx: [Double] = []
        dx.reserveCapacity(batch * offsets.count)
        for n in 0..<batch {
            for o in offsets { dx.append(dy[n * outCount + o]) }
        }
        return dx
    }

    /// K inputs [N, C, S] -> y [N, K * C, S] with y[n, c * K + k, s] = x_k[n, c, s] (concatND interleave).
    public static func concatInterleaved(_ inputs: [[Double]], channels C: Int, batch N: Int, spatial S: Int) throws -> [Double] {
        try requireSizes([("inputs", inputs.count), ("channels", C), ("batch", N), ("spatial size", S)], op: "interleaved concat")
        for (k, x) in inputs.enumerated() { try require(x, count: N * C * S, "interleaved concat input \(k)") }
        let K = inputs.count
        var y = [Double](repeating: 0, count: N * K * C * S)
        for n in 0..<N {
            for c in 0..<C {
                for k in 0..<K {
                    for s in 0..<S { y[(n * K * C + c * K + k) * S + s] = inputs[k][(n * C + c) * S + s] }
                }
            }
        }
        return y
    }

    /// dy [N, K * C, S] -> K gradients [N, C, S]: dx_k[n, c, s] = dy[n, c * K + k, s].
    public static func concatInterleavedBackward(_ dy: [Double], inputs K: Int, channels C: Int, batch N: Int, spatial S: Int) throws -> [[Double]] {
        try requireSizes([("inputs", K), ("channels", C), ("batch", N), ("spatial size", S)], op: "interleaved concat backward")
        try require(dy, count: N * K * C * S, "interleaved concat output gradient")
        return (0..<K).map { k in
            var dx: [Double] = []
            dx.reserveCapacity(N * C * S)
            for n in 0..<N {
                for c in 0..<C {
                    let row: Int = n * K * C + c * K + k
                    dx += dy[(row * S)..<((row + 1) * S)]
                }
            }
            return dx
        }
    }

    /// The strided copy (Ops/Layout.swift `StridedCopy`): writes the box of `source` into its view of
    /// `destination`, leaving the rest of `destination` as it is.
    public static func stridedCopy(_ g: StridedCopy, source x: [Double], into y: inout [Double]) throws {
        try g.validate("reference strided copy")
        for (what, have, need) in [("source", x.count, g.sourceExtent), ("destination", y.count, g.destinationExtent)] where have < need {
            throw UpdraftError(.invalidArgument, "reference: strided copy \(what) has \(have) values, its view of \(g.dims) reaches \(need)",
                               hint: "check the shapes passed with the geometry")
        }
        var index = [Int](repeating: 0, count: g.dims.count)
        for _ in 0..<g.count {
            var src = g.source.offset, dst = g.destination.offset
            for k in index.indices { src += index[k] * g.source.strides[k]; dst += index[k] * g.destination.strides[k] }
            y[dst] = x[src]
            var k = index.count - 1
            while k >= 0 {
                index[k] += 1
                if index[k] < g.dims[k] { break }
                index[k] = 0
                k -= 1
            }
        }
    }

    /// The forward pass of a layout op for `batch` examples, from its definition (an alias returns its input).
    public static func layoutForward(_ op: LayoutOp, batch: Int, inputs: [[Double]]) throws -> [Double] {
        switch op {
        case .alias: return inputs[0]
        case let .transpose(g, _): return try transpose(g.withBatch(batch), input: inputs[0])
        case .softmaxND: return try softmaxForward(op.softmaxGeometry(batch: batch)!, input: inputs[0])
        case let .concatND(outer, channels, inner, true):
            guard Set(channels).count <= 1 else {
                throw UpdraftError(.invalidArgument, "reference interleaved concat: the inputs' sizes \(channels) along the axis differ")
            }
            return try concatInterleaved(inputs, channels: channels.first ?? 0, batch: batch * outer, spatial: inner)
        case let .concatND(outer, channels, inner, false):
            return try concatForward(inputs, channels: channels, batch: batch * outer, spatial: inner)
        case let .constantPad(dims, before, after, value):
            return try constantPad(batch: batch, dims: dims, before: before, after: after, value: Double(value), input: inputs[0])
        }
    }

    /// Every input's gradient of a layout op for `batch` examples, given its inputs and the output's gradient.
    public static func layoutBackward(_ op: LayoutOp, batch: Int, inputs: [[Double]], outputGradient dy: [Double]) throws -> [[Double]] {
        switch op {
        case .alias: return [dy]
        case let .transpose(g, _): return [try transposeBackward(g.withBatch(batch), outputGradient: dy)]
        case .softmaxND:
            let g = op.softmaxGeometry(batch: batch)!
            return [try softmaxBackward(g, output: softmaxForward(g, input: inputs[0]), outputGradient: dy)]
        case let .concatND(outer, channels, inner, true):
            guard Set(channels).count <= 1 else {
                throw UpdraftError(.invalidArgument, "reference interleaved concat backward: the inputs' sizes \(channels) along the axis differ")
            }
            return try concatInterleavedBackward(dy, inputs: channels.count, channels: channels.first ?? 0, batch: batch * outer, spatial: inner)
        case let .concatND(outer, channels, inner, false):
            return try concatBackward(dy, channels: channels, batch: batch * outer, spatial: inner)
        case let .constantPad(dims, before, after, _):
            return [try constantPadBackward(batch: batch, dims: dims, before: before, after: after, outputGradient: dy)]
        }
    }
}
