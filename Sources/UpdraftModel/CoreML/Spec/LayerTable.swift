import UpdraftCore

/// The layer table: which NeuralNetworkLayer types Updraft reads as typed parameters, and for each
/// `LayerParams` case the layer type it is written as. Decoding looks a layer's oneof case up in
/// `readers`; anything not in it loads as `.unsupported` and writes back byte for byte. Field numbers
/// and names live in `NeuralNetworkLayerType` (CoreMLTypes.swift); each parameter message's own
/// fields in its decoder and encoder (LayerCodec.swift, Layers+*.swift).
///
/// Adding a Core ML layer type: a `LayerParams` case, a `readers` row, its case in `layerType`,
/// `encoded()` and `shapeRule` below, and in one file (`Layers+<Kind>.swift`) the parameter struct with
/// its `init(reading:)` / `encoded(into:)` and its `LayerShapeRule` (and `WeightedLayerParams` if it
/// has trained weights).
extension LayerParams {
    /// How each typed layer type's parameter message is read, by layer type.
    static let readers: [NeuralNetworkLayerType: @Sendable (ProtoReader) throws -> LayerParams] = {
        var table: [NeuralNetworkLayerType: @Sendable (ProtoReader) throws -> LayerParams] = [
            .convolution: { .convolution(try ConvolutionLayerParams(reading: $0)) },
            .pooling: { .pooling(try PoolingLayerParams(reading: $0)) },
            .activation: { .activation(try ActivationLayerParams(reading: $0)) },
            .innerProduct: { .innerProduct(try InnerProductLayerParams(reading: $0)) },
            .batchnorm: { .batchnorm(try BatchnormLayerParams(reading: $0)) },
            .l2normalize: { .l2normalize(epsilon: try $0.float(1, "epsilon") ?? 0) },
            .mvn: { .mvn(acrossChannels: try $0.bool(1, "acrossChannels") ?? false,
                         normalizeVariance: try $0.bool(2, "normalizeVariance") ?? false, epsilon: try $0.float(3, "epsilon") ?? 0) },
            .softmax: { _ in .softmax },
            .lrn: { .lrn(try LRNLayerParams(reading: $0)) },
            .padding: { .padding(try PaddingLayerParams(reading: $0)) },
            .unary: { .unary(try UnaryFunctionLayerParams(reading: $0)) },
            .add: { .add(alpha: try $0.float(1, "alpha") ?? 0) },
            .multiply: { .multiply(alpha: try $0.float(1, "alpha") ?? 0) },
            .reduce: { .reduce(try ReduceLayerParams(reading: $0)) },
            .loadConstant: { .loadConstant(try LoadConstantLayerParams(reading: $0, isND: false)) },
            .loadConstantND: { .loadConstant(try LoadConstantLayerParams(reading: $0, isND: true)) },
            .flatten: { .flatten(mode: try $0.int32(1, "mode") ?? 0) },
            .concat: { .concat(sequenceConcat: try $0.bool(100, "sequenceConcat") ?? false) },
            .clip: { .clip(minVal: try $0.float(1, "minVal") ?? 0, maxVal: try $0.float(2, "maxVal") ?? 0) },
        ]
        for op in [BinaryOp.add, .subtract, .multiply, .divide] {
            table[op.broadcastableLayerType] = { _ in .broadcastable(op) }
        }
        for kind in ReduceMode.allCases {
            table[kind.layerType] = { .reduceND(try ReduceNDLayerParams(reading: $0, kind: kind)) }
        }
        for type in ResampleLayerParams.layerTypes {
            table[type] = { .resampling(try ResampleLayerParams(reading: $0, type: type)) }
        }
        for type in LayoutLayerParams.layerTypes {
            table[type] = { .layout(try LayoutLayerParams(reading: $0, type: type)) }
        }
        for family in families {
            for type in family.layerTypes { table[type] = { .family(FamilyLayerParams(try family.init(reading: $0, type: type))) } }
        }
        return table
    }()

    /// The open families' parameter types (LayerFamily.swift), one row each: all a family adds here.
    static let families: [any LayerFamilyCodec.Type] = [
        LayerNormalizationLayerParams.self,
        ScaleLayerParams.self,
        BiasLayerParams.self,
    ]

