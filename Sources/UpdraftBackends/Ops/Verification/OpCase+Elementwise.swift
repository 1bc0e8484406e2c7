// Element-wise ops in the verification tools: same-shape add and multiply, and the per-channel
// affine map (a frozen batchnorm).
import UpdraftCore

/// An element-wise op on `count` values of same-shape operands.
public struct ElementwiseCase: VerifiedOp {
    public var op: ElementwiseOp
    public var count: Int

    public var opName: String { "elementwise" }
    public var summary: String { "\(op == .add ? "add" : "multiply") ×\(count)" }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? {
        let op = self.op
        return GradientCheck.Problem(inputs: [GradientCheck.Input("a", GradientCheck.uniform(count, -1...1, &rng)),
                                              GradientCheck.Input("b", GradientCheck.uniform(count, -1...1, &rng))],
                                     forward: { v in try Reference.elementwise(op, v[0], v[1]) },
                                     backward: { v, dy in
            let (da, db) = try Reference.elementwiseBackward(op, v[0], v[1], outputGradient: dy)
            return [da, db]
        })
    }

    public func compare(in s: inout ComparisonSession) throws {
        let a = s.values(count), b = s.values(count)
        let y = try s.output(count)
        try s.backend.elementwise(op, try s.upload(a), try s.upload(b), output: y, count: count)
        try s.record("y", y, Reference.elementwise(op, asDouble(a), asDouble(b)))
    }
}

/// y[c] = scale[c] * x[c] + shift[c] over an NCHW shape (frozen batchnorm), forward and backward.
public struct ChannelAffineCase: VerifiedOp {
    public var shape: Shape

    public var opName: String { "channelAffine" }
    public var summary: String { "\(shape)" }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? {
        let shape = self.shape
        return GradientCheck.Problem(inputs: [
            GradientCheck.Input("x", GradientCheck.uniform(shape.count, -1...1, &rng)),
            GradientCheck.Input("scale", GradientCheck.uniform(shape.c, 0.5...1.5, &rng), differentiable: false),
            GradientCheck.Input("shift", GradientCheck.uniform(shape.c, -1...1, &rng), differentiable: false),
        ], forward: { v in
            try Reference.channelAffine(shape, input: v[0], scale: v[1], shift: v[2])
        }, backward: { v, dy in
            [try Reference.channelAffineBackward(shape, outputGradient: dy, scale: v[1]), nil, nil]
        })
    }

    public func compare(in s: inout ComparisonSession) throws {
        let x = s.values(shape.count), scale = s.values(shape.c, 0.5...1.5), shift = s.values(shape.c)
        let dy = s.values(shape.count)
        let scaleBuffer = try s.upload(scale)
        let y = try s.output(shape.count)
        try s.backend.channelAffine(shape, input: try s.upload(x), scale: scaleBuffer, shift: try s.upload(shift), output: y)
        try s.record("y", y, Reference.channelAffine(shape, input: asDouble(x), scale: asDouble(scale), shift: asDouble(shift)))

        let dx = try s.output(shape.count)
        try s.backend.channelAffineBackward(shape, outputGradient: try s.upload(dy), scale: scaleBuffer, inputGradient: dx)
        try s.record("dx", dx, Reference.channelAffineBackward(shape, outputGradient: asDouble(dy), scale: asDouble(scale)))
    }
}

extension VerifiedOp where Self == ElementwiseCase {
    public static func elementwise(_ op: ElementwiseOp, count: Int) -> ElementwiseCase { ElementwiseCase(op: op, count: count) }
}

extension VerifiedOp where Self == ChannelAffineCase {
    public static func channelAffine(_ shape: Shape) -> ChannelAffineCase { ChannelAffineCase(shape: shape) }
}
