// Activations in the verification tools (the case, its problem away from kinks, the comparison) and
// the case lists for the activation table: every ActivationParams kind, clip and each unary function,
// per-channel constants on awkward channel counts, and functions fused into convolution and
// inner-product epilogues (direct, pointwise and grouped convolutions, per-channel constants).
import UpdraftCore

/// An activation, clip or unary function over [batch, channels, spatial].
public struct ActivationCase: VerifiedOp {
    public var activation: Activation
    public var geometry: ActivationGeometry

    public var opName: String { "activation" }
    public var summary: String {
        let g = geometry
        return g.batch == 1 && g.channels == 1 ? "\(activation) ×\(g.spatial)" : "\(activation) [\(g.batch), \(g.channels), \(g.spatial)]"
    }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? {
        let a = activation, g = geometry
        let x = GradientCheck.awayFromKinks(a, count: g.count, &rng)
        return GradientCheck.Problem(inputs: [GradientCheck.Input("x", x)],
                                     forward: { v in try Reference.activationForward(a, g, input: v[0]) },
                                     backward: { v, dy in
            [try Reference.activationBackward(a, g, input: v[0], output: Reference.activationForward(a, g, input: v[0]),
                                              outputGradient: dy)]
        })
    }

    public func compare(in s: inout ComparisonSession) throws {
        let a = activation, g = geometry, r = a.verificationRange(wide: true), backend = s.backend
        try s.compareOneInput(inputCount: g.count, outputCount: g.count, range: Float(r.lowerBound)...Float(r.upperBound),
                              forward: { try backend.activationForward(a, g, input: $0, output: $1) },
                              reference: { try Reference.activationForward(a, g, input: $0) },
                              backward: { try backend.activationBackward(a, g, input: $0, output: $1, outputGradient: $2,
                                                                         inputGradient: $3) },
                              referenceBackward: { x, y, dy in  // as the backend sees y: rounded to float32
                                  try Reference.activationBackward(a, g, input: x, output: asDouble(asFloat(y)), outputGradient: dy)
                              })
    }
}

extension VerifiedOp where Self == ActivationCase {
    /// `a` over the values of `geometry`.
    public static func activation(_ a: Activation, _ geometry: ActivationGeometry) -> ActivationCase {
        ActivationCase(activation: a, geometry: geometry)
    }
    /// An activation over `count` values of one channel.
    public static func activation(_ a: Activation, count: Int) -> ActivationCase {
        ActivationCase(activation: a, geometry: ActivationGeometry(count: count))
    }
}

extension Array where Element == OpCase {
    /// One of each element-wise function, small enough for finite differences, plus fused epilogues.
    static var activationGradientChecks: [OpCase] {
        [
            OpCase(.activation(.thresholdedReLU(alpha: 0.5), count: 15)),
            OpCase(.activation(.prelu(alpha: [0.1, 0.2, 0.3]), ActivationGeometry(batch: 2, channels: 3, spatial: 4))),
            OpCase(.activation(.prelu(alpha: [-0.5]), count: 9)),
            OpCase(.activation(.scaledTanh(alpha: 1.7, beta: 0.6), count: 7)),
            OpCase(.activation(.sigmoidHard(alpha: 0.4, beta: 0.5), count: 15)),
            OpCase(.activation(.elu(alpha: 0.7), count: 15)),
            OpCase(.activation(.softsign, count: 7)),
            OpCase(.activation(.softplus, count: 7)),
            OpCase(.activation(.parametricSoftplus(alpha: [0.5, 2], beta: [1.5, -1]), ActivationGeometry(batch: 1, channels: 2, spatial: 5))),
            OpCase(.activation(.clip(min: -1, max: 1.5), count: 15)),
        ] + unaryFunctions.map { OpCase(.activation(.unary($0), count: 9)) } + [
            .convolution([1, 2, 5, 5], outputChannels: 3, kernel: (3, 3), padding: .valid(top: 1, bottom: 1, left: 1, right: 1),
                         epilogue: .clip(min: -0.5, max: 0.5)),
            .convolution([2, 2, 4, 3], outputChannels: 3, kernel: (1, 1), epilogue: .prelu(alpha: [0.1, -0.2, 0.3])),
            .innerProduct([3, 6], outputChannels: 4, epilogue: .parametricSoftplus(alpha: [0.5, 1, 1.5, 2], beta: [1])),
            .innerProduct([2, 5], outputChannels: 3, epilogue: .sigmoidHard(alpha: 0.4, beta: 0.5)),
        ]
    }

