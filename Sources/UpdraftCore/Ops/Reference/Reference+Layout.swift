// Layout ops: the permuted copy (transpose / permute).
//
// Transpose: x [N, d_0, ..., d_{R-1}] -> y [N, d_perm[0], ..., d_perm[R-1]]; for every output
// multi-index (n, o_0, ..., o_{R-1}): y[n, o] = x[n, i] with i_perm[k] = o_k. Backward is the
// inverse permutation of dy (TransposeGeometry.inverse). softmaxND and concatND are the softmax and
// concat references on (outer, axis, inner) geometries (Ops/Layout.swift).

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
}
