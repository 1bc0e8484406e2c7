import UpdraftCore

// The inner-product layer (field 140) as one unit on the model side: its parameters, their decoder
// and encoder, its weights, and its shape rule. The device side: Backends/DeviceOps+Convolution.swift;
// the executor's kind: Layers/InnerProductLayer.swift; the geometry and cost: Ops/InnerProduct.swift.

/// InnerProductLayerParams.
public struct InnerProductLayerParams: Hashable, Sendable {
    /// InnerProductLayerParams.inputChannels: C_in, the length of each input vector.
    public var inputChannels: Int
    /// InnerProductLayerParams.outputChannels: C_out, the length of each output vector.
    public var outputChannels: Int
    /// InnerProductLayerParams.hasBias: whether `bias` is added.
    public var hasBias: Bool
    /// Weights `[C_out, C_in]` flattened (row-major).
    public var weights: WeightParams
    /// Bias `[C_out]`; nil when the file has none.
    public var bias: WeightParams?
    /// InnerProductLayerParams.int8DynamicQuantize: quantize activations at run time (Updraft cannot run it).
    public var int8DynamicQuantize: Bool

    /// An inner product (fully connected) layer.
    public init(inputChannels: Int, outputChannels: Int, hasBias: Bool, weights: WeightParams, bias: WeightParams?,
                int8DynamicQuantize: Bool = false) {
        self.inputChannels = inputChannels; self.outputChannels = outputChannels; self.hasBias = hasBias
        self.weights = weights; self.bias = bias; self.int8DynamicQuantize = int8DynamicQuantize
    }

    /// The sizes alone, as the executable layer spec the graph builder uses.
    public var spec: InnerProductSpec {
        InnerProductSpec(inputChannels: inputChannels, outputChannels: outputChannels, hasBias: hasBias)
    }

    /// InnerProductLayerParams' WeightParams fields: weights (20) and bias (21).
    static let weightsField = 20, biasField = 21
}

extension InnerProductLayerParams {
    init(reading r: ProtoReader) throws {
        inputChannels = try r.size(1, "inputChannels") ?? 0
        outputChannels = try r.size(2, "outputChannels") ?? 0
        hasBias = try r.bool(10, "hasBias") ?? false
        (weights, bias) = try r.weightsAndBias(Self.weightsField, Self.biasField)
        int8DynamicQuantize = try r.bool(22, "int8DynamicQuantize") ?? false
    }

    func encoded(into w: inout MessageWriter) {
        w.size(1, inputChannels)
        w.size(2, outputChannels)
        w.bool(10, hasBias)
        w.weightsAndBias(weights, bias, hasBias: hasBias, Self.weightsField, Self.biasField)
        w.bool(22, int8DynamicQuantize)
    }
}


extension InnerProductLayerParams: WeightedLayerParams {
    var canTrain: Bool { true }
    /// `[C_out, C_in]`, every size checked.
    func weightShape(layer: String) throws -> Shape {
        try LayerShapes.checkedShape([outputChannels, inputChannels], "layer '\(layer)' (innerProduct) weights")
    }
}

extension InnerProductLayerParams: LayerShapeRule {
    /// One input of inputChannels values per example (any layout: it is read flattened); int8
    /// dynamic quantization is refused; output [1, C_out, 1, 1] per example.
    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer {
        try c.expectInputs(1...1)
        if int8DynamicQuantize { throw c.fail("int8DynamicQuantize is not supported", kind: .unsupported) }
        let wShape = try weightShape(layer: c.layer.name)
        guard c.input.itemCount == inputChannels else {
            throw c.fail("expects \(inputChannels) inputs per example but its input '\(c.layer.inputs[0])' has shape \(c.input) (\(c.input.itemCount) values)")
        }
        _ = try c.geometry { try spec.geometry(input: c.input) }
        let (weights, bias) = try c.weightsAndBias(self, shape: wShape)
        return InferredLayer(op: .innerProduct(spec), output: Shape([1, outputChannels, 1, 1]), weights: weights, bias: bias)
    }
}
