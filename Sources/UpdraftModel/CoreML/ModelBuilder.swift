import UpdraftCore

/// Builds Core ML neural network models in Swift, the way coremltools' NeuralNetworkBuilder does:
/// add layers (shapes are tracked as you go, so mistakes fail at the layer that makes them), then
/// make layers updatable, set a loss, an optimizer and epochs, and `build()`.
///
///     var b = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(.init(shape: [4], dataType: .double))))
///     try b.innerProduct("dense", outputChannels: 3)
///     try b.softmax("probs")
///     try b.makeClassifier(labels: .strings(["a", "b", "c"]), probabilities: "probs")
///     try b.makeUpdatable(["dense"])
///     try b.setCrossEntropyLoss(input: "probs")
///     b.setOptimizer(.sgd(learningRate: 0.01, miniBatchSize: 4))
///     b.setEpochs(10)
///     let model = try b.build()
///
/// Weights not given are Kaiming-uniform, U(-sqrt(6 / fanIn), +sqrt(6 / fanIn)), drawn from a
/// SplitMix64 seeded per layer from the builder's seed, in the order layers are added; biases are 0.
public struct ModelBuilder {
    /// The model description so far: the input, the declared outputs, training inputs and metadata.
    public private(set) var description: ModelDescription
    /// The network so far: layers in the order added, kind, preprocessing, class labels and update parameters.
    public private(set) var network: NeuralNetworkSpec
    /// Set by `makeUpdatable(_:)`; becomes Model.isUpdatable.
    public private(set) var isUpdatable = false
    /// Model.specificationVersion to write; 4 (iOS 13, the first with on-device update) by default.
    public var specificationVersion: Int32 = 4
    /// Per-example shape of every blob so far, `[1, C, H, W]`.
    public private(set) var shapes: [String: Shape]
    /// Logical (N-D) shape of every blob so far (LogicalShape).
    public private(set) var logicalShapes: [String: LogicalShape] = [:]
    /// The most recent layer's output: the default input of the next layer.
    public private(set) var lastOutput: String
    private var rng: SplitMix64
    /// Positions of the layers by name, so adding a layer takes constant time.
    private var layerIndex: [String: Int] = [:]

    /// A builder for a network reading `input` (an image or a multi-array); `seed` seeds the default weights.
    /// - Throws: `UpdraftError` when Updraft cannot take the input as a network input.
    public init(input: FeatureDescription, seed: UInt64 = 0) throws {
        description = ModelDescription(inputs: [input], outputs: [])
        network = NeuralNetworkSpec(kind: .plain, layers: [])
        rng = SplitMix64(seed: seed)
        lastOutput = input.name
        shapes = [:]
        let probe = CoreMLModel(spec: ModelSpec(specificationVersion: 4, description: description, isUpdatable: false, network: network))
        let resolved = try NetworkGraph.resolveInput(probe)
        shapes[input.name] = resolved.shape
        logicalShapes[input.name] = resolved.logicalShape
    }

    /// Sets the image scaler for the (image) input: y = channelScale * pixel + bias.
    public mutating func setImageScaler(_ scaler: ImageScaler) {
        network.preprocessing = [PreprocessingSpec(featureName: description.inputs[0].name, scaler: scaler)]
    }

    /// Replaces the model's metadata (author, license, description, version, user-defined pairs).
    public mutating func setMetadata(_ metadata: ModelMetadata) { description.metadata = metadata }

    // MARK: Layers

    /// Adds a layer, inferring its output shape with the graph's rules (the same code that reads models).
    @discardableResult
    public mutating func add(_ layer: LayerSpec) throws -> String {
        guard layerIndex[layer.name] == nil else {
            throw UpdraftError(.invalidArgument, "a layer named '\(layer.name)' already exists")
        }
        let inputShapes = try layer.inputs.map { blob -> Shape in
            guard let s = shapes[blob] else {
                throw UpdraftError(.invalidArgument, "layer '\(layer.name)' reads blob '\(blob)', which does not exist yet")
            }
            return s
        }
        guard layer.outputs.count == 1, shapes[layer.outputs[0]] == nil else {
            throw UpdraftError(.invalidArgument, "layer '\(layer.name)' must write one new blob, not \(layer.outputs)")
        }
        let g = try ShapeInference.layer(layer, index: network.layers.count, inputShapes: inputShapes,
                                         inputLogicalShapes: layer.inputs.compactMap { logicalShapes[$0] })
        layerIndex[layer.name] = network.layers.count
        network.layers.append(layer)
        shapes[g.output] = g.outputShape
        logicalShapes[g.output] = g.outputLogicalShape
        lastOutput = g.output
        return g.output
    }

