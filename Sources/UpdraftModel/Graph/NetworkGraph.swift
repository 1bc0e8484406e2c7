import UpdraftCore

/// A model's network as something to execute: layers in topological order, connected by blob
/// names, with every blob's shape inferred from the input description and the op specs in Ops/.
///
/// Shapes are per example, NCHW with batch 1: `[1, C, H, W]`. Vectors (inner product and flatten
/// outputs) are `[1, C, 1, 1]`, which has the same memory layout as `[1, C]`. For a batch of N use
/// `shape.withBatch(N)` and the specs' `geometry(input:)`.
/// What a layer computes, with the parameters the op needs. Weights live in `GraphLayer`.
public enum LayerOp: Hashable, Sendable {
    /// Convolution, weights `[C_out, C_in/groups, kH, kW]` and optional bias in `GraphLayer` (Backend.convolutionForward).
    case convolution(ConvolutionSpec)
    /// Inner product on the flattened input, weights `[C_out, C_in]` and optional bias in `GraphLayer`.
    case innerProduct(InnerProductSpec)
    /// An element-wise function: Core ML's activation, clip or unary-function layer.
    case activation(Activation)
    /// Max or average pooling, windowed or global.
    case pooling(PoolingSpec)
    /// Concatenation of all inputs along channels (Backend.concatForward).
    case concat
    /// Softmax over channels (Backend.softmaxForward with SoftmaxGeometry(shape:)).
    case softmax
    /// CHANNEL_FIRST flatten to `[1, C*H*W, 1, 1]`: free in NCHW (a copy or an alias).
    case flatten
    /// Frozen batchnorm as y[c] = scale[c] * x[c] + shift[c] (Backend.channelAffine), precomputed as
    /// scale = gamma / sqrt(variance + epsilon), shift = beta - mean * scale.
    case batchnorm(scale: [Float], shift: [Float])
    /// Element-wise sum of all inputs (same shape), folded pairwise with Backend.elementwise(.add).
    case add
    /// Element-wise product of all inputs (same shape), folded pairwise with Backend.elementwise(.multiply).
    case multiply
    /// Padding, upsample, LRN, L2 normalize (Backend.spatialForward with `op.geometry(input:)`).
    case spatial(SpatialOp)
    /// Instance normalization (Backend.spatialForward) then the frozen gamma and beta as a channel
    /// affine (scale = gamma, shift = beta).
    case instanceNormalization(epsilon: Float, scale: [Float], shift: [Float])
    /// Two inputs with numpy broadcasting of their per-example shapes `a` and `b` (the batch is
    /// prepended when run: BroadcastGeometry over [N] + a and [N] + b).
    case broadcast(BinaryOp, a: [Int], b: [Int])
    /// A frozen constant (`GraphLayer.weights`), the same for every example; it reads no input.
    case constant
    /// A reduction of the per-example shape `spec.input` to `spec.output` (1 on the reduced axes) by one
    /// of the Core ML modes (Ops/Reduce.swift). The output blob may drop the reduced axes (keepDims
    /// false): the memory is the same.
    case reduce(ReductionSpec)
    /// Layout ops: shape re-labelling (aliases), transpose, softmaxND, concatND (Ops/Layout.swift).
    case layout(LayoutOp)
    /// An open family's op (LayerFamily.swift): layer normalization, … Its kind is the family's.
    case family(FamilyOp)

    /// Short label for logs and error messages, e.g. "convolution", "activation(relu)", "pooling(global max)".
    public var name: String {
        switch self {
        case .convolution: return "convolution"
        case .innerProduct: return "innerProduct"
        case let .activation(a): return "activation(\(a))"
        case let .pooling(p): return p.global ? "pooling(global \(p.kind))" : "pooling(\(p.kind))"
        case .concat: return "concat"
        case .softmax: return "softmax"
        case .flatten: return "flatten"
        case .batchnorm: return "batchnorm"
        case .add: return "add"
        case .multiply: return "multiply"
        case let .spatial(op): return op.familyName
        case .instanceNormalization: return "instanceNormalization"
        case let .broadcast(op, _, _): return "broadcast(\(op.rawValue))"
        case .constant: return "constant"
        case let .reduce(r): return "reduce(\(r.mode.isMean ? "mean" : r.mode.kind.rawValue))"
        case let .layout(l): return l.name
        case let .family(f): return f.base.name
        }
    }

