import UpdraftCore

/// What a Model holds (its oneof): the kinds Updraft reads. Core ML updates the first three; a kind added
/// later is a `family` (ModelBodyFamily.swift), listed in `families`.
public indirect enum ModelBody: Hashable, Sendable {
    /// neuralNetwork (500), neuralNetworkClassifier (403) or neuralNetworkRegressor (303).
    case neuralNetwork(NeuralNetworkSpec)
    /// kNearestNeighborsClassifier (404).
    case kNearestNeighbors(KNearestNeighborsSpec)
    /// pipeline (202), pipelineClassifier (200) or pipelineRegressor (201).
    case pipeline(PipelineSpec)
    /// A kind in a file of its own (`families`): a GLM classifier (400).
    case family(FamilyModelBody)

    /// The spec types of the open kinds, one row each: what the reader tries for a Model type the
    /// closed cases do not hold.
    static let families: [any ModelBodyCodec.Type] = [GLMClassifierSpec.self]

    /// The Model oneof case the body is stored as.
    public var modelType: CoreMLModelType {
        switch self {
        case let .neuralNetwork(n): return n.kind.modelType
        case .kNearestNeighbors: return .kNearestNeighborsClassifier
        case let .pipeline(p): return p.kind.modelType
        case let .family(f): return f.base.modelType
        }
    }
}

/// The parts of Model that Updraft understands. Everything else in the file is kept as bytes by
/// `CoreMLModel` and written back unchanged.
public struct ModelSpec: Hashable, Sendable {
    /// Model.specificationVersion: the Core ML spec version the file targets (4 or later for updatable models).
    public var specificationVersion: Int32
    /// Model.description: inputs, outputs, training inputs and metadata.
    public var description: ModelDescription
    /// Model.isUpdatable: whether Core ML may train the model on device.
    public var isUpdatable: Bool
    /// What the model is: a neural network, a k-NN classifier, a pipeline of models or a family's kind.
    public var body: ModelBody

    /// The Model oneof case the model is stored as (the kind of model: `ModelKinds` picks the kind that updates it).
    public var modelType: CoreMLModelType { body.modelType }

    /// The neural network, when the model is one; nil for a k-NN or a pipeline.
    public var neuralNetwork: NeuralNetworkSpec? {
        if case let .neuralNetwork(n) = body { return n }
        return nil
    }

    /// The model's neural network. For a model of another kind this reads as a plain network with no
    /// layers (the network-only code paths then find nothing to run: `NetworkGraph` refuses such a
    /// model by name), and setting it makes the model that network.
    public var network: NeuralNetworkSpec {
        get { neuralNetwork ?? NeuralNetworkSpec(kind: .plain, layers: []) }
        set { body = .neuralNetwork(newValue) }
    }

    /// The labels a classifier predicts, in the order of its probabilities: a network classifier's
    /// class labels; a k-NN's distinct labels (in the order they first appear among the samples, then
    /// the default label); a pipeline's last model's. Nil for other models.
    public var classLabels: ClassLabels? {
        switch body {
        case let .neuralNetwork(n): return n.classLabels
        case let .kNearestNeighbors(k): return k.distinctClassLabels
        case let .pipeline(p): return p.models.last?.classLabels
        case let .family(f): return f.base.classLabels
        }
    }

    /// A model spec holding `body`; see `CoreMLModel.init(spec:)` to encode it.
    public init(specificationVersion: Int32, description: ModelDescription, isUpdatable: Bool, body: ModelBody) {
        self.specificationVersion = specificationVersion; self.description = description
        self.isUpdatable = isUpdatable; self.body = body
    }

    /// A neural network model spec.
    public init(specificationVersion: Int32, description: ModelDescription, isUpdatable: Bool, network: NeuralNetworkSpec) {
        self.init(specificationVersion: specificationVersion, description: description, isUpdatable: isUpdatable, body: .neuralNetwork(network))
    }
}
