// Pooling in the verification tools: the case, its builders, the finite-difference problem (max
// pooling on distinct values, so no window has a near-tie within the step) and the comparison.
import UpdraftCore

/// Max or average pooling (or global pooling) of an input [N, C, H, W].
public struct PoolingCase: VerifiedOp {
    public var spec: PoolingSpec
    public var input: Shape

    public var opName: String { "pooling" }

    public var summary: String {
        let s = spec, kind = s.kind == .max ? "max" : "avg"
        if s.global { return "global \(kind) \(input)" }
        var t = "\(kind) \(input) k\(s.kernelH)x\(s.kernelW) s\(s.strideH)x\(s.strideW)"
        switch s.padding {
        case let .valid(top, bottom, left, right) where top + bottom + left + right > 0:
            t += " pad \(top)/\(bottom)/\(left)/\(right)"
        case .valid: break
        case let .same(mode): t += mode == .bottomRightHeavy ? " same" : " same-topleft"
        case let .includeLastPixel(h, w): t += " ceil pad \(h)/\(w)"
        }
        if s.kind == .average { t += s.excludePadding ? " exclude-pad" : " include-pad" }
        return t
    }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? {
        let g = try spec.geometry(input: input)
        let x = g.kind == .max ? GradientCheck.distinct(g.inputShape.count, &rng)
                               : GradientCheck.uniform(g.inputShape.count, -1...1, &rng)
        return GradientCheck.Problem(inputs: [GradientCheck.Input("x", x)],
                                     forward: { v in try Reference.poolingForward(g, input: v[0]) },
                                     backward: { v, dy in [try Reference.poolingBackward(g, input: v[0], outputGradient: dy)] })
    }

    public func compare(in s: inout ComparisonSession) throws {
        let g = try spec.geometry(input: input), backend = s.backend
        try s.compareOneInput(inputCount: g.inputShape.count, outputCount: g.outputShape.count,
                              forward: { try backend.poolingForward(g, input: $0, output: $1) },
                              reference: { try Reference.poolingForward(g, input: $0) },
                              backward: { try backend.poolingBackward(g, input: $0, output: $1, outputGradient: $2, inputGradient: $3) },
                              referenceBackward: { x, _, dy in try Reference.poolingBackward(g, input: x, outputGradient: dy) })
    }
}

extension VerifiedOp where Self == PoolingCase {
    /// Pooling of `input` as `spec` describes.
    public static func pooling(_ spec: PoolingSpec, input: Shape) -> PoolingCase { PoolingCase(spec: spec, input: input) }
}

extension OpCase {
    /// A max or average pooling case; no padding and padding excluded from averages by default.
    public static func pooling(_ kind: PoolingKind, _ input: Shape, kernel: (Int, Int), stride: (Int, Int),
                               padding: PoolingPadding = .none, excludePadding: Bool = true,
                               values: InputValues = .uniform) -> OpCase {
        OpCase(.pooling(PoolingSpec(kind: kind, kernelH: kernel.0, kernelW: kernel.1, strideH: stride.0, strideW: stride.1,
                                    padding: padding, excludePadding: excludePadding), input: input), values: values)
    }

    /// A global max or average pooling case (each plane pooled to 1x1).
    public static func globalPooling(_ kind: PoolingKind, _ input: Shape, values: InputValues = .uniform) -> OpCase {
        OpCase(.pooling(PoolingSpec(kind: kind, global: true), input: input), values: values)
    }
}
