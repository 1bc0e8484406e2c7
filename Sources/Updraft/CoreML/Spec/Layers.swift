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
    public var values: [Float]
    public var encoding: WeightEncoding
    public var isUpdatable: Bool
    /// Bytes of rawValue / int8RawValue for the unsupported encodings.
    public var storedByteCount: Int

    public init(values: [Float], isUpdatable: Bool = false) {
        self.values = values; self.encoding = values.isEmpty ? .empty : .float32
        self.isUpdatable = isUpdatable; self.storedByteCount = values.count * 4
    }

    public init(values: [Float], encoding: WeightEncoding, isUpdatable: Bool, storedByteCount: Int) {
        self.values = values; self.encoding = encoding; self.isUpdatable = isUpdatable; self.storedByteCount = storedByteCount
    }

    public static let empty = WeightParams(values: [])

    /// Whether Updraft can read the values (float32, float16, or nothing).
    public var isReadable: Bool { encoding == .float32 || encoding == .float16 || encoding == .empty }
}

/// ConvolutionLayerParams. Sizes are as stored (uint64 clamped to Int); `spec()` checks them.
public struct ConvolutionLayerParams: Hashable, Sendable {
    public var outputChannels: Int
    public var kernelChannels: Int
    /// nGroups, with the file's 0 read as 1.
    public var groups: Int
    /// [kH, kW]; the file's empty list reads as Core ML's default [3, 3].
    public var kernelSize: [Int]
    /// [sH, sW]; default [1, 1].
    public var stride: [Int]
    /// [dH, dW]; default [1, 1].
    public var dilation: [Int]
    public var padding: ConvolutionPadding
    public var isDeconvolution: Bool
    public var hasBias: Bool
    public var weights: WeightParams
    public var bias: WeightParams?
    /// Deconvolution's output size, if given.
    public var outputShape: [Int]

    public init(outputChannels: Int, kernelChannels: Int, groups: Int = 1, kernelSize: [Int], stride: [Int] = [1, 1],
                dilation: [Int] = [1, 1], padding: ConvolutionPadding, isDeconvolution: Bool = false, hasBias: Bool,
                weights: WeightParams, bias: WeightParams?, outputShape: [Int] = []) {
        self.outputChannels = outputChannels; self.kernelChannels = kernelChannels; self.groups = groups
        self.kernelSize = kernelSize; self.stride = stride; self.dilation = dilation; self.padding = padding
        self.isDeconvolution = isDeconvolution; self.hasBias = hasBias; self.weights = weights; self.bias = bias
        self.outputShape = outputShape
    }

    public var parameterCount: Int { weights.values.count + (hasBias ? (bias?.values.count ?? 0) : 0) }
}

/// InnerProductLayerParams.
public struct InnerProductLayerParams: Hashable, Sendable {
    public var inputChannels: Int
    public var outputChannels: Int
    public var hasBias: Bool
    public var weights: WeightParams
    public var bias: WeightParams?
    public var int8DynamicQuantize: Bool

    public init(inputChannels: Int, outputChannels: Int, hasBias: Bool, weights: WeightParams, bias: WeightParams?,
                int8DynamicQuantize: Bool = false) {
        self.inputChannels = inputChannels; self.outputChannels = outputChannels; self.hasBias = hasBias
        self.weights = weights; self.bias = bias; self.int8DynamicQuantize = int8DynamicQuantize
    }

    public var spec: InnerProductSpec {
        InnerProductSpec(inputChannels: inputChannels, outputChannels: outputChannels, hasBias: hasBias)
    }
}

/// PoolingLayerParams. `type` is the raw PoolingType (MAX=0, AVERAGE=1, L2=2).
public struct PoolingLayerParams: Hashable, Sendable {
    public var type: Int32
    /// [kH, kW]; empty in the file reads as [3, 3].
    public var kernelSize: [Int]
    /// [sH, sW]; empty reads as [1, 1].
    public var stride: [Int]
    public var padding: PoolingPadding
    public var excludePadding: Bool
    public var global: Bool

