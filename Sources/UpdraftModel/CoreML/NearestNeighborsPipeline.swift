import UpdraftCore

/// The background article's recommendation as a model: a neural network cut at an embedding layer,
/// followed by an empty updatable k-NN on that embedding, as one updatable pipeline classifier that
/// Core ML reads (`updraft create knn`).
public struct NearestNeighborsPipeline: Sendable {
    /// The layer whose output is the embedding; nil: the blob the network's classifier head reads
    /// (the input of its last inner product, past a final softmax).
    public var layer: String?
    /// k, the k-NN's numberOfNeighbors default.
    public var neighbors: Int
    /// The values k may be changed to (Core ML's range), `neighbors` included.
    public var allowedNeighbors: ClosedRange<Int>
    /// How neighbours vote.
    public var weighting: KNearestNeighborsSpec.Weighting
    /// The k-NN's index.
    public var index: KNearestNeighborsSpec.Index
    /// Add Core ML's `l2normalize` layer after the embedding: neighbours by angle (cosine-like).
    public var l2Normalize: Bool
    /// The label of an empty k-NN (and of an answer with no neighbours).
    public var defaultLabel: String
    /// Feature names: the embedding between the two models, and the k-NN's label output.
    public var embeddingName = "embedding", labelName = "label", probabilitiesName = "labelProbability"

    /// Options for `make(featureExtractor:)`; k must be inside `allowedNeighbors`.
    public init(layer: String? = nil, neighbors: Int, allowedNeighbors: ClosedRange<Int> = 1...1000,
                weighting: KNearestNeighborsSpec.Weighting = .uniform, index: KNearestNeighborsSpec.Index = .linear,
                l2Normalize: Bool = false, defaultLabel: String = "unknown") {
        self.layer = layer; self.neighbors = neighbors; self.allowedNeighbors = allowedNeighbors; self.weighting = weighting
        self.index = index; self.l2Normalize = l2Normalize; self.defaultLabel = defaultLabel
    }