    private func currentShape(_ blob: String) throws -> Shape {
        guard let s = shapes[blob] else { throw UpdraftError(.invalidArgument, "blob '\(blob)' does not exist") }
        return s
    }

    /// Kaiming-uniform values for `shape` with the given fan-in.
    private mutating func kaiming(_ shape: Shape, fanIn: Int) -> [Float] {
        let bound = Float((6.0 / Double(max(1, fanIn))).squareRoot())
        return Tensor(shape: shape, uniformIn: -bound...bound, seed: rng.next()).data
    }

    /// Adds a convolution with `outputChannels` kernels of size `kernel`, reading `input` (default: the last output).
    /// Weights `[C_out, C_in/groups, kH, kW]` and bias `[C_out]` default to Kaiming-uniform and zeros.
    /// - Returns: the output blob's name (`output`, default `name`).
    /// - Throws: `UpdraftError` when `groups` does not divide the input channels, a blob is missing or taken, or the shapes do not work out.
    @discardableResult
    public mutating func convolution(_ name: String, input: String? = nil, output: String? = nil, outputChannels: Int,
                                     kernel: (h: Int, w: Int), stride: (h: Int, w: Int) = (1, 1),
                                     padding: ConvolutionPadding = .none, groups: Int = 1, hasBias: Bool = true,
                                     weights: Tensor? = nil, bias: Tensor? = nil) throws -> String {
        let source = input ?? lastOutput
        let inChannels = try currentShape(source).c
        guard groups >= 1, inChannels % groups == 0 else {
            throw UpdraftError(.invalidArgument, "convolution '\(name)': groups \(groups) must divide the \(inChannels) input channels")
        }
        let kernelChannels = inChannels / groups
        let wShape: Shape = [outputChannels, kernelChannels, kernel.h, kernel.w]
        let w = weights?.data ?? kaiming(wShape, fanIn: kernelChannels * kernel.h * kernel.w)
        let b = bias?.data ?? [Float](repeating: 0, count: outputChannels)
        let params = ConvolutionLayerParams(outputChannels: outputChannels, kernelChannels: kernelChannels, groups: groups,
                                            kernelSize: [kernel.h, kernel.w], stride: [stride.h, stride.w], padding: padding,
                                            hasBias: hasBias, weights: WeightParams(values: w),
                                            bias: hasBias ? WeightParams(values: b) : nil)
        return try add(LayerSpec(name: name, inputs: [source], outputs: [output ?? name], params: .convolution(params)))
    }

    /// Adds an inner product (fully connected) layer with `outputChannels` outputs over all of the input's values.
    /// Weights `[C_out, C_in]` and bias `[C_out]` default to Kaiming-uniform and zeros.
    /// - Returns: the output blob's name.
    /// - Throws: `UpdraftError` for a missing input or taken output blob.
    @discardableResult
    public mutating func innerProduct(_ name: String, input: String? = nil, output: String? = nil, outputChannels: Int,
                                      hasBias: Bool = true, weights: Tensor? = nil, bias: Tensor? = nil) throws -> String {
        let source = input ?? lastOutput
        let inChannels = try currentShape(source).itemCount
        let w = weights?.data ?? kaiming([outputChannels, inChannels], fanIn: inChannels)
        let b = bias?.data ?? [Float](repeating: 0, count: outputChannels)
        let params = InnerProductLayerParams(inputChannels: inChannels, outputChannels: outputChannels, hasBias: hasBias,
                                             weights: WeightParams(values: w), bias: hasBias ? WeightParams(values: b) : nil)
        return try add(LayerSpec(name: name, inputs: [source], outputs: [output ?? name], params: .innerProduct(params)))
    }

    /// An element-wise function: an activation layer for the ActivationParams kinds, a clip layer for
    /// `.clip`, a unary layer for `.unary`.
    @discardableResult
    public mutating func activation(_ name: String, _ activation: Activation, input: String? = nil,
                                    output: String? = nil) throws -> String {
        let params: LayerParams
        switch activation {
        case let .clip(lo, hi): params = .clip(minVal: lo, maxVal: hi)
        case let .unary(f): params = .unary(UnaryFunctionLayerParams(f))
        default: params = .activation(ActivationLayerParams(activation))
        }
        return try add(LayerSpec(name: name, inputs: [input ?? lastOutput], outputs: [output ?? name], params: params))
    }