    public init(type: Int32, kernelSize: [Int], stride: [Int], padding: PoolingPadding, excludePadding: Bool, global: Bool) {
        self.type = type; self.kernelSize = kernelSize; self.stride = stride; self.padding = padding
        self.excludePadding = excludePadding; self.global = global
    }

    public var typeName: String {
        switch type {
        case 0: return "MAX"
        case 1: return "AVERAGE"
        case 2: return "L2"
        default: return "pooling type \(type)"
        }
    }
}

/// ActivationParams: the oneof case's name and, for the ones Updraft runs, the activation.
public struct ActivationLayerParams: Hashable, Sendable {
    public var typeName: String
    public var typeField: Int
    public var activation: Activation?

    /// An ActivationParams case; clip and unary functions are layers of their own (`LayerParams.clip`,
    /// `.unary`) and read here as unsupported.
    public init(_ activation: Activation) {
        self.activation = activation
        let field: Int
        switch activation {
        case .linear: field = 5
        case .relu: field = 10
        case .leakyReLU: field = 15
        case .thresholdedReLU: field = 20
        case .prelu: field = 25
        case .tanh: field = 30
        case .scaledTanh: field = 31
        case .sigmoid: field = 40
        case .sigmoidHard: field = 41
        case .elu: field = 50
        case .softsign: field = 60
        case .softplus: field = 70
        case .parametricSoftplus: field = 71
        case .clip, .unary: field = 0; self.activation = nil
        }
        typeField = field
        typeName = activationTypeNames[field] ?? "\(activation) (not an ActivationParams case)"
    }

    public init(unsupported typeName: String, field: Int) {
        self.typeName = typeName; self.typeField = field; self.activation = nil
    }
}

/// UnaryFunctionLayerParams as stored (epilogue defaults not applied): `function` is nil for an
/// operation code NeuralNetwork.proto does not define.
public struct UnaryFunctionLayerParams: Hashable, Sendable {
    public var type: Int32
    public var alpha: Float
    public var epsilon: Float
    public var shift: Float
    public var scale: Float

    public init(type: Int32, alpha: Float = 0, epsilon: Float = 0, shift: Float = 0, scale: Float = 0) {
        self.type = type; self.alpha = alpha; self.epsilon = epsilon; self.shift = shift; self.scale = scale
    }

    public init(_ f: UnaryFunction) {
        self.init(type: f.operation.rawValue, alpha: f.alpha, epsilon: f.epsilon, shift: f.shift, scale: f.scale)
    }

    /// The function with NeuralNetwork.proto's defaults (epsilon 0 -> 1e-6, scale 0 -> 1).
    public var function: UnaryFunction? {
        UnaryFunction.Operation(rawValue: type).map { UnaryFunction($0, alpha: alpha, epsilon: epsilon, shift: shift, scale: scale) }
    }
}

/// BatchnormLayerParams. Updraft runs it frozen: y = gamma (x - mean) / sqrt(variance + epsilon) + beta.
public struct BatchnormLayerParams: Hashable, Sendable {
    public var channels: Int
    public var computeMeanVar: Bool
    public var instanceNormalization: Bool
    public var epsilon: Float
    public var gamma: WeightParams
    public var beta: WeightParams
    public var mean: WeightParams
    public var variance: WeightParams

    public init(channels: Int, epsilon: Float, gamma: WeightParams, beta: WeightParams, mean: WeightParams,
                variance: WeightParams, computeMeanVar: Bool = false, instanceNormalization: Bool = false) {
        self.channels = channels; self.epsilon = epsilon; self.gamma = gamma; self.beta = beta
        self.mean = mean; self.variance = variance
        self.computeMeanVar = computeMeanVar; self.instanceNormalization = instanceNormalization
    }
}

