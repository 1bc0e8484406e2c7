import UpdraftCore

// The convolution layer (NeuralNetworkLayer field 100) as one unit on the model side: its parameters,
// their decoder and encoder (field numbers as in NeuralNetwork.proto), its weights, and its shape rule
// (what the graph makes of it). The device side: Backends/DeviceOps+Convolution.swift; the executor's
// kind: Layers/ConvolutionLayer.swift; the geometry and cost: Ops/Convolution.swift.

/// ConvolutionLayerParams. Sizes are as stored (uint64 clamped to Int); `spec()` checks them.
public struct ConvolutionLayerParams: Hashable, Sendable {
    /// ConvolutionLayerParams.outputChannels: C_out, the number of kernels.
    public var outputChannels: Int
    /// ConvolutionLayerParams.kernelChannels: input channels each kernel sees (C_in / groups).
    public var kernelChannels: Int
    /// nGroups, with the file's 0 read as 1.
    public var groups: Int
    /// [kH, kW]; the file's empty list reads as Core ML's default [3, 3].
    public var kernelSize: [Int]
    /// [sH, sW]; default [1, 1].
    public var stride: [Int]
    /// [dH, dW]; default [1, 1].
    public var dilation: [Int]
    /// How the input is padded: valid (with explicit amounts) or same.
    public var padding: ConvolutionPadding
    /// ConvolutionLayerParams.isDeconvolution: a transposed convolution (Updraft cannot run it).
    public var isDeconvolution: Bool
    /// ConvolutionLayerParams.hasBias: whether `bias` is added to each output channel.
    public var hasBias: Bool
    /// Kernel weights, `[C_out, C_in/groups, kH, kW]` flattened (row-major).
    public var weights: WeightParams
    /// Per-output-channel bias `[C_out]`; nil when the file has none.
    public var bias: WeightParams?
    /// Deconvolution's output size, if given.
    public var outputShape: [Int]

    /// A convolution; stride, dilation and groups default to 1 as in Core ML.
    public init(outputChannels: Int, kernelChannels: Int, groups: Int = 1, kernelSize: [Int], stride: [Int] = [1, 1],
                dilation: [Int] = [1, 1], padding: ConvolutionPadding, isDeconvolution: Bool = false, hasBias: Bool,
                weights: WeightParams, bias: WeightParams?, outputShape: [Int] = []) {
        self.outputChannels = outputChannels; self.kernelChannels = kernelChannels; self.groups = groups
        self.kernelSize = kernelSize; self.stride = stride; self.dilation = dilation; self.padding = padding
        self.isDeconvolution = isDeconvolution; self.hasBias = hasBias; self.weights = weights; self.bias = bias
        self.outputShape = outputShape
    }

    /// Number of stored weight values plus bias values (bias counted only when `hasBias`).
    public var parameterCount: Int { weights.values.count + (hasBias ? (bias?.values.count ?? 0) : 0) }

    /// ConvolutionLayerParams' WeightParams fields: weights (90) and bias (91).
    static let weightsField = 90, biasField = 91
}

extension ConvolutionLayerParams {
    init(reading r: ProtoReader) throws {
        outputChannels = try r.size(1, "outputChannels") ?? 0
        kernelChannels = try r.size(2, "kernelChannels") ?? 0
        groups = max(1, try r.size(10, "nGroups") ?? 1)
        kernelSize = sizePair(try r.sizes(20, "kernelSize"), default: [3, 3])
        stride = sizePair(try r.sizes(30, "stride"), default: [1, 1])
        dilation = sizePair(try r.sizes(40, "dilationFactor"), default: [1, 1])
        padding = .none
        if let f = r.lastOf([50, 51]) {
            if f.number == 50 {
                let v = try r.child(f, named: "valid")
                let b = try borderAmounts(try v.message(1, "paddingAmounts"))
                padding = .valid(top: b.top, bottom: b.bottom, left: b.left, right: b.right)
            } else {
                let s = try r.child(f, named: "same")
                padding = .same(try samePaddingMode(s))
            }
        }
        isDeconvolution = try r.bool(60, "isDeconvolution") ?? false
        hasBias = try r.bool(70, "hasBias") ?? false
        (weights, bias) = try r.weightsAndBias(Self.weightsField, Self.biasField)
        outputShape = try r.sizes(100, "outputShape")
    }

    func encoded(into w: inout MessageWriter) {
        w.size(1, outputChannels)
        w.size(2, kernelChannels)
        w.size(10, groups)
        w.sizes(20, kernelSize)
        w.sizes(30, stride)
        w.sizes(40, dilation)
        switch padding {
        case let .valid(top, bottom, left, right):
            w.message(50) { v in v.message(1, borderAmounts(top: top, bottom: bottom, left: left, right: right)) }
        case let .same(mode):
            w.message(51) { s in s.int32(1, Int32(mode.rawValue)) }
        }
        w.bool(60, isDeconvolution)
        w.bool(70, hasBias)
        w.weightsAndBias(weights, bias, hasBias: hasBias, Self.weightsField, Self.biasField)
        w.sizes(100, outputShape)
    }
}


extension ConvolutionLayerParams: WeightedLayerParams {
    /// A deconvolution cannot train (Updraft does not run it).
    var canTrain: Bool { !isDeconvolution }
    /// `[C_out, kernelChannels, kH, kW]`, every size checked.
    func weightShape(layer: String) throws -> Shape {
        guard kernelSize.count == 2 else {
            throw UpdraftError(.invalidModel, "layer '\(layer)': kernelSize lists \(kernelSize.count) values; expected 2 (height, width)")
        }
        return try LayerShapes.checkedShape([outputChannels, kernelChannels, kernelSize[0], kernelSize[1]],
                                            "layer '\(layer)' (convolution) weights")
    }
}

extension ConvolutionLayerParams: LayerShapeRule {
    /// One input with kernelChannels x nGroups channels; deconvolution is refused; Core ML's padding rules
    /// (`ConvolutionSpec.geometry`); the weights and the bias read and checked.
    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer {
        try c.expectInputs(1...1)
        if isDeconvolution {
            throw c.fail("deconvolution is not supported", kind: .unsupported)
        }
        let (kh, kw) = try c.size(kernelSize, "kernelSize")
        let (sh, sw) = try c.size(stride, "stride")
        let (dh, dw) = try c.size(dilation, "dilationFactor")
        if case let .valid(t, b, l, r) = padding { try c.checkPadding([t, b, l, r]) }
        let wShape = try weightShape(layer: c.layer.name)
        guard groups >= 1, groups <= LayerShapes.maxDimension else { throw c.fail("nGroups \(groups) is out of range") }
        let (inChannels, overflow) = kernelChannels.multipliedReportingOverflow(by: groups)
        guard !overflow, inChannels <= LayerShapes.maxDimension else { throw c.fail("kernelChannels x nGroups is out of range") }
        guard inChannels == c.input.c else {
            throw c.fail("expects \(inChannels) input channels (kernelChannels \(kernelChannels) x nGroups \(groups)) but its input '\(c.layer.inputs[0])' has shape \(c.input)")
        }
        let spec = ConvolutionSpec(inputChannels: inChannels, outputChannels: outputChannels, kernelH: kh, kernelW: kw,
                                   strideH: sh, strideW: sw, dilationH: dh, dilationW: dw, groups: groups,
                                   padding: padding, hasBias: hasBias)
        let g = try c.geometry { try spec.geometry(input: c.input) }
        let (weights, bias) = try c.weightsAndBias(self, shape: wShape)
        return InferredLayer(op: .convolution(spec), output: g.outputShape, weights: weights, bias: bias)
    }
}
