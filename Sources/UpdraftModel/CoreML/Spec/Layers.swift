import UpdraftCore

/// Neural network layers (NeuralNetworkLayer and the parameter messages of the layer types Updraft
/// can run). Other layer types are read as `.unsupported` with their field number and name, so a
/// model with them still loads, inspects and writes back unchanged; building a graph names them.
/// How a WeightParams stores its values.
public enum WeightEncoding: String, Hashable, Sendable {
    /// floatValue (1): float32, the only encoding Core ML can update.
    case float32
    /// float16Value (2): readable, converted to float32; Core ML cannot update such weights.
    case float16
    /// rawValue (30) without quantization: bytes of a custom layer, not supported.
    case raw
    /// int8RawValue (31): not supported.
    case int8
    /// quantization (40) with rawValue: quantized weights, not supported.
    case quantized
    /// No values at all.
    case empty
}

/// WeightParams. `values` holds float32 values (float16 converted); empty for the unsupported
/// encodings, whose size in bytes is `storedByteCount`.
public struct WeightParams: Hashable, Sendable {
    /// The weights as float32 (float16 widened); empty for the unsupported encodings and for `.empty`.
    public var values: [Float]
    /// Which WeightParams field held the values.
    public var encoding: WeightEncoding
    /// WeightParams.isUpdatable: whether on-device training may change these values.
    public var isUpdatable: Bool
    /// Bytes of rawValue / int8RawValue for the unsupported encodings.
    public var storedByteCount: Int

    /// Float32 weights (encoding `.float32`, or `.empty` for no values); `storedByteCount` is 4 per value.
    public init(values: [Float], isUpdatable: Bool = false) {
        self.values = values; self.encoding = values.isEmpty ? .empty : .float32
        self.isUpdatable = isUpdatable; self.storedByteCount = values.count * 4
    }

    /// Weights exactly as read from a file, including unsupported encodings.
    public init(values: [Float], encoding: WeightEncoding, isUpdatable: Bool, storedByteCount: Int) {
        self.values = values; self.encoding = encoding; self.isUpdatable = isUpdatable; self.storedByteCount = storedByteCount
    }

    /// A WeightParams with no values (encoding `.empty`, not updatable).
    public static let empty = WeightParams(values: [])

    /// Whether Updraft can read the values (float32, float16, or nothing).
    public var isReadable: Bool { encoding == .float32 || encoding == .float16 || encoding == .empty }
}

/// NeuralNetworkLayer's oneof, for the types Updraft knows.
public enum LayerParams: Hashable, Sendable {
    /// ConvolutionLayerParams (NeuralNetworkLayer field 100): 2-D convolution or deconvolution, with its weights and optional bias.
    case convolution(ConvolutionLayerParams)
    /// InnerProductLayerParams (field 140): a fully connected layer, y = W x + b.
    case innerProduct(InnerProductLayerParams)
    /// PoolingLayerParams (field 120): max, average or L2 pooling over spatial windows, or global pooling.
    case pooling(PoolingLayerParams)
    /// ActivationLayerParams (field 130): an element-wise nonlinearity such as ReLU, sigmoid or tanh.
    case activation(ActivationLayerParams)
    /// ConcatLayerParams.sequenceConcat (false: along channels).
    case concat(sequenceConcat: Bool)
    /// SoftmaxLayerParams (field 175, no fields): softmax across the channel axis.
    case softmax
    /// FlattenLayerParams.mode: CHANNEL_FIRST = 0, CHANNEL_LAST = 1.
    case flatten(mode: Int32)
    /// BatchnormLayerParams (field 160): per-channel normalization with learned gamma and beta, or instance normalization.
    case batchnorm(BatchnormLayerParams)
    /// AddLayerParams.alpha (added when there is a single input).
    case add(alpha: Float)
    /// MultiplyLayerParams.alpha (multiplied when there is a single input).
    case multiply(alpha: Float)
    /// ClipLayerParams: y = min(max(x, minVal), maxVal).
    case clip(minVal: Float, maxVal: Float)
    /// UnaryFunctionLayerParams (field 220): y = f(scale * x + shift) for sqrt, rsqrt, inverse, power, exp, log, abs or threshold.
    case unary(UnaryFunctionLayerParams)
    /// PaddingLayerParams (field 200): constant, reflection or replication padding of the spatial axes.
    case padding(PaddingLayerParams)
    /// The resampling layers (Layers+Resample.swift): upsample (field 210).
    case resampling(ResampleLayerParams)
    /// LRNLayerParams (field 180): local response normalization across channels (alpha, beta, k, localSize).
    case lrn(LRNLayerParams)
    /// L2NormalizeLayerParams.epsilon (0 reads as Core ML's default 1e-6).
    case l2normalize(epsilon: Float)
    /// MeanVarianceNormalizeLayerParams (mvn, 165): acrossChannels (1), normalizeVariance (2), epsilon (3).
    /// Updraft runs the form coremltools' converters emit (per channel, variance normalized: instance
    /// normalization without scale and shift); the others are refused by name.
    case mvn(acrossChannels: Bool, normalizeVariance: Bool, epsilon: Float)
    /// add/subtract/multiply/divideBroadcastable (no fields): two inputs with numpy broadcasting.
    case broadcastable(BinaryOp)
    /// LoadConstantLayerParams (field 290): emits a stored constant tensor; takes no input.
    case loadConstant(LoadConstantLayerParams)
    /// ReduceLayerParams (field 280): the rank-5 reduction (sum, average, max, ... over C, H, W or combinations).
    case reduce(ReduceLayerParams)
    /// The ND reduce layers (reduceSum, reduceMean, reduceMax, ...) and argMax / argMin (ReduceMode).
    case reduceND(ReduceNDLayerParams)
    /// Reshape, squeeze, transpose, softmaxND, concatND, ... (Layers+Layout.swift).
    case layout(LayoutLayerParams)
    /// A layer type added as an open family (LayerFamily.swift; `LayerParams.families` lists them):
    /// layerNormalization (Layers+LayerNormalization.swift).
    case family(FamilyLayerParams)
    /// Any other layer type: its NeuralNetworkLayer field number and name.
    case unsupported(field: Int, name: String)
}