    /// Pooling; `kind` MAX or AVERAGE. For global pooling pass `global: true` (kernel and stride ignored).
    @discardableResult
    public mutating func pooling(_ name: String, _ kind: PoolingKind, input: String? = nil, output: String? = nil,
                                 kernel: (h: Int, w: Int) = (2, 2), stride: (h: Int, w: Int) = (2, 2),
                                 padding: PoolingPadding = .none, excludePadding: Bool = true,
                                 global: Bool = false) throws -> String {
        let params = PoolingLayerParams(type: Int32(kind.rawValue), kernelSize: [kernel.h, kernel.w],
                                        stride: [stride.h, stride.w], padding: padding, excludePadding: excludePadding,
                                        global: global)
        return try add(LayerSpec(name: name, inputs: [input ?? lastOutput], outputs: [output ?? name], params: .pooling(params)))
    }

    /// Adds a concat along channels of `inputs` (which must agree in height and width); returns the output blob's name.
    @discardableResult
    public mutating func concat(_ name: String, inputs: [String], output: String? = nil) throws -> String {
        try add(LayerSpec(name: name, inputs: inputs, outputs: [output ?? name], params: .concat(sequenceConcat: false)))
    }

    /// Adds a softmax over channels; returns the output blob's name.
    @discardableResult
    public mutating func softmax(_ name: String, input: String? = nil, output: String? = nil) throws -> String {
        try add(LayerSpec(name: name, inputs: [input ?? lastOutput], outputs: [output ?? name], params: .softmax))
    }

    /// Adds a flatten (CHANNEL_FIRST) to a `[C*H*W]` vector; returns the output blob's name.
    @discardableResult
    public mutating func flatten(_ name: String, input: String? = nil, output: String? = nil) throws -> String {
        try add(LayerSpec(name: name, inputs: [input ?? lastOutput], outputs: [output ?? name], params: .flatten(mode: 0)))
    }

    /// Frozen batchnorm with given statistics (each `[C]`).
    @discardableResult
    public mutating func batchnorm(_ name: String, input: String? = nil, output: String? = nil, gamma: [Float],
                                   beta: [Float], mean: [Float], variance: [Float], epsilon: Float = 1e-5) throws -> String {
        let source = input ?? lastOutput
        let params = BatchnormLayerParams(channels: try currentShape(source).c, epsilon: epsilon,
                                          gamma: WeightParams(values: gamma), beta: WeightParams(values: beta),
                                          mean: WeightParams(values: mean), variance: WeightParams(values: variance))
        return try add(LayerSpec(name: name, inputs: [source], outputs: [output ?? name], params: .batchnorm(params)))
    }

    /// Adds an element-wise sum of `inputs` (same shapes); returns the output blob's name.
    @discardableResult
    public mutating func add(_ name: String, inputs: [String], output: String? = nil) throws -> String {
        try add(LayerSpec(name: name, inputs: inputs, outputs: [output ?? name], params: .add(alpha: 0)))
    }

    /// Adds an element-wise product of `inputs` (same shapes); returns the output blob's name.
    @discardableResult
    public mutating func multiply(_ name: String, inputs: [String], output: String? = nil) throws -> String {
        try add(LayerSpec(name: name, inputs: inputs, outputs: [output ?? name], params: .multiply(alpha: 0)))
    }

    // MARK: Outputs

    /// Declares a blob as a multi-array output (float64, shape [C] or [C, H, W]).
    public mutating func addOutput(_ blob: String) throws {
        let s = try currentShape(blob)
        let shape = s.h == 1 && s.w == 1 ? [s.c] : [s.c, s.h, s.w]
        description.outputs.append(FeatureDescription(name: blob, type: .multiArray(ArrayFeatureType(shape: shape, dataType: .double))))
    }

    /// Makes the network a classifier: `probabilities` (a softmax output) becomes the probabilities
    /// output, a dictionary label -> probability, and `predictedFeatureName` the label output.
    public mutating func makeClassifier(labels: ClassLabels, probabilities: String, predictedFeatureName: String = "label") throws {
        let s = try currentShape(probabilities)
        guard labels.count == s.itemCount else {
            throw UpdraftError(.invalidArgument, "\(labels.count) class labels for a probabilities blob of \(s.itemCount) classes")
        }
        network.kind = .classifier
        network.classLabels = labels
        network.labelProbabilityLayerName = probabilities
        let isString: Bool
        if case .strings = labels { isString = true } else { isString = false }
        description.outputs.removeAll { $0.name == probabilities || $0.name == predictedFeatureName }
        description.outputs.append(FeatureDescription(name: probabilities, type: .dictionary(isString ? .string : .int64)))
        description.outputs.append(FeatureDescription(name: predictedFeatureName, type: isString ? .string : .int64))
        description.predictedFeatureName = predictedFeatureName
        description.predictedProbabilitiesName = probabilities
    }

