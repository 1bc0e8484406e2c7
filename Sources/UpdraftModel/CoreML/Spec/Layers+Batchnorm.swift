import UpdraftCore

// The batchnorm layer (field 160) as one unit on the model side: its parameters, their decoder and
// encoder, and its shape rule (frozen statistics folded into a per-channel affine; computeMeanVar with
// instanceNormalization as instance normalization, `ShapeInference.instanceNormalizationLayer` in Layers+Spatial.swift).

/// BatchnormLayerParams. Updraft runs it frozen: y = gamma (x - mean) / sqrt(variance + epsilon) + beta.
public struct BatchnormLayerParams: Hashable, Sendable {
    /// BatchnormLayerParams.channels: C, the length of each of the four vectors.
    public var channels: Int
    /// BatchnormLayerParams.computeMeanVar: compute mean and variance from the input (Updraft cannot run it).
    public var computeMeanVar: Bool
    /// BatchnormLayerParams.instanceNormalization: per-instance statistics (with `computeMeanVar`; not supported).
    public var instanceNormalization: Bool
    /// Added to the variance before the square root (BatchnormLayerParams.epsilon).
    public var epsilon: Float
    /// Per-channel scale `[C]`.
    public var gamma: WeightParams
    /// Per-channel shift `[C]`.
    public var beta: WeightParams
    /// Per-channel running mean `[C]`.
    public var mean: WeightParams
    /// Per-channel running variance `[C]`.
    public var variance: WeightParams

    /// A frozen batch normalization with stored statistics.
    public init(channels: Int, epsilon: Float, gamma: WeightParams, beta: WeightParams, mean: WeightParams,
                variance: WeightParams, computeMeanVar: Bool = false, instanceNormalization: Bool = false) {
        self.channels = channels; self.epsilon = epsilon; self.gamma = gamma; self.beta = beta
        self.mean = mean; self.variance = variance
        self.computeMeanVar = computeMeanVar; self.instanceNormalization = instanceNormalization
    }
}

extension BatchnormLayerParams {
    init(reading r: ProtoReader) throws {
        channels = try r.size(1, "channels") ?? 0
        computeMeanVar = try r.bool(5, "computeMeanVar") ?? false
        instanceNormalization = try r.bool(6, "instanceNormalization") ?? false
        epsilon = try r.float(10, "epsilon") ?? 0
        gamma = try r.message(15, "gamma").map(WeightParams.init(reading:)) ?? .empty
        beta = try r.message(16, "beta").map(WeightParams.init(reading:)) ?? .empty
        mean = try r.message(17, "mean").map(WeightParams.init(reading:)) ?? .empty
        variance = try r.message(18, "variance").map(WeightParams.init(reading:)) ?? .empty
    }

    func encoded(into w: inout MessageWriter) {
        w.size(1, channels)
        w.bool(5, computeMeanVar)
        w.bool(6, instanceNormalization)
        w.float(10, epsilon)
        w.message(15, gamma.encoded())
        w.message(16, beta.encoded())
        w.message(17, mean.encoded())
        w.message(18, variance.encoded())
    }
}


extension BatchnormLayerParams: LayerShapeRule {
    /// Frozen statistics (computeMeanVar false): one per-channel scale and shift folded from gamma,
    /// beta, mean, variance and epsilon; with computeMeanVar, instance normalization
    /// (`ShapeInference.instanceNormalizationLayer`).
    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer {
        if computeMeanVar {
            let (op, output) = try ShapeInference.instanceNormalizationLayer(c.layer, self, inputShapes: c.inputShapes)
            return InferredLayer(op: op, output: output)
        }
        try c.expectInputs(1...1)
        guard channels == c.input.c else {
            throw c.fail("has \(channels) channels but its input '\(c.layer.inputs[0])' has shape \(c.input)")
        }
        let channelShape = try LayerShapes.checkedShape([channels], "layer '\(c.layer.name)' channels")
        let gamma = try c.tensor(gamma, shape: channelShape, what: "gamma")
        let beta = try c.tensor(beta, shape: channelShape, what: "beta")
        let mean = try c.tensor(mean, shape: channelShape, what: "mean")
        let variance = try c.tensor(variance, shape: channelShape, what: "variance")
        var scale = [Float](), shift = [Float]()
        for ch in 0..<channels {
            let denominator = Double(variance.data[ch]) + Double(epsilon)
            guard denominator > 0, denominator.isFinite else {
                throw c.fail("variance + epsilon of channel \(ch) is \(denominator); it must be positive")
            }
            let s = Double(gamma.data[ch]) / denominator.squareRoot()
            scale.append(Float(s))
            shift.append(Float(Double(beta.data[ch]) - Double(mean.data[ch]) * s))
        }
        return InferredLayer(op: .batchnorm(scale: scale, shift: shift), output: c.input)
    }
}