    /// Whether a gradient flows back through the op; false for an index (argMax, argMin), which the
    /// training graph refuses on the trained path.
    public var hasGradient: Bool {
        if case let .reduce(r) = self { return r.mode.kind.hasGradient }
        return true
    }
}

/// One layer of the network: its op, the blobs it reads and writes with their per-example shapes, and its frozen or trainable parameters.
public struct GraphLayer: Sendable {
    /// The layer's name from the model file (NeuralNetworkLayer.name); unique within the graph.
    public var name: String
    /// Position of the layer in the model file (the graph's order is topological, which may differ).
    public var modelIndex: Int
    /// What the layer computes, resolved from the model's layer parameters.
    public var op: LayerOp
    /// Input blob names, in the layer's order.
    public var inputs: [String]
    /// Name of the blob the layer writes (the layer's single output in the model file).
    public var output: String
    /// Per-example shapes of the inputs, in `inputs` order.
    public var inputShapes: [Shape]
    /// Per-example NCHW shape of the output blob (batch 1).
    public var outputShape: Shape
    /// The inputs' and the output's logical (N-D) shapes, as the model's layers see them (LogicalShape).
    public var inputLogicalShapes: [LogicalShape]
    /// The output's logical (N-D) shape as the model declares it; `outputShape` is its canonical NCHW form.
    public var outputLogicalShape: LogicalShape
    /// The model marks this layer updatable (only convolution and inner product can be).
    public var isUpdatable: Bool
    /// Convolution `[C_out, C_in/groups, kH, kW]` or inner product `[C_out, C_in]`; nil for other ops.
    public var weights: Tensor?
    /// `[C_out]`, or nil (no bias, or an op without parameters).
    public var bias: Tensor?

    /// Per-example shape of the first input; traps for a layer without inputs (`.constant`).
    public var inputShape: Shape { inputShapes[0] }

    /// Number of stored parameters (weights and bias; batchnorm's scale and shift).
    public var parameterCount: Int {
        if let (scale, shift) = op.channelScaleShift { return scale.count + shift.count }
        return (weights?.count ?? 0) + (bias?.count ?? 0)
    }

    // Geometries for a batch of `batch` examples.
    /// The convolution resolved for `batch` examples, or nil if the layer is not a convolution. Throws `UpdraftError` (`.invalidArgument`) if the spec does not fit the input shape.
    public func convolutionGeometry(batch: Int) throws -> ConvGeometry? {
        guard case let .convolution(spec) = op else { return nil }
        return try spec.geometry(input: inputShape.withBatch(batch))
    }
    /// The inner product resolved for `batch` examples, or nil for another op. Throws `UpdraftError` if the input's per-example element count is not the spec's input channels.
    public func innerProductGeometry(batch: Int) throws -> InnerProductGeometry? {
        guard case let .innerProduct(spec) = op else { return nil }
        return try spec.geometry(input: inputShape.withBatch(batch))
    }
    /// The spatial op (or instance normalization) resolved for `batch` examples, or nil for another op. Throws `UpdraftError` if the op does not fit the input shape.
    public func spatialGeometry(batch: Int) throws -> SpatialGeometry? {
        switch op {
        case let .spatial(s): return try s.geometry(input: inputShape.withBatch(batch))
        case let .instanceNormalization(epsilon, _, _):
            return try SpatialOp.instanceNormalization(epsilon: epsilon).geometry(input: inputShape.withBatch(batch))
        default: return nil
        }
    }
    /// The broadcast op over `[batch] + a` and `[batch] + b`, or nil for another op. Throws `UpdraftError` if the shapes do not broadcast.
    public func broadcastGeometry(batch: Int) throws -> BroadcastGeometry? {
        guard case let .broadcast(op, a, b) = op else { return nil }
        return try BroadcastGeometry(op: op, a: [batch] + a, b: [batch] + b)
    }
    /// The reduction over `[batch] + input` to `[batch] + output` (mean scales by 1 / reduced count), or nil for another op. Throws `UpdraftError` from `ReductionGeometry.validate()`.
    public func reductionGeometry(batch: Int) throws -> ReductionGeometry? {
        guard case let .reduce(spec) = op else { return nil }
        return try spec.geometry(batch: batch)
    }
    /// The pooling resolved for `batch` examples, or nil for another op. Throws `UpdraftError` if the window does not fit the padded input.
    public func poolingGeometry(batch: Int) throws -> PoolGeometry? {
        guard case let .pooling(spec) = op else { return nil }
        return try spec.geometry(input: inputShape.withBatch(batch))
    }
}

