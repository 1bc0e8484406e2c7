import Foundation
import UpdraftCore

/// A Core ML neural network model (.mlmodel), read from or written to a file.
///
/// Two views of one file: `message`, the Model protobuf as raw fields (what gets written), and
/// `spec`, the typed parts Updraft understands. Reading and writing an unmodified model gives the
/// identical bytes; `setWeights`/`setBias` re-encode only that layer's weight field (as floatValue,
/// keeping its isUpdatable flag and anything unknown in it) and the messages that contain it.
public struct CoreMLModel: Sendable {
    /// The top-level Model message as raw fields.
    public private(set) var message: ProtoMessage
    /// The typed view of `message`.
    public private(set) var spec: ModelSpec

    // MARK: Reading

    /// Reads and parses the .mlmodel file at `url`.
    /// - Throws: `UpdraftError` `.io` when the file cannot be read; `.invalidModel` when it is not a well-formed Model protobuf; any other error from reading the model keeps its kind. Messages are prefixed with the file name.
    public init(contentsOf url: URL) throws {
        let data = try readFile(url, what: "the model file")
        do {
            try self.init(serializedBytes: [UInt8](data))
        } catch let e as UpdraftError {
            throw UpdraftError(e.kind, "\(url.lastPathComponent): \(e.message)", hint: e.hint)
        } catch let e as ProtobufError {
            throw UpdraftError(.invalidModel, "\(url.lastPathComponent): \(e.description)")
        }
    }

    /// Parses a serialized Model protobuf held in `data`; throws as `init(serializedBytes:)`.
    public init(serializedData data: Data) throws { try self.init(serializedBytes: [UInt8](data)) }

    /// Parses a serialized Model protobuf, keeping every field (known or not) for byte-identical rewriting.
    /// - Throws: `ProtobufError` for malformed wire data, `UpdraftError` when a typed part is invalid.
    public init(serializedBytes bytes: [UInt8]) throws {
        let reader = try ProtoReader(parsing: bytes[...], typeName: "Model")
        message = reader.message
        spec = try ModelSpec(reading: reader)
    }

    /// A model built from a typed spec (see `ModelBuilder`). Weights are written as float32.
    public init(spec: ModelSpec) {
        self.message = spec.encoded()
        self.spec = spec
    }

    init(message: ProtoMessage, spec: ModelSpec) { self.message = message; self.spec = spec }

    /// A pipeline's models, in the order they run, each with its bytes exactly as stored here (so a
    /// model written from one is the file's own); empty for a model that is not a pipeline.
    /// - Throws: `ProtobufError` when a model's bytes do not parse (they did when this model was read).
    public func pipelineModels() throws -> [CoreMLModel] {
        guard case let .pipeline(p) = spec.body, let outer = message.last(p.kind.modelType.rawValue) else { return [] }
        var pipeline = try ProtoMessage(parsing: outer.payload, path: "Model.\(p.kind.rawValue)")
        if p.kind != .plain {
            pipeline = try ProtoMessage(parsing: pipeline.last(1)?.payload ?? [], path: "Model.\(p.kind.rawValue).pipeline")
        }
        return try zip(pipeline.all(1), p.models).enumerated().map { i, pair in
            CoreMLModel(message: try ProtoMessage(parsing: pair.0.payload, path: "Model.pipeline.models[\(i)]"), spec: pair.1)
        }
    }

    // MARK: Writing

    /// The Model protobuf bytes, as `write(to:)` would store them.
    public func serializedBytes() -> [UInt8] { message.serialized() }
    /// The Model protobuf bytes as `Data`.
    public func serializedData() -> Data { Data(message.serialized()) }

    /// Writes the model atomically: a temporary file in the same folder, then a rename over `url`,
    /// so a reader never sees half a model and a failed write leaves the old file in place.
    public func write(to url: URL) throws {
        if let kind = updateParameters?.optimizer?.kind, !kind.isInCoreML {
            throw UpdraftError(.unsupported, "\(url.lastPathComponent): the update parameters name \(kind.optimizerType.name), which a Core ML model cannot hold (SGD or Adam only)",
                               hint: "keep SGD or Adam in the model and train with \(kind.optimizerType.name) (UpdateConfiguration.optimizer)")
        }
        try writeAtomically(serializedData(), to: url)
    }

