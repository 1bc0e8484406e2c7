// The layout ops in the verification tools: the transpose's finite-difference problem and its
// backend comparison (forward against the reference, backward = the inverse permutation). softmaxND
// and concatND run the softmax and concat kernels; their cases use those kinds on (outer, axis,
// inner) geometries (OpCase+Lists).
import UpdraftCore

extension GradientCheck {
    static func transposeProblem(_ g: TransposeGeometry, rng: inout SplitMix64) throws -> Problem {
        try g.validate("transpose case")
        return Problem(inputs: [Input("x", uniform(g.count, -1...1, &rng))],
                       forward: { v in try Reference.transpose(g, input: v[0]) },
                       backward: { _, dy in [try Reference.transposeBackward(g, outputGradient: dy)] })
    }
}

extension ComparisonSession {
    mutating func compareTranspose(_ g: TransposeGeometry) throws {
        let x = values(g.count), dy = values(g.count)
        let y = try output(g.count)
        try backend.transpose(g, input: try upload(x), output: y)
        try record("y", y, Reference.transpose(g, input: asDouble(x)), tolerance: .exact)
        let dx = try output(g.count)
        try backend.transpose(g.inverse, input: try upload(dy), output: dx)
        try record("dx", dx, Reference.transposeBackward(g, outputGradient: asDouble(dy)), tolerance: .exact)
    }
}

extension OpCase {
    /// A transpose case: `batch` examples of `dims`, output axis i = input axis perm[i].
    public static func transpose(batch: Int, _ dims: [Int], perm: [Int]) -> OpCase {
        OpCase(.transpose(TransposeGeometry(batch: batch, dims: dims, perm: perm)))
    }

    /// softmaxND over `axis` of one example's `dims` (batch `batch`), as the executor runs it.
    public static func softmaxND(batch: Int, _ dims: [Int], axis: Int) -> OpCase {
        let g = SoftmaxGeometry(batch: batch * dims[..<axis].reduce(1, *), channels: dims[axis],
                                spatial: dims[(axis + 1)...].reduce(1, *))
        return OpCase(.softmax(g), name: "ND n\(batch) \(dims) axis \(axis) → [\(g.batch), \(g.channels), \(g.spatial)]")
    }

    /// concatND of inputs that differ only along `axis` (sizes `sizes`), as the executor runs it.
    public static func concatND(batch: Int, _ dims: [Int], axis: Int, sizes: [Int]) -> OpCase {
        let outer = batch * dims[..<axis].reduce(1, *), inner = dims[(axis + 1)...].reduce(1, *)
        return OpCase(.concat(channels: sizes, batch: outer, spatial: inner),
                      name: "ND n\(batch) \(dims) axis \(axis) sizes \(sizes)")
    }

    /// The layout cases of each list (appended to `.gradientCheck`, `.quick` and `.full`).
    static var layoutGradientCheck: [OpCase] {
        [.transpose(batch: 2, [3, 4], perm: [1, 0]),
         .transpose(batch: 1, [2, 3, 1, 4], perm: [3, 0, 2, 1]),
         .transpose(batch: 3, [2, 1, 3, 2, 2], perm: [0, 2, 1, 4, 3]),
         .softmaxND(batch: 2, [3, 4, 2], axis: 1),
         .concatND(batch: 2, [2, 3, 2], axis: 2, sizes: [2, 1, 3])]
    }

    static var layoutQuick: [OpCase] {
        [.transpose(batch: 3, [7, 5, 3], perm: [2, 0, 1]),
         .softmaxND(batch: 3, [5, 7, 3], axis: 1),
         .concatND(batch: 3, [3, 5, 7], axis: 1, sizes: [2, 5])]
    }

    static var layoutFull: [OpCase] {
        [.transpose(batch: 1, [1], perm: [0]),
         .transpose(batch: 3, [33, 65], perm: [1, 0]),
         .transpose(batch: 2, [7, 31, 33], perm: [0, 2, 1]),
         .transpose(batch: 1, [2, 3, 5, 7, 11], perm: [4, 2, 0, 3, 1]),
         .transpose(batch: 3, [2, 7, 1, 9, 4, 3, 5], perm: [6, 0, 5, 2, 1, 4, 3]),
         .transpose(batch: 2, [4, 6, 7, 7], perm: [1, 0, 2, 3]),   // channel shuffle [g, C/g, H, W]
         .transpose(batch: 1, [3, 65, 63], perm: [1, 2, 0]),       // CHW -> HWC
         .softmaxND(batch: 3, [7, 33, 5], axis: 1),
         .softmaxND(batch: 1, [65, 3], axis: 0),
         .softmaxND(batch: 2, [3, 5, 63], axis: 2),
         .concatND(batch: 3, [5, 7, 33], axis: 2, sizes: [1, 31, 33]),
         .concatND(batch: 1, [65, 3], axis: 0, sizes: [63, 1, 1])]
    }
}