    /// Every function on awkward sizes, per-channel constants over 7 and 33 channels, and fused
    /// epilogues for the backend comparisons.
    static var activationComparisons: [OpCase] {
        let slopes33 = (0..<33).map { Float($0 % 5) * 0.1 - 0.1 }
        return [
            OpCase(.activation(.thresholdedReLU(alpha: 0.5), count: 65)),
            OpCase(.activation(.prelu(alpha: [0.1, -0.2, 0.3, 0.05, 0.5, 1.5, -1]), ActivationGeometry(batch: 3, channels: 7, spatial: 33))),
            OpCase(.activation(.prelu(alpha: [0.25]), count: 63)),
            OpCase(.activation(.scaledTanh(alpha: 1.7159, beta: 0.6667), count: 65)),
            OpCase(.activation(.sigmoidHard(alpha: 1.0 / 6, beta: 0.5), count: 65 * 7)),
            OpCase(.activation(.elu(alpha: 1), count: 65)),
            OpCase(.activation(.softsign, count: 31)),
            OpCase(.activation(.softplus, count: 65)),
            OpCase(.activation(.parametricSoftplus(alpha: [0.5, 2, 1, 0.25, 3, 1, 1], beta: [1.5, -1, 0.5, 2, 1, 3, -0.5]),
                               ActivationGeometry(batch: 1, channels: 7, spatial: 65))),
            OpCase(.activation(.clip(min: 0, max: 6), count: 65 * 63)),
            OpCase(.activation(.clip(min: -0.5, max: 0.5), count: 65), values: .coarse),  // ties at both edges
        ] + unaryFunctions.map { OpCase(.activation(.unary($0), count: 65)) } + [
            .convolution([3, 7, 9, 11], outputChannels: 33, kernel: (3, 3), padding: .valid(top: 1, bottom: 1, left: 1, right: 1),
                         epilogue: .prelu(alpha: slopes33)),
            .convolution([3, 9, 5, 3], outputChannels: 5, kernel: (1, 1), epilogue: .clip(min: 0, max: 6)),
            .convolution([1, 8, 7, 5], outputChannels: 8, kernel: (3, 3), groups: 4, padding: .same(.bottomRightHeavy),
                         bias: false, epilogue: .elu(alpha: 1)),
            .convolution([3, 4, 6, 6], outputChannels: 7, kernel: (3, 3), stride: (2, 2), epilogue: .sigmoid),
            .innerProduct([3, 63], outputChannels: 33, epilogue: .parametricSoftplus(alpha: slopes33.map { $0 + 0.5 }, beta: [1.5])),
            .innerProduct([1, 7, 3, 3], outputChannels: 63, epilogue: .sigmoidHard(alpha: 1.0 / 6, beta: 0.5)),
            .innerProduct([3, 31], outputChannels: 7, bias: false, epilogue: .tanh),
        ]
    }

    /// Each unary function once, with scale and shift that keep sqrt, log, … in their domain over
    /// the verification range.
    static var unaryFunctions: [UnaryFunction] {
        [UnaryFunction(.sqrt, shift: 1), UnaryFunction(.rsqrt, shift: 1, scale: 2), UnaryFunction(.inverse, shift: 0.5, scale: -1),
         UnaryFunction(.power, alpha: 1.5, shift: 0.5), UnaryFunction(.exp, shift: -0.5, scale: 0.5),
         UnaryFunction(.log, shift: 1, scale: 2), UnaryFunction(.abs, shift: 0.3), UnaryFunction(.threshold, alpha: 0.2, scale: 1.5)]
    }
}
