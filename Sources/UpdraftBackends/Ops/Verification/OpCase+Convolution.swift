// Convolution and inner product in the verification tools: the GEMM family's cases, builders, the
// finite-difference problem (through a fused epilogue) and the backend comparison (forward, input
// gradient, weight and bias gradients).
import UpdraftCore

/// A convolution of `input`, then the `epilogue` function fused into it (nil: none).
public struct ConvolutionCase: VerifiedOp {
    public var spec: ConvolutionSpec
    public var input: Shape
    public var epilogue: Activation?

    public var opName: String { "convolution" }

    public var summary: String {
        let s = spec
        var t = "\(input) → \(s.outputChannels) k\(s.kernelH)x\(s.kernelW)"
        if s.strideH != 1 || s.strideW != 1 { t += " s\(s.strideH)x\(s.strideW)" }
        if s.dilationH != 1 || s.dilationW != 1 { t += " d\(s.dilationH)x\(s.dilationW)" }
        if s.groups != 1 { t += " g\(s.groups)" }
        switch s.padding {
        case let .valid(top, bottom, left, right) where top + bottom + left + right > 0:
            t += " pad \(top)/\(bottom)/\(left)/\(right)"
        case .valid: break
        case let .same(mode): t += mode == .bottomRightHeavy ? " same" : " same-topleft"
        }
        if !s.hasBias { t += " no-bias" }
        if let epilogue { t += " +\(epilogue)" }
        return t
    }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? {
        let g = try spec.geometry(input: input)
        return try GradientCheck.weightedProblem(
            counts: (g.inputShape.count, g.weightShape.count, g.hasBias ? g.outChannels : nil),
            epilogue: epilogue, ActivationGeometry(shape: g.outputShape), rng: &rng,
            forward: { try Reference.convolutionForward(g, input: $0, weights: $1, bias: $2) },
            backwardData: { try Reference.convolutionBackwardData(g, outputGradient: $0, weights: $1) },
            backwardWeights: { try Reference.convolutionBackwardWeights(g, input: $0, outputGradient: $1) })
    }

    public func compare(in s: inout ComparisonSession) throws {
        let g = try spec.geometry(input: input), backend = s.backend
        let x = s.values(g.inputShape.count), w = s.values(g.weightShape.count)
        let b = g.hasBias ? s.values(g.outChannels) : nil, dy = s.values(g.outputShape.count)
        let xb = try s.upload(x), wb = try s.upload(w), bb = try b.map(s.upload), dyb = try s.upload(dy)
        let y = try s.output(g.outputShape.count)
        try backend.convolutionForward(g, input: xb, weights: wb, bias: bb, output: y, epilogue: epilogue)
        try s.record("y", y, Reference.convolutionForward(g, input: asDouble(x), weights: asDouble(w), bias: b.map(asDouble),
                                                          epilogue: epilogue))

        let dx = try s.output(g.inputShape.count)
        try backend.convolutionBackwardData(g, outputGradient: dyb, weights: wb, inputGradient: dx)
        try s.record("dx", dx, Reference.convolutionBackwardData(g, outputGradient: asDouble(dy), weights: asDouble(w)))

        let dw = try s.output(g.weightShape.count), db = g.hasBias ? try s.output(g.outChannels) : nil
        try backend.convolutionBackwardWeights(g, input: xb, outputGradient: dyb, weightGradient: dw, biasGradient: db)
        let reference = try Reference.convolutionBackwardWeights(g, input: asDouble(x), outputGradient: asDouble(dy))
        try s.record("dw", dw, reference.weights)
        if let db { try s.record("db", db, reference.bias) }
    }
}

/// An inner product on `input` (flattened per example), then the `epilogue` function fused into it (nil: none).
public struct InnerProductCase: VerifiedOp {
    public var spec: InnerProductSpec
    public var input: Shape
    public var epilogue: Activation?

    public var opName: String { "innerProduct" }

    public var summary: String {
        "\(input) → \(spec.outputChannels)" + (spec.hasBias ? "" : " no-bias") + (epilogue.map { " +\($0)" } ?? "")
    }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? {
        let g = try spec.geometry(input: input)
        return try GradientCheck.weightedProblem(
            counts: (g.batch * g.inputChannels, g.outputChannels * g.inputChannels, g.hasBias ? g.outputChannels : nil),
            epilogue: epilogue, ActivationGeometry(batch: g.batch, channels: g.outputChannels, spatial: 1), rng: &rng,
            forward: { try Reference.innerProductForward(g, input: $0, weights: $1, bias: $2) },
            backwardData: { try Reference.innerProductBackwardData(g, outputGradient: $0, weights: $1) },
            backwardWeights: { try Reference.innerProductBackwardWeights(g, input: $0, outputGradient: $1) })
    }

