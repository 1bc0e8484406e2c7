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

/// PoolingLayerParams. `type` is the raw PoolingType (MAX=0, AVERAGE=1, L2=2).
public struct PoolingLayerParams: Hashable, Sendable {
    /// PoolingLayerParams.type: 0 MAX, 1 AVERAGE, 2 L2 (any other value kept as read).
    public var type: Int32
    /// [kH, kW]; empty in the file reads as [3, 3].
    public var kernelSize: [Int]
    /// [sH, sW]; empty reads as [1, 1].
    public var stride: [Int]
    /// Valid (with explicit amounts), same, or includeLastPixel padding.
    public var padding: PoolingPadding
    /// PoolingLayerParams.avgPoolExcludePadding: average only over real (not padded) pixels.
    public var excludePadding: Bool
    /// PoolingLayerParams.globalPooling: pool over the whole spatial extent, ignoring kernel size and stride.
    public var global: Bool

    /// Pooling parameters as stored; no defaults applied.
    public init(type: Int32, kernelSize: [Int], stride: [Int], padding: PoolingPadding, excludePadding: Bool, global: Bool) {
        self.type = type; self.kernelSize = kernelSize; self.stride = stride; self.padding = padding
        self.excludePadding = excludePadding; self.global = global
    }

    /// The PoolingType name (`MAX`, `AVERAGE`, `L2`), or "pooling type N" for an unknown one.
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
    /// The ActivationParams oneof field name (e.g. `ReLU`, `sigmoid`).
    public var typeName: String
    /// The ActivationParams oneof field number (0 when built from a clip or unary function).
    public var typeField: Int
    /// The activation Updraft runs; nil for a type it cannot.
    public var activation: Activation?

    /// An ActivationParams case; clip and unary functions are layers of their own (`LayerParams.clip`,
    /// `.unary`) and read here as unsupported.
    public init(_ activation: Activation) {
        self.activation = activation
        let type: ActivationParamsType?
        switch activation {
        case .linear: type = .linear
        case .relu: type = .ReLU
        case .leakyReLU: type = .leakyReLU
        case .thresholdedReLU: type = .thresholdedReLU
        case .prelu: type = .PReLU
        case .tanh: type = .tanh
        case .scaledTanh: type = .scaledTanh
        case .sigmoid: type = .sigmoid
        case .sigmoidHard: type = .sigmoidHard
        case .elu: type = .ELU
        case .softsign: type = .softsign
        case .softplus: type = .softplus
        case .parametricSoftplus: type = .parametricSoftplus
        case .clip, .unary: type = nil; self.activation = nil
        }
        typeField = type?.rawValue ?? 0
        typeName = type?.name ?? "\(activation) (not an ActivationParams case)"
    }

    /// An activation Updraft cannot run, identified by its oneof name and field number.
    public init(unsupported typeName: String, field: Int) {
        self.typeName = typeName; self.typeField = field; self.activation = nil
    }
}

/// UnaryFunctionLayerParams as stored (epilogue defaults not applied): `function` is nil for an
/// operation code NeuralNetwork.proto does not define.
public struct UnaryFunctionLayerParams: Hashable, Sendable {
    /// UnaryFunctionLayerParams.type: the Operation code (SQRT 0, RSQRT 1, INVERSE 2, POWER 3, EXP 4, LOG 5, ABS 6, THRESHOLD 7).
    public var type: Int32
    /// UnaryFunctionLayerParams.alpha: the exponent (POWER) or threshold (THRESHOLD).
    public var alpha: Float
    /// UnaryFunctionLayerParams.epsilon as stored (0 means Core ML's 1e-6).
    public var epsilon: Float
    /// UnaryFunctionLayerParams.shift, added to x before the function.
    public var shift: Float
    /// UnaryFunctionLayerParams.scale as stored (0 means Core ML's 1), multiplied with x before the function.
    public var scale: Float

    /// Stored values; zeros mean "use Core ML's default" where the proto says so.
    public init(type: Int32, alpha: Float = 0, epsilon: Float = 0, shift: Float = 0, scale: Float = 0) {
        self.type = type; self.alpha = alpha; self.epsilon = epsilon; self.shift = shift; self.scale = scale
    }

    /// The stored form of `f`.
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
