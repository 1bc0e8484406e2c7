// Reductions, forward and backward, by groups: every output element's input elements gathered in
// row-major order, then the kind's table row (Ops/Reduce.swift) applied to the group.

extension Reference {
    /// The input positions of each output element's group, in row-major order.
    static func reductionGroups(_ g: ReductionGeometry) -> [[Int]] {
        var groups = [[Int]](repeating: [], count: g.outputCount)
        for i in 0..<g.inputCount { groups[broadcastIndex(coordinates(i, g.inputDims), g.outputDims)].append(i) }
        return groups
    }

    /// y = scale * the kind's value over the input elements of each output element.
    public static func reduce(_ g: ReductionGeometry, input x: [Double]) throws -> [Double] {
        try g.validate()
        try require(x, count: g.inputCount, "reduction input \(g.inputDims)")
        return reductionGroups(g).map { group in g.scale * g.kind.referenceValue(group.map { x[$0] }, offset: g.offset) }
    }

    /// dx = scale * dy of its output element times the kind's derivative at that element (for max:
    /// dy at the first maximum of each group in row-major order, 0 elsewhere). Throws for a kind
    /// without a gradient.
    public static func reduceBackward(_ g: ReductionGeometry, input x: [Double], outputGradient dy: [Double]) throws -> [Double] {
        try g.validate()
        try g.requireGradient()
        try require(x, count: g.inputCount, "reduction input \(g.inputDims)")
        try require(dy, count: g.outputCount, "reduction output gradient \(g.outputDims)")
        var dx = [Double](repeating: 0, count: g.inputCount)
        for (j, group) in reductionGroups(g).enumerated() {
            let values = group.map { x[$0] }
            let y = g.kind.referenceValue(values, offset: g.offset)
            guard let d = g.kind.referenceDerivative(values, y: y, offset: g.offset) else { try g.requireGradient(); continue }
            for (i, di) in zip(group, d) { dx[i] = g.scale * dy[j] * di }
        }
        return dx
    }
}
