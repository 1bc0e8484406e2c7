import Foundation
import UpdraftCore

/// Making a model updatable, or changing how an updatable model trains: what coremltools'
/// `NeuralNetworkBuilder.make_updatable` and `set_categorical_cross_entropy_loss` /
/// `set_mean_squared_error_loss` / `set_sgd_optimizer` / `set_adam_optimizer` / `set_epochs` /
/// `set_shuffle` do in Python, writing the same fields.
///
/// Only the fields concerned are re-encoded in the raw message (Model.specificationVersion and
/// isUpdatable, the training inputs, NetworkUpdateParameters, and the chosen layers' isUpdatable
/// flags and their WeightParams' isUpdatable); every other byte of the file stays as it was.
extension CoreMLModel {
    /// A copy of the model, updatable as `options` say. Throws `UpdraftError` naming the problem:
    /// an unknown layer (listing the layers that can be updatable), a layer type that cannot be
    /// updated, a loss input that is not a softmax output, a default outside its allowed values...
    public func makingUpdatable(_ options: UpdatableModelOptions) throws -> CoreMLModel {
        let plan = try UpdatablePlan(model: self, options: options)
        var message = self.message
        let networkField = spec.network.kind.fieldNumber

        let newVersion = max(spec.specificationVersion, 4)   // coremltools' _MINIMUM_UPDATABLE_SPEC_VERSION
        if newVersion != spec.specificationVersion { message.set(ProtoField(number: 1, int64: Int64(newVersion))) }
        if !spec.isUpdatable { message.set(ProtoField(number: 10, bool: true)) }

        if let trainingInputs = plan.trainingInputs {
            // coremltools copies the prediction inputs (as they are) and adds the target.
            let inputs = message.last(2).map { (try? ProtoMessage(parsing: $0.payload))?.all(1) ?? [] } ?? []
            let fields = inputs.map { ProtoField(number: 50, bytes: $0.payload) }
                + trainingInputs.map { ProtoField(number: 50, message: $0.encoded()) }
            if message.contains(2) {
                try message.editMessage(2) { $0.set(50, to: fields) }
            } else {
                message.set(ProtoField(number: 2, message: ProtoMessage(fields: fields)))
            }
        }

        try message.editMessage(networkField) { network in
            for (index, layer) in spec.network.layers.enumerated() {
                let wanted = plan.updatableLayers.contains(layer.name)
                let convert = plan.softmaxToConvert == index
                guard wanted || convert || layer.isUpdatable || plan.flaggedWeights.contains(index) else { continue }
                try network.editMessage(1, occurrence: index) { l in
                    if convert { CoreMLModel.replaceSoftmaxND(&l) }
                    if wanted || layer.isUpdatable || plan.flaggedWeights.contains(index) {
                        try CoreMLModel.setUpdatable(&l, wanted, layer: layer)
                    }
                }
            }
            if plan.updateParameters != spec.network.updateParameters {
                network.set(ProtoField(number: 10, message: plan.updateParameters.encoded()))
            }
        }

        var model = try CoreMLModel(serializedBytes: message.serialized())
        // Updatable weights must be float32 (Core ML refuses others): widen float16 ones.
        for name in plan.updatableLayers.sorted() {
            guard let layer = model.layer(named: name), let (w, b) = layer.weightParams else { continue }
            if w.encoding != .float32 && w.encoding != .empty { try model.setWeights(try model.weights(ofLayer: name), ofLayer: name) }
            if let b, b.encoding != .float32 && b.encoding != .empty, let bias = try model.bias(ofLayer: name) {
                try model.setBias(bias, ofLayer: name)
            }
        }
        return model
    }

