// The spatial ops in the verification tools: case names, the case lists' rows (merged into
// `.gradientCheck`, `.quick` and `.full`), the finite-difference problem and the backend comparison.
import UpdraftCore

extension SpatialOp {
    /// The parameters in a few words, for case names.
    func summary(_ input: Shape) -> String {
        switch self {
        case let .padding(p):
            let mode: String
            switch p.mode {
            case let .constant(v): mode = "constant \(v)"
            case .reflection: mode = "reflection"
            case .replication: mode = "replication"
            }
            return "\(mode) \(input) pad \(p.top)/\(p.bottom)/\(p.left)/\(p.right)"
        case let .resampling(r): return r.summary(input)
        case let .lrn(l): return "\(input) size \(l.localSize) alpha \(l.alpha) beta \(l.beta) k \(l.k)"
        case let .l2Normalize(eps): return "\(input) eps \(eps)"
        case let .instanceNormalization(eps): return "\(input) eps \(eps)"
        }
    }
}

extension OpCase {
    static func padding(_ mode: PaddingMode, _ input: Shape, _ top: Int, _ bottom: Int, _ left: Int, _ right: Int) -> OpCase {
        OpCase(.spatial(.padding(PaddingSpec(mode: mode, top: top, bottom: bottom, left: left, right: right)), input: input))
    }
    static func lrn(_ input: Shape, size: Int, alpha: Float, beta: Float, k: Float) -> OpCase {
        OpCase(.spatial(.lrn(LRNSpec(alpha: alpha, beta: beta, k: k, localSize: size)), input: input))
    }
    static func l2Normalize(_ input: Shape, epsilon: Float = 1e-6) -> OpCase {
        OpCase(.spatial(.l2Normalize(epsilon: epsilon), input: input))
    }
    static func instanceNormalization(_ input: Shape, epsilon: Float = 1e-5) -> OpCase {
        OpCase(.spatial(.instanceNormalization(epsilon: epsilon), input: input))
    }
}

extension Array where Element == OpCase {
    /// Small shapes: every padding mode with asymmetric amounts, the resampling rows
    /// (OpCase+Resample.swift), LRN with odd, even and size-1 windows, L2 and instance normalization.
    static var spatialGradientCheck: [OpCase] {
        [
            .padding(.constant(0.5), [3, 2, 4, 5], 1, 2, 0, 3),
            .padding(.reflection, [1, 2, 5, 4], 2, 1, 3, 1),
            .padding(.replication, [1, 2, 3, 4], 2, 3, 1, 4),
        ] + [OpCase].resampleGradientCheck + [
            .lrn([3, 5, 2, 3], size: 3, alpha: 0.5, beta: 0.75, k: 1),
            .lrn([1, 6, 2, 2], size: 4, alpha: 1, beta: 0.6, k: 2),
            .lrn([1, 3, 2, 1], size: 1, alpha: 0.3, beta: 0.5, k: 1),
            .l2Normalize([3, 4, 2, 3]),
            .l2Normalize([1, 7, 1, 1], epsilon: 0.01),
            .instanceNormalization([3, 4, 3, 3]),
            .instanceNormalization([1, 2, 1, 5], epsilon: 0.001),
        ]
    }

    static var spatialQuick: [OpCase] {
        [
            .padding(.reflection, [3, 3, 7, 7], 2, 1, 3, 1),
        ] + [OpCase].resampleQuick + [
            .lrn([3, 7, 5, 5], size: 5, alpha: 0.5, beta: 0.75, k: 1),
            .l2Normalize([3, 7, 5, 5]),
            .instanceNormalization([3, 7, 5, 5]),
        ]
    }

    /// Awkward sizes (1, 7, 31, 32, 33, 63, 65), batch 1 and 3, every mode.
    static var spatialFull: [OpCase] {
        [
            .padding(.constant(-0.5), [3, 7, 31, 33], 1, 2, 3, 4),
            .padding(.reflection, [1, 33, 32, 33], 3, 3, 3, 3),
            .padding(.replication, [1, 7, 65, 63], 1, 0, 0, 2),
            .padding(.reflection, [3, 1, 2, 1], 1, 1, 0, 0),
        ] + [OpCase].resampleFull + [
            .lrn([3, 33, 7, 7], size: 5, alpha: 0.5, beta: 0.75, k: 1),
            .lrn([1, 65, 5, 3], size: 4, alpha: 0.3, beta: 0.5, k: 1.5),
            .lrn([1, 7, 31, 31], size: 5, alpha: 1e-4, beta: 0.75, k: 2),
            .l2Normalize([3, 65, 7, 7]),
            .l2Normalize([1, 1000, 1, 1]),
            .l2Normalize([3, 1, 1, 1]),
            .instanceNormalization([3, 33, 7, 7]),
            .instanceNormalization([1, 7, 65, 63]),
            .instanceNormalization([3, 5, 1, 1]),
        ]
    }
}

/// Padding, resampling, LRN, L2 normalize or instance normalization of an input [N, C, H, W].
public struct SpatialCase: VerifiedOp {
    public var op: SpatialOp
    public var input: Shape

    /// The op's own family name ("padding", "upsample", "lrn", …): `--op` filters on it.
    public var opName: String { op.familyName }
    public var summary: String { op.summary(input) }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? {
        let g = try op.geometry(input: input)
        return GradientCheck.Problem(inputs: [GradientCheck.Input("x", GradientCheck.uniform(g.inputShape.count, -1...1, &rng))],
                                     forward: { v in try Reference.spatialForward(g, input: v[0]) },
                                     backward: { v, dy in
            [try Reference.spatialBackward(g, input: v[0], output: Reference.spatialForward(g, input: v[0]), outputGradient: dy)]
        })
    }

    public func compare(in s: inout ComparisonSession) throws {
        let g = try op.geometry(input: input), backend = s.backend
        try s.compareOneInput(inputCount: g.inputShape.count, outputCount: g.outputShape.count,
                              forward: { try backend.spatialForward(g, input: $0, output: $1) },
                              reference: { try Reference.spatialForward(g, input: $0) },
                              backward: { try backend.spatialBackward(g, input: $0, output: $1, outputGradient: $2, inputGradient: $3) },
                              referenceBackward: { try Reference.spatialBackward(g, input: $0, output: $1, outputGradient: $2) })
    }
}

extension VerifiedOp where Self == SpatialCase {
    public static func spatial(_ op: SpatialOp, input: Shape) -> SpatialCase { SpatialCase(op: op, input: input) }
}
