import UpdraftCore

// The scale (NeuralNetworkLayer field 245) and bias (250) layers as an open family on the model side:
// their parameters, decoders and encoders, shape rule and graph op. coremltools' converter writes a
// PyTorch `nn.LayerNorm` over the last axis as reshapeStatic → mvn → scale → reshapeStatic. They run on
// the broadcasting ops (`ScaleLayer`): y = scale · x + bias, the constants broadcast over the input's
// last three axes (C, H, W; earlier axes are batch, as the proto says), frozen.

/// ScaleLayerParams: y = scale · x (+ bias when hasBias).
public struct ScaleLayerParams: Hashable, Sendable {
    /// shapeScale (1): [1], [C], [1, H, W] or [C, H, W].
    public var shapeScale: [Int]
    /// scale (2).
    public var scale: WeightParams
    /// hasBias (3).
    public var hasBias: Bool
    /// shapeBias (4): like shapeScale.
    public var shapeBias: [Int]
    /// bias (5).
    public var bias: WeightParams

    public init(shapeScale: [Int], scale: WeightParams, hasBias: Bool = false, shapeBias: [Int] = [], bias: WeightParams = .empty) {
        self.shapeScale = shapeScale; self.scale = scale; self.hasBias = hasBias; self.shapeBias = shapeBias; self.bias = bias
    }
}

/// BiasLayerParams: y = x + bias.
public struct BiasLayerParams: Hashable, Sendable {
    /// shape (1): [1], [C], [1, H, W] or [C, H, W].
    public var shape: [Int]
    /// bias (2).
    public var bias: WeightParams

    public init(shape: [Int], bias: WeightParams) { self.shape = shape; self.bias = bias }
}

extension LayerParams {
    /// A scale layer's parameters.
    public static func scale(_ p: ScaleLayerParams) -> LayerParams { .family(FamilyLayerParams(p)) }
    /// A bias layer's parameters.
    public static func bias(_ p: BiasLayerParams) -> LayerParams { .family(FamilyLayerParams(p)) }
}

extension ScaleLayerParams: LayerFamilyCodec {
    static let layerTypes: [NeuralNetworkLayerType] = [.scale]
    public var layerType: NeuralNetworkLayerType { .scale }
    public var parameterCount: Int { scale.values.count + (hasBias ? bias.values.count : 0) }

    init(reading r: ProtoReader, type: NeuralNetworkLayerType) throws {
        shapeScale = try r.sizes(1, "shapeScale")
        scale = try r.message(2, "scale").map(WeightParams.init(reading:)) ?? .empty
        hasBias = try r.bool(3, "hasBias") ?? false
        shapeBias = try r.sizes(4, "shapeBias")
        bias = try r.message(5, "bias").map(WeightParams.init(reading:)) ?? .empty
    }

    func encoded(into w: inout MessageWriter) {
        w.sizes(1, shapeScale)
        w.message(2, scale.encoded())
        w.bool(3, hasBias)
        w.sizes(4, shapeBias)
        if hasBias || !bias.values.isEmpty { w.message(5, bias.encoded()) }
    }

    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer {
        try ScaleOp.inferred(c, scale: (shapeScale, scale), bias: hasBias ? (shapeBias, bias) : nil)
    }
}

extension BiasLayerParams: LayerFamilyCodec {
    static let layerTypes: [NeuralNetworkLayerType] = [.bias]
    public var layerType: NeuralNetworkLayerType { .bias }
    public var parameterCount: Int { bias.values.count }

    init(reading r: ProtoReader, type: NeuralNetworkLayerType) throws {
        shape = try r.sizes(1, "shape")
        bias = try r.message(2, "bias").map(WeightParams.init(reading:)) ?? .empty
    }

    func encoded(into w: inout MessageWriter) {
        w.sizes(1, shape)
        w.message(2, bias.encoded())
    }

    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer {
        try ScaleOp.inferred(c, scale: nil, bias: (shape, bias))
    }
}

/// The graph's scale and bias: y = scale · x + bias over `[rows, C, H, W]` (every earlier axis folded
/// into the rows), each constant `[1, c, h, w]` with c, h, w the input's or 1; the scale is the
/// layer's weights, the bias its bias (`GraphLayer.weights`, `.bias`).
public struct ScaleOp: LayerFamilyOp {
    /// Rows of [C, H, W] per example (the product of the axes before the last three).
    public var rowsPerExample: Int
    /// The input's last three axes.
    public var chw: [Int]
    /// The scale's [c, h, w], nil for a bias layer.
    public var scaleDims: [Int]?
    /// The bias's [c, h, w], nil without a bias.
    public var biasDims: [Int]?
    public var name: String { scaleDims == nil ? "bias" : "scale" }

    /// The broadcast of `op` with the constant `dims` for `batch` examples.
    public func geometry(_ op: BinaryOp, _ dims: [Int], batch: Int) throws -> BroadcastGeometry {
        try BroadcastGeometry(op: op, a: [batch * rowsPerExample] + chw, b: [1] + dims)
    }

    /// One input; each constant of a shape Core ML allows ([1], [C], [1, H, W], [C, H, W]) and holding that many values.
    static func inferred(_ c: ShapeRuleContext, scale: ([Int], WeightParams)?, bias: ([Int], WeightParams)?) throws -> InferredLayer {
        try c.expectInputs(1...1)
        let example = c.logical[0].exampleDims
        let chw = [Int](repeating: 1, count: max(0, 3 - example.count)) + example.suffix(3)
        func constant(_ shape: [Int], _ values: WeightParams, _ what: String) throws -> (dims: [Int], tensor: Tensor) {
            let (ch, h, w) = (chw[0], chw[1], chw[2])
            let allowed = [[1], [ch], [1, h, w], [ch, h, w]]
            guard allowed.contains(shape) else {
                throw c.fail("\(what) shape \(shape) is not [1], [C], [1, H, W] or [C, H, W] of its input '\(c.layer.inputs[0])' \(c.logical[0])",
                             hint: "Core ML broadcasts a \(what) over the input's last three axes")
            }
            let dims = shape.count == 1 ? [shape[0], 1, 1] : shape
            let count = shape.reduce(1, *)
            return (dims, try c.tensor(values, shape: try LayerShapes.checkedShape([count], "layer '\(c.layer.name)' \(what)"), what: what))
        }
        let s = try scale.map { try constant($0.0, $0.1, "scale") }
        let b = try bias.map { try constant($0.0, $0.1, "bias") }
        let op = ScaleOp(rowsPerExample: example.dropLast(3).reduce(1, *), chw: chw, scaleDims: s?.dims, biasDims: b?.dims)
        return InferredLayer(op: .family(FamilyOp(op)), output: c.input, weights: s?.tensor, bias: b?.tensor, outputLogical: c.logical[0])
    }
}