/// The network input after preprocessing: `x = scale * pixel + bias[c]` for images.
public struct GraphInput: Sendable {
    /// Name of the input feature (blob) in the model description; layers read it by this name.
    public var name: String
    /// The model's description of the input feature (image or multi-array, with its type and size).
    public var feature: FeatureDescription
    /// Per-example shape `[1, C, H, W]`.
    public var shape: Shape
    /// The shape the model declares (`[1, N]`, `[C, H, W]`, ...; LogicalShape), of which `shape` is the canonical form.
    public var logicalShape: LogicalShape
    /// The image scaler, resolved to the tensor's channel order (nil: values pass unchanged).
    public var preprocessing: InputPreprocessing?
}

/// An image input's scaler (Core ML's NeuralNetworkImageScaler): `x = scale * pixel + bias[c]`.
public struct InputPreprocessing: Hashable, Sendable {
    /// Multiplier applied to every pixel value before the bias (NeuralNetworkImageScaler.channelScale, as the file stores it).
    public var scale: Float
    /// One bias per channel, in the input tensor's channel order (R, G, B for RGB; B, G, R for BGR).
    public var bias: [Float]
}

/// How the loss target arrives in a training example.
public enum LossTargetEncoding: Hashable, Sendable {
    /// A String or Int64 class label, mapped to its index in the class labels.
    case classLabel(ClassLabels)
    /// A class index given as a number (an Int64 feature or a one-element multi-array).
    case classIndex
    /// Values with the loss input's element count (mean squared error).
    case values(Shape)
}

/// The training loss of an updatable model, resolved from its update parameters' loss layer.
public struct GraphLoss: Sendable {
    /// The loss layer's name in the model's update parameters.
    public var name: String
    /// Which loss the model trains with (categorical cross-entropy or mean squared error).
    public var kind: LossKind
    /// The blob the loss reads (for cross-entropy, a softmax output).
    public var input: String
    /// Per-example NCHW shape of the `input` blob.
    public var inputShape: Shape
    /// For cross-entropy on a softmax output: the softmax layer and its input (the logits), so the
    /// executor can run the fused Backend.softmaxCrossEntropy on the logits.
    public var softmaxLayer: String?
    /// The softmax layer's input blob (the logits); set together with `softmaxLayer`, nil otherwise.
    public var logits: String?
    /// The training input holding the target, and how to read it.
    public var targetFeature: FeatureDescription
    /// How the value in `targetFeature` maps to the loss target (class label, class index or values).
    public var targetEncoding: LossTargetEncoding
}

