import UpdraftCore

/// A pipeline's neural networks run as one network, and a pipeline's model replaced in place.
///
/// Core ML runs a pipeline's models in order, wiring features by name: a model reads the pipeline's
/// inputs and the outputs of the models before it. A run of neural networks wired that way is one
/// network whose blobs are those features, so Updraft joins them (`pipelineNetwork`) and runs,
/// trains and caches the join with its one executor: intermediate features stay on the device that
/// made them, and the earlier models are a frozen prefix the feature cache covers.
extension CoreMLModel {
    /// The pipeline's models `0...last` joined into one neural network.
    ///
    /// - The join reads the pipeline's first model's inputs with its image preprocessing; its layers
    ///   run in model order. Blob and layer names of every model but `last` get the prefix
    ///   "`<model name>/`" except the features (the models' inputs and outputs), which keep their
    ///   names; model `last` keeps its own names, so its weights are found by name in the join.
    /// - `output` nil: the join's outputs, kind, class labels and classifier outputs are model
    ///   `last`'s; else its one output is the feature `output` (a model's output among `0...last`)
    ///   and it is a plain network.
    /// - `trainable`: model `last` keeps its updatable layers, update parameters and training inputs
    ///   (its inputs replaced by the pipeline's); every other layer is frozen. Otherwise nothing is
    ///   updatable.
    /// - Throws: `.unsupported` when the model is no pipeline or one of the models is not a neural
    ///   network, or a later model has its own image preprocessing; `.invalidModel` when names clash.
    public func pipelineNetwork(through last: Int, output: String? = nil, trainable: Bool = false) throws -> CoreMLModel {
        guard case let .pipeline(p) = spec.body else {
            throw UpdraftError(.unsupported, "this model is a \(spec.modelType.name), not a pipeline")
        }
        guard p.models.indices.contains(last) else {
            throw UpdraftError(.invalidArgument, "the pipeline has \(p.models.count) models; there is no model \(last)")
        }
        var layers: [LayerSpec] = []
        var features = Set(spec.description.inputs.map(\.name))
        for m in p.models[...last] { features.formUnion(m.description.inputs.map(\.name)); features.formUnion(m.description.outputs.map(\.name)) }
        for (i, m) in p.models[...last].enumerated() {
            guard let network = m.neuralNetwork else {
                throw UpdraftError(.unsupported,
                    "pipeline model \(p.name(of: i)) is a \(m.modelType.name); Updraft runs only neural networks before a pipeline's last model",
                    hint: "put the neural networks first and the k-NN (or other model) last")
            }
            if i > 0 && !network.preprocessing.isEmpty {
                throw UpdraftError(.unsupported, "pipeline model \(p.name(of: i)) has its own image preprocessing; Updraft applies only the first model's",
                                   hint: "move the scaler into the first model")
            }
            let prefix = "\(p.name(of: i))/"
            let rename: (String) -> String = { i == last || features.contains($0) ? $0 : prefix + $0 }
            for var layer in network.layers {
                layer.name = i == last ? layer.name : prefix + layer.name
                layer.inputs = layer.inputs.map(rename)
                layer.outputs = layer.outputs.map(rename)
                if !(trainable && i == last) { layer.isUpdatable = false }
                layers.append(layer)
            }
        }
        var seen = Set<String>()
        if let clash = layers.first(where: { !seen.insert($0.name).inserted }) {
            throw UpdraftError(.invalidModel, "joining the pipeline's models gives two layers named '\(clash.name)'",
                               hint: "rename the layer in one of the models")
        }

        let lastModel = p.models[last]
        let first = p.models[0]
        var network = lastModel.network
        network.layers = layers
        network.preprocessing = first.network.preprocessing
        var description = lastModel.description
        description.inputs = first.description.inputs
        if let output {
            guard let feature = p.models[...last].lazy.flatMap(\.description.outputs).last(where: { $0.name == output }) else {
                throw UpdraftError(.invalidModel, "no model up to \(p.name(of: last)) outputs the feature '\(output)'")
            }
            description.outputs = [feature]
            description.predictedFeatureName = ""
            description.predictedProbabilitiesName = ""
            network.kind = .plain
            network.classLabels = nil
            network.labelProbabilityLayerName = ""
        }
        if trainable {
            let ownInputs = Set(lastModel.description.inputs.map(\.name))
            description.trainingInputs = description.inputs + lastModel.description.trainingInputs.filter { !ownInputs.contains($0.name) }
        } else {
            network.updateParameters = nil
            description.trainingInputs = []
        }
        let version = p.models[...last].map(\.specificationVersion).max() ?? spec.specificationVersion
        return CoreMLModel(spec: ModelSpec(specificationVersion: max(version, spec.specificationVersion), description: description,
                                           isUpdatable: trainable && lastModel.isUpdatable, network: network))
    }

    /// This pipeline with model `index` replaced by `model` (its bytes as they are); every other
    /// field keeps its bytes.
    /// - Throws: `.unsupported` for a model that is no pipeline, `.invalidArgument` for an index outside it.
    public func replacingPipelineModel(at index: Int, with model: CoreMLModel) throws -> CoreMLModel {
        guard case var .pipeline(p) = spec.body else {
            throw UpdraftError(.unsupported, "this model is a \(spec.modelType.name), not a pipeline")
        }
        guard p.models.indices.contains(index) else {
            throw UpdraftError(.invalidArgument, "the pipeline has \(p.models.count) models; there is no model \(index)")
        }
        var message = self.message
        try message.editMessage(p.kind.modelType.rawValue, path: "Model.\(p.kind.rawValue)") { outer in
            let replace: (inout ProtoMessage) throws -> Void = { pipeline in
                try pipeline.editMessage(1, occurrence: index, path: "Pipeline.models") { $0 = model.message }
            }
            if p.kind == .plain { try replace(&outer) } else { try outer.editMessage(1, path: "Pipeline", replace) }
        }
        p.models[index] = model.spec
        var spec = self.spec
        spec.body = .pipeline(p)
        return CoreMLModel(message: message, spec: spec)
    }
}
