import UpdraftCore

// The layerNormalization layer (NeuralNetworkLayer field 1350) as one open family on the model side:
// its parameters, their decoder and encoder, its shape rule and its graph op. coremltools' builders
// emit it (`NeuralNetworkBuilder.add_layer_normalization`). Updraft runs it with gamma and beta frozen:
// the input's gradient flows through it, its own values do not train (Core ML trains only
// convolution and innerProduct weights).

/// LayerNormalizationLayerParams: y = gamma (x - mean) / sqrt(var + eps) + beta over the trailing
/// `normalizedShape` axes of each example.
public struct LayerNormalizationLayerParams: Hashable, Sendable {
    /// normalizedShape (1): the trailing axes normalized together, outermost first.
    public var normalizedShape: [Int]
    /// eps (2): added to the variance before the square root.
    public var epsilon: Float
    /// gamma (3): the scale, one value per position of the normalized group (row-major).
    public var gamma: WeightParams
    /// beta (4): the shift, like gamma.
    public var beta: WeightParams

    public init(normalizedShape: [Int], epsilon: Float = 1e-5, gamma: WeightParams, beta: WeightParams) {
        self.normalizedShape = normalizedShape; self.epsilon = epsilon; self.gamma = gamma; self.beta = beta
    }
}

extension LayerParams {
    /// A layerNormalization layer's parameters.
    public static func layerNormalization(_ p: LayerNormalizationLayerParams) -> LayerParams { .family(FamilyLayerParams(p)) }
}

extension LayerNormalizationLayerParams: LayerFamilyCodec {
    static let layerTypes: [NeuralNetworkLayerType] = [.layerNormalization]
    public var layerType: NeuralNetworkLayerType { .layerNormalization }
    public var parameterCount: Int { gamma.values.count + beta.values.count }

    init(reading r: ProtoReader, type: NeuralNetworkLayerType) throws {
        normalizedShape = try r.sizes(1, "normalizedShape")
        epsilon = try r.float(2, "eps") ?? 0
        gamma = try r.message(3, "gamma").map(WeightParams.init(reading:)) ?? .empty
        beta = try r.message(4, "beta").map(WeightParams.init(reading:)) ?? .empty
    }

    func encoded(into w: inout MessageWriter) {
        w.int64s(1, normalizedShape.map(Int64.init))
        w.float(2, epsilon)
        w.message(3, gamma.encoded())
        w.message(4, beta.encoded())
    }

    /// One input; normalizedShape must be the trailing axes of one example (never the batch), and
    /// gamma and beta hold one value per position of the group.
    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer {
        try c.expectInputs(1...1)
        let example = c.logical[0].exampleDims
        guard !normalizedShape.isEmpty, normalizedShape.allSatisfy({ $0 >= 1 }) else {
            throw c.fail("normalizedShape \(normalizedShape) must list at least one axis, each of size 1 or more")
        }
        guard normalizedShape.count <= example.count, Array(example.suffix(normalizedShape.count)) == normalizedShape else {
            throw c.fail("normalizedShape \(normalizedShape) is not the trailing axes of one example of its input '\(c.layer.inputs[0])' \(c.logical[0])",
                         hint: "normalizedShape must equal the input's last axes, without the batch",
                         kind: normalizedShape.count > example.count ? .unsupported : .invalidModel)
        }
        guard epsilon >= 0, epsilon.isFinite else { throw c.fail("eps \(epsilon) must be finite and at least 0") }
        let groupSize = normalizedShape.reduce(1, *)
        let groupShape = try LayerShapes.checkedShape([groupSize], "layer '\(c.layer.name)' normalizedShape")
        let gamma = try c.tensor(gamma, shape: groupShape, what: "gamma")
        let beta = try c.tensor(beta, shape: groupShape, what: "beta")
        let op = LayerNormalizationOp(groupSize: groupSize, epsilon: epsilon)
        return InferredLayer(op: .family(FamilyOp(op)), output: c.input, weights: gamma, bias: beta, outputLogical: c.logical[0])
    }
}

/// The graph's layer normalization: groups of `groupSize` contiguous values of each example, with
/// gamma as the layer's weights and beta as its bias (`GraphLayer.weights`, `.bias`).
public struct LayerNormalizationOp: LayerFamilyOp {
    public var groupSize: Int
    public var epsilon: Float
    public var name: String { "layerNormalization" }

    /// The call for `batch` examples of `input` (canonical, batch 1) values each.
    public func geometry(batch: Int, input: Shape) -> LayerNormalizationGeometry {
        LayerNormalizationGeometry(rows: batch * (input.itemCount / groupSize), groupSize: groupSize, epsilon: epsilon)
    }
}