/// NeuralNetworkLayer: one layer's name, blobs, updatability and typed parameters.
public struct LayerSpec: Hashable, Sendable {
    /// NeuralNetworkLayer.name: unique among the network's layers.
    public var name: String
    /// NeuralNetworkLayer.input: names of the blobs the layer reads, in order.
    public var inputs: [String]
    /// NeuralNetworkLayer.output: names of the blobs the layer writes.
    public var outputs: [String]
    /// NeuralNetworkLayer.isUpdatable: whether training changes this layer's weights.
    public var isUpdatable: Bool
    /// The layer's type and its parameters (the NeuralNetworkLayer oneof).
    public var params: LayerParams

    /// A layer; not updatable unless `isUpdatable` is set.
    public init(name: String, inputs: [String], outputs: [String], isUpdatable: Bool = false, params: LayerParams) {
        self.name = name; self.inputs = inputs; self.outputs = outputs; self.isUpdatable = isUpdatable; self.params = params
    }

    /// The layer type's NeuralNetwork.proto field name (e.g. `convolution`, `innerProduct`).
    public var typeName: String { params.typeName }

    /// Weights and bias of a convolution or inner product (nil for other layers).
    public var weightParams: (weights: WeightParams, bias: WeightParams?)? {
        params.weighted.map { ($0.weights, $0.hasBias ? $0.bias : nil) }
    }

    /// Learnable or stored values of this layer (weights, bias; batchnorm's four vectors).
    public var parameterCount: Int {
        if let (w, b) = weightParams { return w.values.count + (b?.values.count ?? 0) }
        switch params {
        case let .batchnorm(b):
            return b.gamma.values.count + b.beta.values.count + b.mean.values.count + b.variance.values.count
        case let .family(f): return f.base.parameterCount
        default: return 0
        }
    }
}

extension LayerSpec {
    /// The layer's type with its main settings, as `updraft inspect` and graph errors show it
    /// ("convolution 3x3/2", "pooling max global", "activation relu").
    package var typeDescription: String {
        switch params {
        case let .convolution(c):
            let k = c.kernelSize.map(String.init).joined(separator: "x")
            let s = c.stride.map(String.init).joined(separator: "x")
            return "convolution \(k)" + (c.stride == [1, 1] ? "" : "/\(s)") + (c.isDeconvolution ? " (deconvolution)" : "")
        case let .pooling(p):
            if p.global { return "pooling \(p.typeName.lowercased()) global" }
            return "pooling \(p.typeName.lowercased()) \(p.kernelSize.map(String.init).joined(separator: "x"))"
        case let .activation(a): return "activation \(a.activation.map { "\($0)" } ?? a.typeName)"
        case let .clip(lo, hi): return "clip(\(lo), \(hi))"
        case let .unary(u): return "unary \(u.function.map { "\($0)" } ?? "type \(u.type)")"
        default: return typeName
        }
    }
}