/// A model's network as something to execute: layers in topological order, connected by blob names, with every blob's shape inferred (see the notes at the top of NetworkGraph.swift).
public struct NetworkGraph: Sendable {
    /// Which kind of neural network the model holds (plain, classifier or regressor), which decides its outputs.
    public var kind: NeuralNetworkKind
    /// The network's single input and its preprocessing.
    public var input: GraphInput
    /// Topological order: every layer comes after the layers producing its inputs; ties keep file order.
    public internal(set) var layers: [GraphLayer] { didSet { lookup = GraphLookup(layers) } }
    /// Every blob's per-example shape, the input included.
    public var blobShapes: [String: Shape]
    /// Every blob's logical (N-D) shape, the input included (`logicalShape(of:)` reads it).
    public var blobLogicalShapes: [String: LogicalShape]
    /// The loss, when the model has update parameters that Updraft can resolve (see `requireLoss`).
    public var loss: GraphLoss?
    /// Why `loss` is nil although the model has a loss layer.
    public var lossProblem: UpdraftError?
    /// A classifier's class labels (strings or Int64s), nil for other network kinds.
    public var classLabels: ClassLabels?
    /// Output feature holding a classifier's predicted label (the model's predictedFeatureName).
    public var predictedFeatureName: String
    /// Output feature holding a classifier's per-class probabilities (the model's predictedProbabilitiesName).
    public var predictedProbabilitiesName: String
    /// The model's NetworkUpdateParameters (loss, optimizer, epochs), nil for a model that is not updatable.
    public var updateParameters: UpdateParameters?

    /// Positions in `layers` by layer name, output blob and input blob, built with the graph so
    /// that lookups take constant time (a chain of 200,000 layers looks each one up).
    var lookup = GraphLookup()

    /// The layer with this name, or nil; constant time.
    public func layer(named name: String) -> GraphLayer? { lookup.byName[name].map { layers[$0] } }
    /// The layer producing a blob (nil for the network input).
    public func producer(of blob: String) -> GraphLayer? { lookup.byOutput[blob].map { layers[$0] } }
    /// Layers that read a blob.
    public func consumers(of blob: String) -> [GraphLayer] { (lookup.byInput[blob] ?? []).map { layers[$0] } }
    /// The layers the model marks updatable (their weights and bias train), in topological order.
    public var updatableLayers: [GraphLayer] { layers.filter(\.isUpdatable) }
    /// Total stored parameters over all layers (see `GraphLayer.parameterCount`).
    public var parameterCount: Int { layers.reduce(0) { $0 + $1.parameterCount } }
    /// The training hyperparameters the update parameters declare (empty without update parameters).
    public var hyperparameters: [Hyperparameter] { updateParameters?.hyperparameters ?? [] }

    /// The loss, or the reason training cannot use it.
    public func requireLoss() throws -> GraphLoss {
        if let loss { return loss }
        throw lossProblem ?? UpdraftError(.invalidModel, "the model has no loss layer (updateParams.lossLayers is empty)",
                                          hint: "make the model updatable with a loss (coremltools: set_categorical_cross_entropy_loss)")
    }
}

public extension Shape {
    /// The same shape with the batch (first) dimension replaced.
    func withBatch(_ n: Int) -> Shape {
        guard !dims.isEmpty else { return Shape([n]) }
        var d = dims
        d[0] = n
        return Shape(d)
    }
}

/// `NetworkGraph`'s indexes into `layers`, rebuilt whenever `layers` is set.
struct GraphLookup: Sendable {
    var byName: [String: Int] = [:]
    var byOutput: [String: Int] = [:]
    var byInput: [String: [Int]] = [:]

    init() {}
    init(_ layers: [GraphLayer]) {
        byName.reserveCapacity(layers.count)
        byOutput.reserveCapacity(layers.count)
        for (i, l) in layers.enumerated() {
            if byName[l.name] == nil { byName[l.name] = i }
            if byOutput[l.output] == nil { byOutput[l.output] = i }
            var seen: Set<String> = []
            for b in l.inputs where seen.insert(b).inserted { byInput[b, default: []].append(i) }
        }
    }
}

extension LayerOp {
    /// The per-channel scale and shift a layer applies with Backend.channelAffine (frozen batchnorm,
    /// instance normalization's gamma and beta); nil for other ops.
    package var channelScaleShift: (scale: [Float], shift: [Float])? {
        switch self {
        case let .batchnorm(scale, shift), let .instanceNormalization(_, scale, shift): return (scale, shift)
        default: return nil
        }
    }
}