    /// Writes `isUpdatable` on a layer and on each WeightParams of its parameters, as
    /// coremltools' make_updatable does (which creates an empty bias message, flagged, even for a
    /// layer without bias). Clearing removes the flags and creates nothing.
    private static func setUpdatable(_ l: inout ProtoMessage, _ updatable: Bool, layer: LayerSpec) throws {
        if updatable { l.set(ProtoField(number: 10, bool: true)) } else { l.remove(10) }
        guard let fields = layer.params.weightFields else { return }
        let typeField = layer.params.typeField
        guard l.contains(typeField) else { return }
        try l.editMessage(typeField) { params in
            for field in [fields.weights, fields.bias] {
                var weights = try params.last(field).map { try ProtoMessage(parsing: $0.payload) }
                if weights == nil, updatable { weights = ProtoMessage() }
                guard var w = weights else { continue }
                if updatable { w.set(ProtoField(number: 50, bool: true)) } else { w.remove(50) }
                params.set(ProtoField(number: field, message: w))
            }
        }
    }

    /// softmaxND on the class axis becomes softmax, at the same place in the layer.
    private static func replaceSoftmaxND(_ l: inout ProtoMessage) {
        let softmaxND = NeuralNetworkLayerType.softmaxND.rawValue
        guard let position = l.fields.firstIndex(where: { $0.number == softmaxND }) else { return }
        l.fields[position] = ProtoField(number: NeuralNetworkLayerType.softmax.rawValue, message: ProtoMessage())
        l.fields.removeAll { $0.number == softmaxND }
    }
}