    /// The usual classifier head on the last blob, in this order: global average pooling `pool`, a
    /// flatten, the inner product `dense` to one output per label, softmax `softmax` into
    /// `probabilities`, then `makeClassifier` (the label output named `predictedFeatureName`).
    public mutating func globalPoolClassifierHead(pool: String, flatten flattenName: String = "flatten", dense: String,
                                                  labels: ClassLabels, softmax softmaxName: String = "softmax",
                                                  probabilities: String = "probabilities",
                                                  predictedFeatureName: String = "label") throws {
        try pooling(pool, .average, global: true)
        try flatten(flattenName)
        try innerProduct(dense, outputChannels: labels.count)
        try softmax(softmaxName, output: probabilities)
        try makeClassifier(labels: labels, probabilities: probabilities, predictedFeatureName: predictedFeatureName)
    }

    /// A SqueezeNet fire module on the last blob, in this order: `name/squeeze1x1` (1x1, `squeeze`
    /// channels) and its ReLU, then on it `name/expand1x1` (1x1) and `name/expand3x3` (3x3, same
    /// padding), each with its ReLU, concatenated by `name/concat`; returns the concat's output.
    @discardableResult
    public mutating func fireModule(_ name: String, squeeze: Int, expand1x1: Int, expand3x3: Int) throws -> String {
        try convolution("\(name)/squeeze1x1", outputChannels: squeeze, kernel: (1, 1))
        let squeezed = try activation("\(name)/relu_squeeze1x1", .relu)
        try convolution("\(name)/expand1x1", input: squeezed, outputChannels: expand1x1, kernel: (1, 1))
        let left = try activation("\(name)/relu_expand1x1", .relu)
        try convolution("\(name)/expand3x3", input: squeezed, outputChannels: expand3x3, kernel: (3, 3),
                        padding: .same(.bottomRightHeavy))
        let right = try activation("\(name)/relu_expand3x3", .relu)
        return try concat("\(name)/concat", inputs: [left, right])
    }

    /// Makes the network a NeuralNetworkRegressor (its outputs are the declared multi-array outputs).
    public mutating func makeRegressor() { network.kind = .regressor }

    // MARK: Training

    /// Marks layers (convolution or inner product) updatable, with their weights and bias, and the model updatable.
    public mutating func makeUpdatable(_ names: [String]) throws {
        for name in names {
            guard let i = layerIndex[name] else {
                throw UpdraftError(.invalidArgument, "cannot make '\(name)' updatable: there is no layer of that name",
                                   hint: "layers: " + network.layers.map(\.name).joined(separator: ", "))
            }
            switch network.layers[i].params {
            case var .convolution(c):
                c.weights.isUpdatable = true
                c.bias?.isUpdatable = true
                network.layers[i].params = .convolution(c)
            case var .innerProduct(p):
                p.weights.isUpdatable = true
                p.bias?.isUpdatable = true
                network.layers[i].params = .innerProduct(p)
            default:
                throw UpdraftError(.invalidArgument,
                    "cannot make '\(name)' updatable: it is a \(network.layers[i].typeName) layer; only convolution and innerProduct layers can be")
            }
            network.layers[i].isUpdatable = true
        }
        isUpdatable = true
        specificationVersion = max(specificationVersion, 4)
        if network.updateParameters == nil { network.updateParameters = UpdateParameters(shuffle: BoolParameter(defaultValue: true)) }
    }

    private mutating func setTrainingInputs(target: FeatureDescription) {
        description.trainingInputs = description.inputs + [target]
    }

    /// Categorical cross-entropy on a softmax output. Like coremltools, the target is named
    /// "<input>_true"; for a classifier's probabilities the training input is the label feature.
    public mutating func setCrossEntropyLoss(name: String = "lossLayer", input: String) throws {
        guard let producer = network.layers.first(where: { $0.outputs.contains(input) }), case .softmax = producer.params else {
            throw UpdraftError(.invalidArgument, "cross-entropy loss input '\(input)' must be the output of a softmax layer")
        }
        let target = input + "_true"
        if network.kind == .classifier, input == description.predictedProbabilitiesName, let labels = network.classLabels {
            let type: FeatureType
            if case .strings = labels { type = .string } else { type = .int64 }
            setTrainingInputs(target: FeatureDescription(name: description.predictedFeatureName, type: type))
        } else {
            setTrainingInputs(target: FeatureDescription(name: target, type: .multiArray(ArrayFeatureType(shape: [1], dataType: .int32))))
        }
        var u = network.updateParameters ?? UpdateParameters()
        u.lossLayers = [LossLayerSpec(name: name, kind: .categoricalCrossEntropy, input: input, target: target)]
        network.updateParameters = u
    }