    public func compare(in s: inout ComparisonSession) throws {
        let g = try spec.geometry(input: input), backend = s.backend
        let x = s.values(g.batch * g.inputChannels), w = s.values(g.outputChannels * g.inputChannels)
        let b = g.hasBias ? s.values(g.outputChannels) : nil, dy = s.values(g.batch * g.outputChannels)
        let xb = try s.upload(x), wb = try s.upload(w), bb = try b.map(s.upload), dyb = try s.upload(dy)
        let y = try s.output(g.batch * g.outputChannels)
        try backend.innerProductForward(g, input: xb, weights: wb, bias: bb, output: y, epilogue: epilogue)
        try s.record("y", y, Reference.innerProductForward(g, input: asDouble(x), weights: asDouble(w), bias: b.map(asDouble),
                                                           epilogue: epilogue))

        let dx = try s.output(g.batch * g.inputChannels)
        try backend.innerProductBackwardData(g, outputGradient: dyb, weights: wb, inputGradient: dx)
        try s.record("dx", dx, Reference.innerProductBackwardData(g, outputGradient: asDouble(dy), weights: asDouble(w)))

        let dw = try s.output(g.outputChannels * g.inputChannels), db = g.hasBias ? try s.output(g.outputChannels) : nil
        try backend.innerProductBackwardWeights(g, input: xb, outputGradient: dyb, weightGradient: dw, biasGradient: db)
        let reference = try Reference.innerProductBackwardWeights(g, input: asDouble(x), outputGradient: asDouble(dy))
        try s.record("dw", dw, reference.weights)
        if let db { try s.record("db", db, reference.bias) }
    }
}

extension GradientCheck {
    /// The GEMM family's problem: x, w and (`counts.bias` not nil) b drawn in [-1, 1], y = the epilogue
    /// of `forward`, and the gradients through the reference's backward-data and backward-weights passes.
    static func weightedProblem(
        counts: (input: Int, weights: Int, bias: Int?), epilogue: Activation?, _ act: ActivationGeometry, rng: inout SplitMix64,
        forward: @escaping (_ x: [Double], _ w: [Double], _ b: [Double]?) throws -> [Double],
        backwardData: @escaping (_ dz: [Double], _ w: [Double]) throws -> [Double],
        backwardWeights: @escaping (_ x: [Double], _ dz: [Double]) throws -> (weights: [Double], bias: [Double])
    ) throws -> Problem {
        var inputs = [Input("x", uniform(counts.input, -1...1, &rng)), Input("w", uniform(counts.weights, -1...1, &rng))]
        if let n = counts.bias { inputs.append(Input("b", uniform(n, -1...1, &rng))) }
        let hasBias = counts.bias != nil
        let pre: ([[Double]]) throws -> [Double] = { v in try forward(v[0], v[1], hasBias ? v[2] : nil) }
        try requireAwayFromKinks(epilogue, try pre(inputs.map(\.values)))
        return Problem(inputs: inputs, forward: { v in
            try applyEpilogue(epilogue, act, try pre(v))
        }, backward: { v, dy in
            let dz = try epilogueGradient(epilogue, act, try pre(v), dy)
            let dx = try backwardData(dz, v[1])
            let (dw, db) = try backwardWeights(v[0], dz)
            return hasBias ? [dx, dw, db] : [dx, dw]
        })
    }
}

extension VerifiedOp where Self == ConvolutionCase {
    /// A convolution of `input`, then `epilogue` fused into it.
    public static func convolution(_ spec: ConvolutionSpec, input: Shape, epilogue: Activation?) -> ConvolutionCase {
        ConvolutionCase(spec: spec, input: input, epilogue: epilogue)
    }
}

extension VerifiedOp where Self == InnerProductCase {
    /// An inner product on `input`, then `epilogue` fused into it.
    public static func innerProduct(_ spec: InnerProductSpec, input: Shape, epilogue: Activation?) -> InnerProductCase {
        InnerProductCase(spec: spec, input: input, epilogue: epilogue)
    }
}

extension OpCase {
    /// A convolution case from its sizes.
    public static func convolution(_ input: Shape, outputChannels: Int, kernel: (Int, Int), stride: (Int, Int) = (1, 1),
                                   dilation: (Int, Int) = (1, 1), groups: Int = 1, padding: ConvolutionPadding = .none,
                                   bias: Bool = true, fusedReLU: Bool = false, epilogue: Activation? = nil,
                                   values: InputValues = .uniform) -> OpCase {
        let spec = ConvolutionSpec(inputChannels: input.c, outputChannels: outputChannels, kernelH: kernel.0, kernelW: kernel.1,
                                   strideH: stride.0, strideW: stride.1, dilationH: dilation.0, dilationW: dilation.1,
                                   groups: groups, padding: padding, hasBias: bias)
        return OpCase(.convolution(spec, input: input, epilogue: epilogue ?? (fusedReLU ? .relu : nil)), values: values)
    }

    /// An inner-product case on `input` (C_in is its per-example element count), with bias and no epilogue by default.
    public static func innerProduct(_ input: Shape, outputChannels: Int, bias: Bool = true, epilogue: Activation? = nil) -> OpCase {
        OpCase(.innerProduct(InnerProductSpec(inputChannels: input.itemCount, outputChannels: outputChannels, hasBias: bias),
                             input: input, epilogue: epilogue))
    }
}