    /// The NeuralNetworkLayer type these parameters are written as; nil only for `.unsupported` with a
    /// field number NeuralNetwork.proto does not define.
    public var layerType: NeuralNetworkLayerType? {
        switch self {
        case .convolution: return .convolution
        case .pooling: return .pooling
        case .activation: return .activation
        case .innerProduct: return .innerProduct
        case .batchnorm: return .batchnorm
        case .softmax: return .softmax
        case .add: return .add
        case .multiply: return .multiply
        case .unary: return .unary
        case .clip: return .clip
        case .flatten: return .flatten
        case .concat: return .concat
        case .l2normalize: return .l2normalize
        case .mvn: return .mvn
        case .lrn: return .lrn
        case .padding: return .padding
        case let .resampling(r): return r.layerType
        case let .broadcastable(op): return op.broadcastableLayerType
        case let .loadConstant(c): return c.isND ? .loadConstantND : .loadConstant
        case .reduce: return .reduce
        case let .reduceND(r): return r.kind.layerType
        case let .layout(l): return l.layerType
        case let .family(f): return f.base.layerType
        case let .unsupported(field, _): return NeuralNetworkLayerType(rawValue: field)
        }
    }

    /// The oneof field number.
    public var typeField: Int {
        if case let .unsupported(field, _) = self { return field }
        return layerType?.rawValue ?? 0
    }

    /// The oneof field name, as in NeuralNetwork.proto.
    public var typeName: String {
        if case let .unsupported(_, name) = self { return name }
        return NeuralNetworkLayerType.name(ofField: typeField)
    }

    /// The parameters of a layer with trainable weights and a bias (convolution, innerProduct).
    var weighted: WeightedLayerParams? {
        switch self {
        case let .convolution(c): return c
        case let .innerProduct(p): return p
        default: return nil
        }
    }

    /// The WeightParams fields of a layer with trainable weights (convolution, innerProduct).
    var weightFields: (weights: Int, bias: Int)? {
        weighted.map { (type(of: $0).weightsField, type(of: $0).biasField) }
    }

    /// The layer type's shape rule, where its parameters carry one (Layers+<Kind>.swift); the other
    /// types' rules are `ShapeInference.layer`'s cases.
    var shapeRule: LayerShapeRule? {
        switch self {
        case let .convolution(c): return c
        case let .innerProduct(p): return p
        case let .pooling(p): return p
        case let .activation(a): return a
        case let .unary(u): return u
        case let .batchnorm(b): return b
        case let .resampling(r): return r
        case let .layout(l): return l
        case let .padding(p): return p
        case let .lrn(l): return l
        case let .loadConstant(c): return c
        case let .reduce(r): return r
        case let .reduceND(r): return r
        case let .family(f): return f.codec
        default: return nil
        }
    }

    /// The parameter message, as written for models Updraft builds or re-encodes.
    func encoded() -> ProtoMessage {
        var w = MessageWriter()
        switch self {
        case let .convolution(c): c.encoded(into: &w)
        case let .innerProduct(p): p.encoded(into: &w)
        case let .pooling(p): p.encoded(into: &w)
        case let .activation(a): a.encoded(into: &w)
        case let .concat(sequenceConcat): w.bool(100, sequenceConcat)
        case .softmax, .broadcastable, .unsupported: break
        case let .flatten(mode): w.int32(1, mode)
        case let .batchnorm(b): b.encoded(into: &w)
        case let .add(alpha), let .multiply(alpha): w.float(1, alpha)
        case let .clip(minVal, maxVal): w.float(1, minVal); w.float(2, maxVal)
        case let .unary(u): u.encoded(into: &w)
        case let .padding(p): p.encoded(into: &w)
        case let .resampling(r): r.encoded(into: &w)
        case let .lrn(l): l.encoded(into: &w)
        case let .l2normalize(epsilon): w.float(1, epsilon)
        case let .mvn(acrossChannels, normalizeVariance, epsilon):
            w.bool(1, acrossChannels); w.bool(2, normalizeVariance); w.float(3, epsilon)
        case let .loadConstant(c): c.encoded(into: &w)
        case let .reduce(r): r.encoded(into: &w)
        case let .reduceND(r): r.encoded(into: &w)
        case let .layout(l): return l.encoded()
        case let .family(f): f.codec.encoded(into: &w)
        }
        return w.message
    }
}

/// A layer type with trained weights and an optional bias (convolution, inner product): what reading,
/// setting and making its weights updatable needs, declared by each type (Layers+<Kind>.swift).
protocol WeightedLayerParams {
    var weights: WeightParams { get }
    /// The bias values as stored (see `hasBias`).
    var bias: WeightParams? { get }
    var hasBias: Bool { get }
    var outputChannels: Int { get }
    /// The parameter message's WeightParams fields.
    static var weightsField: Int { get }
    static var biasField: Int { get }
    /// The weights' shape, every size checked; errors name the layer `layer`.
    func weightShape(layer: String) throws -> Shape
    /// Whether Updraft can train these weights (a deconvolution cannot), so the layer may be made updatable.
    var canTrain: Bool { get }
}