    /// Mean squared error between a blob and a target multi-array "<input>_true" of the blob's size.
    public mutating func setMeanSquaredErrorLoss(name: String = "lossLayer", input: String) throws {
        let s = try currentShape(input)
        let target = input + "_true"
        let shape = s.h == 1 && s.w == 1 ? [s.c] : [s.c, s.h, s.w]
        setTrainingInputs(target: FeatureDescription(name: target, type: .multiArray(ArrayFeatureType(shape: shape, dataType: .double))))
        var u = network.updateParameters ?? UpdateParameters()
        u.lossLayers = [LossLayerSpec(name: name, kind: .meanSquaredError, input: input, target: target)]
        network.updateParameters = u
    }

    /// Sets the optimizer (see `OptimizerSpec.sgd` and `.adam`), creating update parameters if needed.
    public mutating func setOptimizer(_ optimizer: OptimizerSpec) {
        var u = network.updateParameters ?? UpdateParameters()
        u.optimizer = optimizer
        network.updateParameters = u
    }

    /// Epochs with their allowed set (default: just the default, as coremltools does).
    public mutating func setEpochs(_ epochs: Int64, allowed: [Int64]? = nil) {
        var u = network.updateParameters ?? UpdateParameters()
        u.epochs = Int64Parameter(defaultValue: epochs, allowed: .set(allowed ?? [epochs]))
        network.updateParameters = u
    }

    /// Sets whether training shuffles each epoch, and the shuffle seed (nil: none stored, Core ML's 0).
    public mutating func setShuffle(_ shuffle: Bool, seed: Int64? = nil) {
        var u = network.updateParameters ?? UpdateParameters()
        u.shuffle = BoolParameter(defaultValue: shuffle)
        u.seed = seed.map { Int64Parameter(defaultValue: $0) }
        network.updateParameters = u
    }

    /// The model spec as built so far, without the final graph check `build()` does.
    public var spec: ModelSpec {
        ModelSpec(specificationVersion: specificationVersion, description: description, isUpdatable: isUpdatable, network: network)
    }

    /// The finished model. Its graph is built once more as a check.
    public func build() throws -> CoreMLModel {
        let model = CoreMLModel(spec: spec)
        _ = try NetworkGraph(model: model)
        return model
    }
}

public extension OptimizerSpec {
    /// SGD with coremltools' default allowed values unless given: learning rate in [0, 1],
    /// mini-batch size in {miniBatchSize}, momentum in [0, 1].
    static func sgd(learningRate: Double, learningRateRange: DoubleBounds = DoubleBounds(min: 0, max: 1),
                    miniBatchSize: Int64, allowedMiniBatchSizes: [Int64]? = nil,
                    momentum: Double = 0, momentumRange: DoubleBounds = DoubleBounds(min: 0, max: 1)) -> OptimizerSpec {
        OptimizerSpec(kind: .sgd, learningRate: DoubleParameter(defaultValue: learningRate, range: learningRateRange),
                      miniBatchSize: Int64Parameter(defaultValue: miniBatchSize, allowed: .set(allowedMiniBatchSizes ?? [miniBatchSize])),
                      momentum: DoubleParameter(defaultValue: momentum, range: momentumRange))
    }

    /// Adam with coremltools' defaults (beta1 0.9, beta2 0.999, eps 1e-8; ranges [0, 1]).
    static func adam(learningRate: Double, learningRateRange: DoubleBounds = DoubleBounds(min: 0, max: 1),
                     miniBatchSize: Int64, allowedMiniBatchSizes: [Int64]? = nil,
                     beta1: Double = 0.9, beta2: Double = 0.999, eps: Double = 1e-8) -> OptimizerSpec {
        OptimizerSpec(kind: .adam, learningRate: DoubleParameter(defaultValue: learningRate, range: learningRateRange),
                      miniBatchSize: Int64Parameter(defaultValue: miniBatchSize, allowed: .set(allowedMiniBatchSizes ?? [miniBatchSize])),
                      beta1: DoubleParameter(defaultValue: beta1, range: DoubleBounds(min: 0, max: 1)),
                      beta2: DoubleParameter(defaultValue: beta2, range: DoubleBounds(min: 0, max: 1)),
                      eps: DoubleParameter(defaultValue: eps, range: DoubleBounds(min: 0, max: 1)))
    }
}