    // MARK: What the model is

    /// Model.specificationVersion: the Core ML spec version the file declares (updatable models need 4 or later).
    public var specificationVersion: Int { Int(spec.specificationVersion) }
    /// Model.isUpdatable: whether the file is marked as trainable on device.
    public var isUpdatable: Bool { spec.isUpdatable }
    /// Model.description: the inputs, outputs, training inputs and metadata.
    public var modelDescription: ModelDescription { spec.description }
    /// Which Model oneof holds the network: plain, classifier or regressor.
    public var kind: NeuralNetworkKind { spec.network.kind }
    /// The typed neural network: layers, preprocessing, class labels and update parameters.
    public var network: NeuralNetworkSpec { spec.network }
    /// The network's layers, in file order.
    public var layers: [LayerSpec] { spec.network.layers }
    /// Every layer's name, in file order.
    public var layerNames: [String] { layers.map(\.name) }
    /// Names of the layers marked isUpdatable (the ones on-device training changes), in file order.
    public var updatableLayerNames: [String] { layers.filter(\.isUpdatable).map(\.name) }
    /// The layer named `name`, or nil when the network has none.
    public func layer(named name: String) -> LayerSpec? { spec.network.layer(named: name) }
    /// A classifier's class labels (string or int64); nil for other networks.
    public var classLabels: ClassLabels? { spec.classLabels }

    /// The prediction input: the first input feature (Updraft trains single-input networks).
    public var inputFeature: FeatureDescription? { spec.description.inputs.first }
    /// The input image's size and color space, when the input is an image.
    public var inputImage: ImageFeatureType? {
        if case let .image(t)? = inputFeature?.type { return t }
        return nil
    }
    /// The input array's shape, when the input is a multi-array.
    public var inputArrayShape: [Int]? {
        if case let .multiArray(t)? = inputFeature?.type { return t.shape }
        return nil
    }
    /// The image scaler applied to the input feature, if any.
    public var imageScaler: ImageScaler? {
        guard let input = inputFeature else { return nil }
        return spec.network.preprocessing.first {
            $0.featureName == input.name || ($0.featureName.isEmpty && spec.description.inputs.count == 1)
        }?.scaler
    }

    // MARK: Training configuration

    /// NeuralNetwork.updateParams; nil when the model carries none (not updatable).
    public var updateParameters: UpdateParameters? { spec.network.updateParameters }
    /// The optimizer (SGD or Adam) from the update parameters, if stated.
    public var optimizer: OptimizerSpec? { updateParameters?.optimizer }
    /// Every hyperparameter with its default and allowed values (empty without update parameters).
    public var hyperparameters: [Hyperparameter] { updateParameters?.hyperparameters ?? [] }
    /// The loss layer (Core ML allows exactly one).
    public var loss: LossLayerSpec? { updateParameters?.lossLayers.first }

    /// The training input that carries the loss target. For a classifier trained through its
    /// probabilities (coremltools' convention: target "<probabilities>_true"), that is the
    /// predictedFeatureName input, holding class labels; otherwise the input named like the target.
    public var lossTargetFeature: FeatureDescription? {
        guard let loss else { return nil }
        let d = spec.description
        if let exact = d.trainingInput(named: loss.target) { return exact }
        if kind == .classifier, !d.predictedFeatureName.isEmpty { return d.trainingInput(named: d.predictedFeatureName) }
        return nil
    }

    // MARK: Weights

    private func weightedLayer(_ name: String) throws -> (index: Int, layer: LayerSpec) {
        guard let index = layers.firstIndex(where: { $0.name == name }) else {
            throw UpdraftError(.invalidArgument, "the model has no layer named '\(name)'",
                               hint: "layers: " + layerNames.prefix(20).joined(separator: ", ") + (layers.count > 20 ? ", …" : ""))
        }
        let layer = layers[index]
        guard layer.weightParams != nil else {
            throw UpdraftError(.invalidArgument,
                "layer '\(name)' is a \(layer.typeName) layer; only convolution and innerProduct layers have weights")
        }
        return (index, layer)
    }

    /// The weights' shape: convolution `[C_out, C_in/groups, kH, kW]`, inner product `[C_out, C_in]`.
    public func weightShape(ofLayer name: String) throws -> Shape {
        let (_, layer) = try weightedLayer(name)
        return try LayerShapes.weightShape(layer)
    }