/// Everything `makingUpdatable` decides before it touches a byte, so a refusal leaves nothing half done.
package struct UpdatablePlan {
    var updatableLayers: Set<String>
    /// Frozen layers whose weights carry isUpdatable flags to clear (when the layers are replaced).
    var flaggedWeights: Set<Int> = []
    var updateParameters: UpdateParameters
    /// The new training inputs after the prediction inputs (nil: keep the model's).
    var trainingInputs: [FeatureDescription]?
    var softmaxToConvert: Int?

    init(model: CoreMLModel, options o: UpdatableModelOptions) throws {
        let layers = model.layers
        let candidates = layers.filter(UpdatablePlan.canBeUpdatable).map(\.name)
        func candidateList() -> String {
            candidates.isEmpty ? "the model has no convolution or innerProduct layer"
                : "layers that can be updatable: " + candidates.prefix(30).joined(separator: ", ") + (candidates.count > 30 ? ", … (\(candidates.count) in all)" : "")
        }

        // Layers.
        if let names = o.layers {
            var unknown: [String] = [], wrongType: [String] = [], seen: Set<String> = []
            for name in names where seen.insert(name).inserted {
                guard let layer = model.layer(named: name) else { unknown.append("'\(name)'"); continue }
                if !UpdatablePlan.canBeUpdatable(layer) {
                    var what = "'\(name)' is a \(layer.typeName) layer"
                    if case let .convolution(c) = layer.params, c.isDeconvolution { what = "'\(name)' is a deconvolution" }
                    wrongType.append(what)
                }
            }
            guard !seen.isEmpty else {
                throw UpdraftError(.invalidArgument, "no layers given to make updatable", hint: candidateList())
            }
            var problems: [String] = []
            if !unknown.isEmpty { problems.append("the model has no layer named \(unknown.joined(separator: ", "))") }
            if !wrongType.isEmpty {
                problems.append(wrongType.joined(separator: ", ") + "; only convolution and innerProduct layers can be updatable")
            }
            guard problems.isEmpty else {
                throw UpdraftError(.invalidArgument, problems.joined(separator: "; "), hint: candidateList())
            }
            updatableLayers = seen
            for (i, l) in layers.enumerated() where !seen.contains(l.name) {
                if let (w, b) = l.weightParams, w.isUpdatable || (b?.isUpdatable ?? false) { flaggedWeights.insert(i) }
                if l.params.weighted?.bias?.isUpdatable == true { flaggedWeights.insert(i) }  // a stored bias hasBias ignores
            }
        } else {
            updatableLayers = Set(model.updatableLayerNames)
            guard !updatableLayers.isEmpty else {
                throw UpdraftError(.invalidArgument, "the model has no updatable layers; name the layers to train",
                                   hint: "with --layers L1,L2 (UpdatableModelOptions.layers); " + candidateList())
            }
        }

        // Loss and training inputs.
        let existing = model.updateParameters
        let oldLoss = existing?.lossLayers.first
        let kind: LossKind
        if let given = o.loss ?? oldLoss?.kind {
            kind = given
        } else if model.kind == .classifier {
            kind = .categoricalCrossEntropy
        } else {
            // A network whose output comes from a softmax (converted classifiers often are plain
            // networks) trains with cross-entropy, anything else with mean squared error.
            let input = try o.lossInput ?? UpdatablePlan.defaultLossInput(model)
            let producer = layers.last { $0.outputs.contains(input) }
            kind = producer.map { [.softmax, .softmaxND].contains($0.params.layerType) } == true ? .categoricalCrossEntropy : .meanSquaredError
        }
        var lossLayers = existing?.lossLayers ?? []
        let lossChanges = oldLoss == nil || oldLoss?.kind != kind || (o.lossInput != nil && o.lossInput != oldLoss?.input)
            || (o.lossName != nil && o.lossName != oldLoss?.name)
        if lossChanges {
            let input = try o.lossInput ?? (oldLoss?.kind == kind ? oldLoss?.input : nil) ?? UpdatablePlan.defaultLossInput(model)
            let name = o.lossName ?? oldLoss?.name ?? UpdatableModelOptions.defaultLossName
            guard !name.isEmpty else { throw UpdraftError(.invalidArgument, "the loss layer's name is empty") }
            if model.layer(named: name) != nil {
                throw UpdraftError(.invalidArgument, "the loss name '\(name)' is already a layer's name",
                                   hint: "choose another with --loss-name (UpdatableModelOptions.lossName)")
            }
            guard let producerIndex = layers.firstIndex(where: { $0.outputs.contains(input) }) else {
                throw UpdraftError(.invalidArgument, "the loss input '\(input)' is not the output of any layer",
                                   hint: "name a layer's output with --loss-input; outputs: " + model.spec.description.outputs.map(\.name).joined(separator: ", "))
            }
            if kind == .categoricalCrossEntropy {
                softmaxToConvert = try UpdatablePlan.checkSoftmax(model, layerIndex: producerIndex, input: input)
            }
            let target = input + "_true"
            let description = model.spec.description
            if description.outputs.contains(where: { $0.name == target }) || description.inputs.contains(where: { $0.name == target }) {
                throw UpdraftError(.invalidModel, "the loss target '\(target)' is already a feature of the model",
                                   hint: "coremltools names the target after the loss input; rename that feature, or choose another --loss-input")
            }
            lossLayers = [LossLayerSpec(name: name, kind: kind, input: input, target: target)]
            trainingInputs = [try UpdatablePlan.targetFeature(model, kind: kind, input: input, target: target)]
        }

        // Optimizer.
        let optimizerKind = o.optimizer ?? existing?.optimizer?.kind ?? .sgd
        guard optimizerKind.isInCoreML else {
            throw UpdraftError(.unsupported, "\(optimizerKind.optimizerType.name) has no place in a Core ML model: its update parameters hold SGD or Adam only",
                               hint: "keep SGD or Adam in the model and train with \(optimizerKind.optimizerType.name) "
                                   + "(updraft train --optimizer \(optimizerKind.rawValue); UpdateConfiguration.optimizer = .\(optimizerKind))")
        }
        let old = existing?.optimizer
        let same = old?.kind == optimizerKind
        if optimizerKind == .sgd, o.beta1 != nil || o.beta2 != nil || o.eps != nil || o.allowedBeta1 != nil || o.allowedBeta2 != nil || o.allowedEps != nil {
            throw UpdraftError(.invalidArgument, "beta1, beta2 and eps belong to the Adam optimizer; this model's optimizer is SGD",
                               hint: "switch with --optimizer adam (UpdatableModelOptions.optimizer = .adam)")
        }
        if optimizerKind == .adam, o.momentum != nil || o.allowedMomentum != nil {
            throw UpdraftError(.invalidArgument, "momentum belongs to the SGD optimizer; this model's optimizer is Adam",
                               hint: "switch with --optimizer sgd (UpdatableModelOptions.optimizer = .sgd)")
        }
        var optimizer = OptimizerSpec(kind: optimizerKind, learningRate: nil, miniBatchSize: nil)
        optimizer.learningRate = try UpdatablePlan.resolve(o.learningRate, o.allowedLearningRate, existing: old?.learningRate,
            fallback: UpdatableModelOptions.defaultLearningRate, what: "learning rate", option: "learning-rate", valid: { $0 > 0 }, rule: "greater than 0")
        optimizer.miniBatchSize = try UpdatablePlan.resolve(o.miniBatchSize, o.allowedMiniBatchSizes, existing: old?.miniBatchSize,
            fallback: UpdatableModelOptions.defaultMiniBatchSize, what: "mini-batch size", option: "batch-size", allowedOption: "allowed-batch-sizes")
        let unit: (Double) -> Bool = { $0 >= 0 && $0 <= 1 }
        switch optimizerKind {
        case .sgd:
            optimizer.momentum = try UpdatablePlan.resolve(o.momentum, o.allowedMomentum, existing: same ? old?.momentum : nil,
                fallback: UpdatableModelOptions.defaultMomentum, what: "momentum", option: "momentum", valid: unit, rule: "in [0, 1]")
        case .adam:
            optimizer.beta1 = try UpdatablePlan.resolve(o.beta1, o.allowedBeta1, existing: same ? old?.beta1 : nil,
                fallback: UpdatableModelOptions.defaultBeta1, what: "beta1", option: "beta1", valid: unit, rule: "in [0, 1]")
            optimizer.beta2 = try UpdatablePlan.resolve(o.beta2, o.allowedBeta2, existing: same ? old?.beta2 : nil,
                fallback: UpdatableModelOptions.defaultBeta2, what: "beta2", option: "beta2", valid: unit, rule: "in [0, 1]")
            optimizer.eps = try UpdatablePlan.resolve(o.eps, o.allowedEps, existing: same ? old?.eps : nil,
                fallback: UpdatableModelOptions.defaultEps, what: "eps", option: "eps", valid: { $0 > 0 }, rule: "greater than 0")
        default:
            break  // an optimizer past Core ML: refused above
        }
        let epochs = try UpdatablePlan.resolve(o.epochs, o.allowedEpochs, existing: existing?.epochs,
            fallback: UpdatableModelOptions.defaultEpochs, what: "epochs", option: "epochs", allowedOption: "allowed-epochs")
        if let s = o.seed, s < 0 { throw UpdraftError(.invalidArgument, "the shuffle seed must be 0 or more, got \(s)") }
        updateParameters = UpdateParameters(
            lossLayers: lossLayers, optimizer: optimizer, epochs: epochs,
            shuffle: o.shuffle.map(BoolParameter.init(defaultValue:)) ?? existing?.shuffle ?? BoolParameter(defaultValue: true),
            seed: o.seed.map { Int64Parameter(defaultValue: $0, allowed: existing?.seed?.allowed) } ?? existing?.seed)
        // Keeping the model's update parameters exactly when nothing about them was asked to change.
        if let existing, !o.changesUpdateParameters, !lossChanges, existing.optimizer != nil, existing.epochs != nil {
            updateParameters = existing
        }
    }

    package static func canBeUpdatable(_ layer: LayerSpec) -> Bool { layer.params.weighted?.canTrain ?? false }

    /// A classifier's probabilities (the blob named like predictedProbabilitiesName, else the one
    /// labelProbabilityLayerName names, else the last layer's output); otherwise the only output.
    static func defaultLossInput(_ model: CoreMLModel) throws -> String {
        let d = model.spec.description
        if model.kind == .classifier {
            for name in [d.predictedProbabilitiesName, model.spec.network.labelProbabilityLayerName] where !name.isEmpty {
                if model.layers.contains(where: { $0.outputs.contains(name) }) { return name }
            }
            if let last = model.layers.last?.outputs.first { return last }
        }
        let produced = d.outputs.filter { o in model.layers.contains { $0.outputs.contains(o.name) } }
        guard produced.count == 1 else {
            throw UpdraftError(.invalidArgument,
                "cannot tell which blob the loss should read: the model has \(produced.count) outputs produced by layers (\(produced.map(\.name).joined(separator: ", ")))",
                hint: "name it with --loss-input (UpdatableModelOptions.lossInput)")
        }
        return produced[0].name
    }

    /// Cross-entropy reads a softmax output (Core ML's rule). A softmaxND over the class axis is
    /// turned into softmax (returned: its index); anything else is refused.
    static func checkSoftmax(_ model: CoreMLModel, layerIndex: Int, input: String) throws -> Int? {
        let layer = model.layers[layerIndex]
        if case .softmax = layer.params { return nil }
        let hint = "add a softmax at the end of the model before converting it (torch.nn.Softmax(dim=1)), or train with --loss mse"
        guard layer.params.layerType == .softmaxND else {
            throw UpdraftError(.invalidArgument,
                "cross-entropy loss must read a softmax output, but '\(input)' comes from \(layer.typeName) layer '\(layer.name)'", hint: hint)
        }
        // The layer's raw message: the softmaxND axis, and the input rank when the converter recorded it.
        let network = model.message.last(model.spec.network.kind.fieldNumber).flatMap { try? ProtoMessage(parsing: $0.payload) }
        let raw = network.map { $0.all(1) }.flatMap { $0.indices.contains(layerIndex) ? try? ProtoMessage(parsing: $0[layerIndex].payload) : nil }
        let params = raw?.last(NeuralNetworkLayerType.softmaxND.rawValue).flatMap { try? ProtoMessage(parsing: $0.payload) }
        let axis = Int64(bitPattern: params?.last(1)?.scalar ?? 0)
        let rank = raw?.last(4).flatMap { try? ProtoMessage(parsing: $0.payload) }?.last(1).map { Int64($0.scalar) }
        let classAxis: Bool
        if let rank, rank > 0 {
            let a = axis < 0 ? axis + rank : axis
            classAxis = rank <= 2 ? a == rank - 1 : a == rank - 3
        } else {
            classAxis = axis == -1 || axis == 1 || axis == -3
        }
        guard classAxis else {
            throw UpdraftError(.unsupported,
                "cross-entropy loss reads '\(input)', the output of softmaxND layer '\(layer.name)' over axis \(axis)\(rank.map { " of a rank-\($0) tensor" } ?? ""), which is not the class axis a softmax layer normalizes",
                hint: hint)
        }
        return layerIndex
    }

    /// The training input carrying the target, as coremltools writes it.
    static func targetFeature(_ model: CoreMLModel, kind: LossKind, input: String, target: String) throws -> FeatureDescription {
        let d = model.spec.description
        switch kind {
        case .categoricalCrossEntropy:
            if model.kind == .classifier, input == d.predictedProbabilitiesName, !d.predictedFeatureName.isEmpty {
                // The label itself, typed like the classifier's label output.
                var type = FeatureType.string
                if let output = d.output(named: d.predictedFeatureName) {
                    if output.type == .int64 { type = .int64 }
                } else if case .int64? = model.classLabels {
                    type = .int64
                }
                return FeatureDescription(name: d.predictedFeatureName, type: type)
            }
            return FeatureDescription(name: target, type: .multiArray(ArrayFeatureType(shape: [1], dataType: .int32)))
        case .meanSquaredError:
            var shape: [Int]? = nil
            if case let .multiArray(a)? = d.output(named: input)?.type, !a.shape.isEmpty { shape = a.shape }
            if shape == nil, let s = NetworkGraph.checked(model).graph.blobShapes[input] {
                shape = s.h == 1 && s.w == 1 ? [s.c] : [s.c, s.h, s.w]
            }
            guard let shape else {
                throw UpdraftError(.invalidArgument,
                    "cannot tell the shape of the mean-squared-error target: '\(input)' is not a model output with a shape, and the layers before it cannot be run to infer it",
                    hint: "choose a model output with a declared multi-array shape as --loss-input, or train with --loss cross-entropy if it is a softmax")
            }
            return FeatureDescription(name: target, type: .multiArray(ArrayFeatureType(shape: shape, dataType: .double)))
        }
    }

    /// A real-valued hyperparameter: the new default (given, the model's, or coremltools'), its
    /// allowed range (given, the model's, or [0, 1]), both checked.
    static func resolve(_ given: Double?, _ allowed: DoubleBounds?, existing: DoubleParameter?, fallback: Double,
                        what: String, option: String, valid: (Double) -> Bool, rule: String) throws -> DoubleParameter {
        let value = given ?? existing?.defaultValue ?? fallback
        let range = allowed ?? (existing != nil ? existing?.range : UpdatableModelOptions.defaultRange)
        if let given, !(given.isFinite && valid(given)) {
            throw UpdraftError(.invalidArgument, "\(what) \(formatHyperparameter(given)) must be \(rule)")
        }
        if let allowed, !(allowed.min.isFinite && allowed.max.isFinite && allowed.min <= allowed.max) {
            throw UpdraftError(.invalidArgument, "the allowed \(what) range [\(formatHyperparameter(allowed.min)), \(formatHyperparameter(allowed.max))] is empty or not finite")
        }
        if given != nil || allowed != nil, let range, !range.contains(value) {
            let r = "[\(formatHyperparameter(range.min)), \(formatHyperparameter(range.max))]"
            throw UpdraftError(.invalidArgument,
                allowed != nil ? "the allowed \(what) range \(r) does not contain its default \(formatHyperparameter(value))"
                               : "\(what) \(formatHyperparameter(value)) is outside the model's allowed range \(r)",
                hint: allowed != nil ? "give a default inside it with --\(option)" : "give allowed values that contain it with --allowed-\(option) MIN..MAX")
        }
        return DoubleParameter(defaultValue: value, range: range)
    }

    /// An integer hyperparameter: the new default and its allowed set or range (coremltools: {default}).
    static func resolve(_ given: Int64?, _ allowed: Int64Constraint?, existing: Int64Parameter?, fallback: Int64,
                        what: String, option: String, allowedOption: String) throws -> Int64Parameter {
        let value = given ?? existing?.defaultValue ?? fallback
        if let given, given < 1 { throw UpdraftError(.invalidArgument, "\(what) \(given) must be at least 1") }
        switch allowed {
        case let .set(values)?:
            if values.isEmpty { throw UpdraftError(.invalidArgument, "the allowed \(what) set is empty") }
            if let bad = values.first(where: { $0 < 1 }) { throw UpdraftError(.invalidArgument, "the allowed \(what) set holds \(bad); every value must be at least 1") }
        case let .range(lo, hi)?:
            if lo < 1 || lo > hi { throw UpdraftError(.invalidArgument, "the allowed \(what) range [\(lo), \(hi)] must be non-empty and start at 1 or more") }
        case nil: break
        }
        let constraint = allowed ?? (existing != nil ? existing?.allowed : .set([value]))
        if given != nil || allowed != nil, let constraint, !constraint.allows(value) {
            let c = HyperparameterConstraint.int(constraint).description
            throw UpdraftError(.invalidArgument,
                allowed != nil ? "the allowed \(what) values \(c) do not contain its default \(value)"
                               : "\(what) \(value) is not among the model's allowed values \(c)",
                hint: allowed != nil ? "give a default among them with --\(option)" : "give allowed values that contain it with --\(allowedOption) (a set 8,16,32 or a range 1..1000)")
        }
        return Int64Parameter(defaultValue: value, allowed: constraint)
    }
}
