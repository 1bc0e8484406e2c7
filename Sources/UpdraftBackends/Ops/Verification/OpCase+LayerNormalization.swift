// Layer normalization in the verification tools: its case type, its rows of the shared lists (merged
// into `.gradientCheck`, `.quick` and `.full` by OpCase+Lists.swift), the finite-difference problem and
// the backend comparison.
import UpdraftCore

/// Layer normalization of `rows` groups of `groupSize` values with gamma and beta drawn per case.
public struct LayerNormalizationCase: VerifiedOp {
    public var geometry: LayerNormalizationGeometry

    public var opName: String { "layerNormalization" }
    public var summary: String { geometry.description }

    /// x and dy's finite differences; gamma and beta are frozen (not differentiated), drawn away from zero.
    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? {
        let g = geometry
        let gamma = GradientCheck.uniform(g.groupSize, 0.5...1.5, &rng), beta = GradientCheck.uniform(g.groupSize, -1...1, &rng)
        return GradientCheck.Problem(
            inputs: [GradientCheck.Input("x", GradientCheck.uniform(g.count, -1...1, &rng)),
                     GradientCheck.Input("gamma", gamma, differentiable: false),
                     GradientCheck.Input("beta", beta, differentiable: false)],
            forward: { v in try Reference.layerNormalizationForward(g, input: v[0], gamma: v[1], beta: v[2]) },
            backward: { v, dy in [try Reference.layerNormalizationBackward(g, input: v[0], gamma: v[1], outputGradient: dy), nil, nil] })
    }

    public func compare(in s: inout ComparisonSession) throws {
        let g = geometry, backend = s.backend
        let gammaValues = s.values(g.groupSize, 0.5...1.5), betaValues = s.values(g.groupSize)
        let gamma = try s.upload(gammaValues), beta = try s.upload(betaValues)
        let (gammaRef, betaRef) = (asDouble(gammaValues), asDouble(betaValues))
        try s.compareOneInput(inputCount: g.count, outputCount: g.count,
                              forward: { try backend.layerNormalizationForward(g, input: $0, gamma: gamma, beta: beta, output: $1) },
                              reference: { try Reference.layerNormalizationForward(g, input: $0, gamma: gammaRef, beta: betaRef) },
                              backward: { x, _, dy, dx in
                                  try backend.layerNormalizationBackward(g, input: x, gamma: gamma, outputGradient: dy, inputGradient: dx)
                              },
                              referenceBackward: { x, _, dy in
                                  try Reference.layerNormalizationBackward(g, input: x, gamma: gammaRef, outputGradient: dy)
                              })
    }
}

extension OpCase {
    /// Layer normalization of `rows` groups of `groupSize`.
    static func layerNormalization(rows: Int, groupSize: Int, epsilon: Float = 1e-5, values: InputValues = .uniform) -> OpCase {
        OpCase(LayerNormalizationCase(geometry: LayerNormalizationGeometry(rows: rows, groupSize: groupSize, epsilon: epsilon)),
               values: values)
    }
}

extension Array where Element == OpCase {
    /// A group of one (xhat is 0: y is beta, dx is 0), odd groups, one row and several, a large epsilon.
    static var layerNormalizationGradientCheck: [OpCase] {
        [.layerNormalization(rows: 3, groupSize: 7), .layerNormalization(rows: 1, groupSize: 12, epsilon: 0.01),
         .layerNormalization(rows: 2, groupSize: 1)]
    }

    static var layerNormalizationQuick: [OpCase] { [.layerNormalization(rows: 6, groupSize: 33)] }

    /// Groups below, at and past the OpenCL work-group size, one long row, a batch of short rows, ties.
    static var layerNormalizationFull: [OpCase] {
        [.layerNormalization(rows: 3, groupSize: 65), .layerNormalization(rows: 1, groupSize: 1000),
         .layerNormalization(rows: 63, groupSize: 16), .layerNormalization(rows: 7, groupSize: 256),
         .layerNormalization(rows: 1, groupSize: 1), .layerNormalization(rows: 5, groupSize: 31, values: .coarse)]
    }
}