    /// A layer's weights as a tensor (float16 weights widened to float32).
    public func weights(ofLayer name: String) throws -> Tensor {
        let (_, layer) = try weightedLayer(name)
        return try LayerShapes.tensor(layer.weightParams!.weights, shape: try LayerShapes.weightShape(layer),
                                      layer: layer, what: "weights")
    }

    /// A layer's bias `[C_out]`, or nil when the layer has none (hasBias false).
    public func bias(ofLayer name: String) throws -> Tensor? {
        let (_, layer) = try weightedLayer(name)
        guard LayerShapes.hasBias(layer) else { return nil }
        guard let b = layer.weightParams?.bias else {
            throw UpdraftError(.invalidModel, "layer '\(name)' has hasBias set but no bias values",
                               hint: "re-export the model with the layer's bias")
        }
        return try LayerShapes.tensor(b, shape: [LayerShapes.outputChannels(layer)], layer: layer, what: "bias")
    }

    /// Replaces a layer's weights (the tensor must have the layer's weight shape).
    public mutating func setWeights(_ tensor: Tensor, ofLayer name: String) throws {
        let (index, layer) = try weightedLayer(name)
        let expected = try LayerShapes.weightShape(layer)
        guard tensor.shape == expected else {
            throw UpdraftError(.invalidArgument,
                "layer '\(name)' has weights of shape \(expected); the new weights have shape \(tensor.shape)")
        }
        try replaceWeightField(layerIndex: index, layer: layer, isBias: false, values: tensor.data)
    }

    /// Replaces a layer's bias (shape `[C_out]`). Throws for a layer without a bias.
    public mutating func setBias(_ tensor: Tensor, ofLayer name: String) throws {
        let (index, layer) = try weightedLayer(name)
        guard LayerShapes.hasBias(layer) else {
            throw UpdraftError(.invalidArgument, "layer '\(name)' has no bias (hasBias is false)")
        }
        let expected: Shape = [LayerShapes.outputChannels(layer)]
        guard tensor.shape == expected else {
            throw UpdraftError(.invalidArgument,
                "layer '\(name)' has a bias of shape \(expected); the new bias has shape \(tensor.shape)")
        }
        try replaceWeightField(layerIndex: index, layer: layer, isBias: true, values: tensor.data)
    }

    /// Re-encodes one WeightParams: drops every stored encoding (floatValue, float16Value, rawValue,
    /// int8RawValue, quantization), writes packed floatValue in their place, keeps isUpdatable and
    /// unknown fields. A missing WeightParams is created, flagged updatable like its layer.
    private mutating func replaceWeightField(layerIndex: Int, layer: LayerSpec, isBias: Bool, values: [Float]) throws {
        let typeField = layer.params.typeField
        guard let fields = layer.params.weightFields else {
            throw UpdraftError(.invalidArgument, "layer '\(layer.name)' is a \(layer.typeName) layer, which holds no weights",
                               hint: "set weights of convolution and innerProduct layers")
        }
        let weightField = isBias ? fields.bias : fields.weights
        let networkField = spec.network.kind.fieldNumber
        var editedLayer = ProtoMessage()
        try message.editMessage(networkField) { network in
            try network.editMessage(1, occurrence: layerIndex) { layerMessage in
                try layerMessage.editMessage(typeField) { params in
                    var weights: ProtoMessage
                    if let existing = params.last(weightField), existing.wireType == .lengthDelimited {
                        weights = try ProtoMessage(parsing: existing.payload)
                    } else {
                        weights = ProtoMessage()
                        if layer.isUpdatable { weights.set(ProtoField(number: 50, bool: true)) }
                    }
                    for stored in [2, 30, 31, 40] { weights.remove(stored) }
                    weights.set(ProtoField(number: 1, packedFloats: values))
                    params.set(ProtoField(number: weightField, message: weights))
                }
                editedLayer = layerMessage
            }
        }
        // The typed view is re-read from the bytes just written, so the two never disagree.
        let reader = ProtoReader(editedLayer, path: "Model.\(spec.network.kind.rawValue).layers[\(layerIndex)]")
        spec.network.layers[layerIndex] = try LayerSpec(reading: reader, index: layerIndex)
    }
}