/// NeuralNetworkLayer's oneof, for the types Updraft knows.
public enum LayerParams: Hashable, Sendable {
    case convolution(ConvolutionLayerParams)
    case innerProduct(InnerProductLayerParams)
    case pooling(PoolingLayerParams)
    case activation(ActivationLayerParams)
    /// ConcatLayerParams.sequenceConcat (false: along channels).
    case concat(sequenceConcat: Bool)
    case softmax
    /// FlattenLayerParams.mode: CHANNEL_FIRST = 0, CHANNEL_LAST = 1.
    case flatten(mode: Int32)
    case batchnorm(BatchnormLayerParams)
    /// AddLayerParams.alpha (added when there is a single input).
    case add(alpha: Float)
    /// MultiplyLayerParams.alpha (multiplied when there is a single input).
    case multiply(alpha: Float)
    /// ClipLayerParams: y = min(max(x, minVal), maxVal).
    case clip(minVal: Float, maxVal: Float)
    case unary(UnaryFunctionLayerParams)
    case padding(PaddingLayerParams)
    case upsample(UpsampleLayerParams)
    case lrn(LRNLayerParams)
    /// L2NormalizeLayerParams.epsilon (0 reads as Core ML's default 1e-6).
    case l2normalize(epsilon: Float)
    /// add/subtract/multiply/divideBroadcastable (no fields): two inputs with numpy broadcasting.
    case broadcastable(BinaryOp)
    case loadConstant(LoadConstantLayerParams)
    case reduce(ReduceLayerParams)
    /// reduceSum, reduceMean, reduceMax.
    case reduceND(ReduceNDLayerParams)
    /// Reshape, squeeze, transpose, softmaxND, concatND, ... (Layers+Layout.swift).
    case layout(LayoutLayerParams)
    /// Any other layer type: its NeuralNetworkLayer field number and name.
    case unsupported(field: Int, name: String)

    /// The oneof field number.
    public var typeField: Int {
        switch self {
        case .convolution: return 100
        case .pooling: return 120
        case .activation: return 130
        case .innerProduct: return 140
        case .batchnorm: return 160
        case .softmax: return 175
        case .add: return 230
        case .multiply: return 231
        case .unary: return 220
        case .clip: return 660
        case .flatten: return 301
        case .concat: return 320
        case .l2normalize: return 170
        case .lrn: return 180
        case .padding: return 200
        case .upsample: return 210
        case let .broadcastable(op): return op.broadcastableLayerField
        case let .loadConstant(c): return c.isND ? 1070 : 290
        case .reduce: return 280
        case let .reduceND(r): return r.kind.field
        case let .layout(l): return l.typeField
        case let .unsupported(field, _): return field
        }
    }

    /// The oneof field name, as in NeuralNetwork.proto.
    public var typeName: String {
        switch self {
        case let .unsupported(_, name): return name
        default: return neuralNetworkLayerTypeName(typeField)
        }
    }
}

public struct LayerSpec: Hashable, Sendable {
    public var name: String
    public var inputs: [String]
    public var outputs: [String]
    public var isUpdatable: Bool
    public var params: LayerParams

    public init(name: String, inputs: [String], outputs: [String], isUpdatable: Bool = false, params: LayerParams) {
        self.name = name; self.inputs = inputs; self.outputs = outputs; self.isUpdatable = isUpdatable; self.params = params
    }

    public var typeName: String { params.typeName }

    /// Weights and bias of a convolution or inner product (nil for other layers).
    public var weightParams: (weights: WeightParams, bias: WeightParams?)? {
        switch params {
        case let .convolution(c): return (c.weights, c.hasBias ? c.bias : nil)
        case let .innerProduct(p): return (p.weights, p.hasBias ? p.bias : nil)
        default: return nil
        }
    }

    /// Learnable or stored values of this layer (weights, bias; batchnorm's four vectors).
    public var parameterCount: Int {
        switch params {
        case let .convolution(c): return c.parameterCount
        case let .innerProduct(p): return p.weights.values.count + (p.hasBias ? (p.bias?.values.count ?? 0) : 0)
        case let .batchnorm(b):
            return b.gamma.values.count + b.beta.values.count + b.mean.values.count + b.variance.values.count
        default: return 0
        }
    }
}