    /// The pipeline: `featureExtractor`'s layers up to the embedding (frozen, with its input and
    /// image preprocessing), then an empty k-NN of the embedding's width with string labels.
    /// - Throws: `.invalidArgument` for k outside its allowed values, a leaf size below 1 or a layer
    ///   the network does not have (naming its layers); `.unsupported` for a model that is not a
    ///   neural network; the graph's own errors for a network Updraft cannot run.
    public func make(featureExtractor model: CoreMLModel) throws -> CoreMLModel {
        guard let network = model.spec.neuralNetwork else {
            throw UpdraftError(.unsupported, "the feature extractor is a \(model.spec.modelType.name); it must be a neural network",
                               hint: "give a neural network (classifier) to cut at its embedding")
        }
        guard allowedNeighbors.lowerBound >= 1, allowedNeighbors.contains(neighbors) else {
            throw UpdraftError(.invalidArgument, "--neighbors \(neighbors) is outside the allowed \(allowedNeighbors.lowerBound)...\(allowedNeighbors.upperBound)",
                               hint: "choose k of at least 1 inside the allowed range")
        }
        if case let .kdTree(leaf) = index, leaf < 1 {
            throw UpdraftError(.invalidArgument, "a kd-tree's leaf size must be at least 1, got \(leaf)", hint: "give a leaf size such as 30")
        }
        let graph = try NetworkGraph(model: model)
        let blob = try embeddingBlob(network)
        guard let shape = graph.blobShapes[blob] else {
            throw UpdraftError(.invalidArgument, "the network has no output named '\(blob)'")
        }
        let width = shape.itemCount

        // The layers the embedding needs, in the network's order, frozen.
        var needed: Set<String> = [blob]
        var kept: [LayerSpec] = []
        for layer in network.layers.reversed() where layer.outputs.contains(where: needed.contains) {
            needed.formUnion(layer.inputs)
            var frozen = layer
            frozen.isUpdatable = false
            kept.append(frozen)
        }
        kept.reverse()
        if l2Normalize {
            kept.append(LayerSpec(name: "\(embeddingName)_l2normalize", inputs: [blob], outputs: [embeddingName],
                                  params: .l2normalize(epsilon: 1e-6)))
        } else if blob != embeddingName {
            // The feature is named as the k-NN reads it: rename the cut layer's output.
            for i in kept.indices {
                kept[i].inputs = kept[i].inputs.map { $0 == blob ? embeddingName : $0 }
                kept[i].outputs = kept[i].outputs.map { $0 == blob ? embeddingName : $0 }
            }
        }
        let vector = FeatureDescription(name: embeddingName, type: .multiArray(ArrayFeatureType(shape: [width], dataType: .float32)))
        var extractorNetwork = network
        extractorNetwork.kind = .plain
        extractorNetwork.layers = kept
        extractorNetwork.updateParameters = nil
        extractorNetwork.classLabels = nil
        extractorNetwork.labelProbabilityLayerName = ""
        let inputs = model.spec.description.inputs
        let extractor = ModelSpec(specificationVersion: 4, description: ModelDescription(inputs: inputs, outputs: [vector]),
                                  isUpdatable: false, network: extractorNetwork)

        let label = FeatureDescription(name: labelName, type: .string)
        let probabilities = FeatureDescription(name: probabilitiesName, type: .dictionary(.string))
        let knn = KNearestNeighborsSpec(dimension: Int32(width), index: index,
                                        numberOfNeighbors: Int64Parameter(defaultValue: Int64(neighbors),
                                                                          allowed: .range(min: Int64(allowedNeighbors.lowerBound), max: Int64(allowedNeighbors.upperBound))),
                                        labels: .strings([]), defaultLabel: .string(defaultLabel), weighting: weighting)
        let knnModel = ModelSpec(specificationVersion: 4,
                                 description: ModelDescription(inputs: [vector], outputs: [label, probabilities], trainingInputs: [vector, label],
                                                               predictedFeatureName: labelName, predictedProbabilitiesName: probabilitiesName),
                                 isUpdatable: true, body: .kNearestNeighbors(knn))
        let pipeline = PipelineSpec(kind: .classifier, models: [extractor, knnModel], names: ["embedding", "knn"])
        var metadata = model.spec.description.metadata
        metadata.shortDescription = "k-nearest-neighbors on the '\(blob)' embedding of \(metadata.shortDescription.isEmpty ? "a neural network" : metadata.shortDescription)"
        let description = ModelDescription(inputs: inputs, outputs: [label, probabilities], trainingInputs: inputs + [label],
                                           predictedFeatureName: labelName, predictedProbabilitiesName: probabilitiesName, metadata: metadata)
        return CoreMLModel(spec: ModelSpec(specificationVersion: 4, description: description, isUpdatable: true, body: .pipeline(pipeline)))
    }

    /// The blob the embedding is: `layer`'s output, or the input of the classifier head.
    private func embeddingBlob(_ network: NeuralNetworkSpec) throws -> String {
        let names = network.layers.map(\.name)
        if let layer {
            guard let found = network.layers.first(where: { $0.name == layer }), let out = found.outputs.first else {
                throw UpdraftError(.invalidArgument, "the network has no layer named '\(layer)'",
                                   hint: "its layers: \(names.joined(separator: ", "))")
            }
            return out
        }
        var tail = network.layers
        if case .softmax? = tail.last?.params { tail.removeLast() }
        guard let head = tail.last, case .innerProduct = head.params, let input = head.inputs.first else {
            throw UpdraftError(.invalidArgument, "the network does not end in an inner product (its classifier head), so the embedding must be named",
                               hint: "give --layer NAME, the layer whose output is the embedding (its layers: \(names.suffix(6).joined(separator: ", ")))")
        }
        return input
    }
}
