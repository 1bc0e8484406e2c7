import Foundation
import UpdraftModel

/// Everything `updraft inspect` shows about a model, as a value: rendered as text for people or
/// encoded as JSON for scripts. Built from the model, its graph (when one can be built: shapes and
/// topological order) and the validator's findings.
public struct ModelReport: Encodable, Sendable {
    /// One input, output or training input of the model.
    public struct Feature: Encodable, Sendable {
        /// The feature's name in the model description.
        public var name: String
        /// The feature type as text, e.g. `Image (RGB 227x227)` or `MultiArray (FLOAT32 10)`.
        public var type: String
        /// Image `[C, H, W]` (C 0 for an unknown color space) or the multi-array's shape; nil for other types.
        public var shape: [Int]?
    }
    /// The input image scaler the network applies: x = scale * pixel + bias.
    public struct Preprocessing: Encodable, Sendable {
        /// NeuralNetworkImageScaler.channelScale, multiplied with each pixel value (0...255).
        public var scale: Float
        /// Per-channel bias, in the order the image's channels reach the network (one value for grayscale).
        public var bias: [Float]
    }
    /// One layer row: its place, blobs, output shape, parameter count and updatability.
    public struct Layer: Encodable, Sendable {
        /// The layer's position in the model file (rows are in execution order when the graph builds).
        public var index: Int
        /// The layer's name in the model.
        public var name: String
        /// The layer type with key settings, e.g. `convolution 3x3/2`, `pooling max 2x2`, `activation relu`.
        public var type: String
        /// Names of the blobs the layer reads.
        public var inputs: [String]
        /// Names of the blobs the layer writes.
        public var outputs: [String]
        /// Per-example output shape [C, H, W] (nil when the graph could not be built).
        public var outputShape: [Int]?
        /// The output's shape as the model's layers see it (LogicalShape.dims, batch 1), e.g. [1, 2, 2, 5, 5].
        public var logicalShape: [Int]?
        /// Which of `logicalShape` is the batch (nil: none, the batch is implicit).
        public var batchAxis: Int?
        /// Number of stored weight and bias values (batchnorm: its four vectors); 0 for layers without any.
        public var parameters: Int
        /// Whether the layer is marked isUpdatable.
        public var updatable: Bool
        /// How the layer's weights are stored (`WeightEncoding` raw value, e.g. `float32`, `float16`); nil for layers without weights.
        public var weightEncoding: String?
    }
    /// The model's loss layer.
    public struct Loss: Encodable, Sendable {
        /// The loss layer's name.
        public var name: String
        /// `categoricalCrossEntropy`, `meanSquaredError`, or "unknown (field N)" for a loss type Updraft does not read.
        public var kind: String
        /// The blob the loss reads.
        public var input: String
        /// The loss's target name as stored in the model.
        public var target: String
        /// The training input that carries the target (see `CoreMLModel.lossTargetFeature`); nil when none matches.
        public var targetFeature: String?
    }
    /// One hyperparameter with its default and allowed values.
    public struct Parameter: Encodable, Sendable {
        /// The MLParameterKey name, e.g. `learningRate`, `miniBatchSize`, `epochs`.
        public var name: String
        /// The default training uses (JSON: a number or a bool).
        public var defaultValue: HyperparameterValue
        /// The allowed values as text ("[0, 1]", "{1, 2, 8}", "any").
        public var allowed: String
        /// The same for scripts: a range's bounds or a set's values (all nil: any value).
        public var allowedMin: Double?
        /// Upper bound of an allowed range (integer ranges too, as a Double); nil for a set or no constraint.
        public var allowedMax: Double?
        /// The allowed set of an integer hyperparameter; nil for a range or no constraint.
        public var allowedValues: [Int64]?
        /// False when the model does not state the parameter and the default is Core ML's fallback.
        public var inModel: Bool
    }
    /// One validator finding (see `ModelValidator`).
    public struct Finding: Encodable, Sendable {
        /// `error` (Core ML would refuse the model and Updraft will not train it) or `warning` (Updraft can still train it, or it is probably a mistake).
        public var severity: String
        /// What is wrong, in one sentence.
        public var message: String
        /// The layer the finding is about; nil for model-level findings.
        public var layer: String?
        /// What to do about it.
        public var hint: String?
        /// Every layer concerned (all the layers of one unsupported type, for a grouped finding).
        public var layers: [String]?
    }

    /// The path the model was read from, as given by the caller; nil (shown "(in memory)") otherwise.
    public var file: String?
    /// Which network case the model holds: `neuralNetwork`, `neuralNetworkClassifier` or `neuralNetworkRegressor`.
    public var kind: String
    /// Model.specificationVersion.
    public var specificationVersion: Int
    /// Model.isUpdatable.
    public var isUpdatable: Bool
    /// Metadata.shortDescription; empty when unset.
    public var shortDescription: String
    /// The prediction inputs.
    public var inputs: [Feature]
    /// The prediction outputs.
    public var outputs: [Feature]
    /// The training inputs (prediction inputs plus the loss target).
    public var trainingInputs: [Feature]
    /// The input image scaler; nil when the model has none.
    public var preprocessing: Preprocessing?
    /// A classifier's class labels as text (int64 labels in decimal); nil for other networks.
    public var classLabels: [String]?
    /// Every layer, in execution order when the graph builds, else in file order.
    public var layers: [Layer]
    /// Sum of `parameters` over all layers.
    public var totalParameters: Int
    /// The loss layer; nil when the model has no update parameters.
    public var loss: Loss?
    /// `SGD` or `Adam`; nil when the model states no optimizer.
    public var optimizer: String?
    /// Every hyperparameter, in MLParameterKey order (see `UpdateParameters.hyperparameters`).
    public var hyperparameters: [Parameter]
    /// The validator's findings, errors and warnings in the validator's order.
    public var findings: [Finding]
    /// Layers that could not be checked because they read the output of a layer with an error.
    public var uncheckedLayers: [String]
    /// One sentence explaining `uncheckedLayers`; nil when there are none.
    public var uncheckedNote: String?
    /// What a model that is not a network holds, a line each (a k-NN's samples, labels, k, weighting,
    /// index); empty for a network.
    public var details: [String] = []
    /// A pipeline's models in the order they run, each reported by its own kind (`file` holds its
    /// name in the pipeline); empty for other models.
    public var models: [ModelReport] = []

    /// Builds the report: reads the model, builds its graph for shapes and execution order, and runs `ModelValidator`.
    /// Never throws; problems become `findings`. `file` is only shown.
    public init(model: CoreMLModel, file: String? = nil) {
        let spec = model.spec
        // The features and the model's flags as for every kind, then the network's parts.
        self.init(model: model, file: file, details: [], classLabels: spec.network.classLabels?.asStrings,
                  hyperparameters: [], findings: [])
        kind = spec.network.kind.rawValue

        let (partial, problems) = NetworkGraph.checked(model)
        let graph = problems.isEmpty ? partial : nil
        uncheckedLayers = problems.unchecked.map(\.layer)
        uncheckedNote = problems.uncheckedNote
        // The layers whose shapes were inferred, when others failed.
        let inferred = Dictionary(partial.layers.map { ($0.modelIndex, $0) }, uniquingKeysWith: { a, _ in a })
        preprocessing = graph?.input.preprocessing.map { Preprocessing(scale: $0.scale, bias: $0.bias) }
        if graph == nil, let s = model.imageScaler { preprocessing = Preprocessing(scale: s.channelScale, bias: [s.redBias, s.greenBias, s.blueBias]) }
        var rows: [Layer] = []
        let specLayers = spec.network.layers
        // In execution order with the graph's view of each layer, else in file order.
        let order: [(Int, GraphLayer?)] = graph?.layers.map { ($0.modelIndex, $0) } ?? specLayers.indices.map { ($0, inferred[$0]) }
        for (i, g) in order {
            let l = specLayers[i]
            let shape = g.map { [$0.outputShape.c, $0.outputShape.h, $0.outputShape.w] }
            let encoding = l.weightParams.map { $0.weights.encoding.rawValue }
            // Without a graph (or for weights Updraft cannot read), count what the layer's shapes imply.
            var parameters = g?.parameterCount ?? l.parameterCount
            if parameters == 0, l.weightParams != nil, let w = try? LayerShapes.weightShape(l) {
                parameters = w.count + (LayerShapes.hasBias(l) ? LayerShapes.outputChannels(l) : 0)
            }
            rows.append(Layer(index: i, name: l.name, type: ModelReport.typeDescription(l), inputs: l.inputs, outputs: l.outputs,
                              outputShape: shape, logicalShape: g?.outputLogicalShape.dims, batchAxis: g?.outputLogicalShape.batchAxis,
                              parameters: parameters,
                              updatable: l.isUpdatable, weightEncoding: encoding))
        }
        layers = rows
        totalParameters = rows.reduce(0) { $0 + $1.parameters }
        if let l = model.loss {
            loss = Loss(name: l.name, kind: l.kind?.rawValue ?? "unknown (field \(l.unknownTypeField ?? 0))",
                        input: l.input, target: l.target, targetFeature: model.lossTargetFeature?.name)
        }
        optimizer = model.optimizer.map { $0.kind.optimizerType.name }
        hyperparameters = model.hyperparameters.map {
            var p = Parameter(name: $0.key.rawValue, defaultValue: $0.defaultValue, allowed: $0.constraint.description,
                              inModel: $0.inModel)
            switch $0.constraint {
            case .none: break
            case let .doubleRange(r): p.allowedMin = r.min; p.allowedMax = r.max
            case let .int(.range(lo, hi)): p.allowedMin = Double(lo); p.allowedMax = Double(hi)
            case let .int(.set(values)): p.allowedValues = values
            }
            return p
        }
        findings = ModelValidator.validate(model).map(Finding.init)
    }

    static func typeDescription(_ l: LayerSpec) -> String { l.typeDescription }

    static func feature(_ f: FeatureDescription) -> Feature {
        var shape: [Int]? = nil
        switch f.type {
        case let .image(i): shape = [i.colorSpace.channels ?? 0, i.height, i.width]
        case let .multiArray(a): shape = a.shape
        default: break
        }
        return Feature(name: f.name, type: f.type.description, shape: shape)
    }

    // MARK: Text

    /// The report as the multi-line text `updraft inspect` prints (a layer table, loss, hyperparameters, findings with hints).
    public func text() -> String {
        var s = ""
        func line(_ t: String = "") { s += t + "\n" }
        func pad(_ t: String, _ n: Int) -> String { t.count >= n ? t + " " : t + String(repeating: " ", count: n - t.count) }
        func padLeft(_ t: String, _ n: Int) -> String { t.count >= n ? t : String(repeating: " ", count: n - t.count) + t }
        func grouped(_ n: Int) -> String {
            let digits = Array(String(n))
            var out = ""
            for (i, d) in digits.enumerated() {
                if i > 0, (digits.count - i) % 3 == 0 { out += "," }
                out.append(d)
            }
            return out
        }

        line("model: \(file ?? "(in memory)")")
        line("  \(kind), specification version \(specificationVersion), \(isUpdatable ? "updatable" : "not updatable")")
        if !shortDescription.isEmpty { line("  \(shortDescription)") }
        for (title, list) in [("inputs", inputs), ("outputs", outputs), ("training inputs", trainingInputs)] {
            line("\(title):" + (list.isEmpty ? " none" : ""))
            let width = (list.map(\.name.count).max() ?? 0) + 2
            for f in list { line("  " + pad(f.name, width) + f.type) }
        }
        if let p = preprocessing {
            line("preprocessing: x = \(p.scale) * pixel + [\(p.bias.map { "\($0)" }.joined(separator: ", "))]")
        }
        if let labels = classLabels {
            let shown = labels.prefix(10).joined(separator: ", ") + (labels.count > 10 ? ", …" : "")
            line("class labels: \(labels.count) (\(shown))")
        }
        if details.isEmpty && models.isEmpty {
            let updatableCount = layers.filter(\.updatable).count
            line("layers: \(layers.count), \(grouped(totalParameters)) parameters, \(updatableCount) updatable")
            let nameWidth = min(32, max(6, (layers.map(\.name.count).max() ?? 0) + 2))
            let typeWidth = max(6, (layers.map(\.type.count).max() ?? 0) + 2)
            line("  " + padLeft("#", 3) + "  " + pad("name", nameWidth) + pad("type", typeWidth) + pad("output", 14)
                 + padLeft("params", 10) + "  updatable")
            for l in layers {
                // One example's dimensions as the model sees them ([C, H, W] for 4-D blobs; [K] for vectors).
                let example = l.logicalShape.map { d in l.batchAxis.map { Array(d[($0 + 1)...]) } ?? d } ?? l.outputShape
                let shape = example.map { d in
                    d.count > 1 && d.dropFirst().allSatisfy({ $0 == 1 }) ? "\(d[0])" : d.map(String.init).joined(separator: "x")
                } ?? "?"
                var row = "  " + padLeft(String(l.index), 3) + "  " + pad(l.name, nameWidth) + pad(l.type, typeWidth) + pad(shape, 14)
                row += padLeft(l.parameters > 0 ? grouped(l.parameters) : "-", 10)
                if l.updatable { row += "  yes" }
                if let e = l.weightEncoding, e != "float32" { row += "  (weights \(e))" }
                line(row)
            }
            if let l = loss {
                line("loss: \(l.name): \(l.kind) on '\(l.input)', target '\(l.target)'"
                     + (l.targetFeature.map { $0 != l.target ? " (training input '\($0)')" : "" } ?? " (not among the training inputs)"))
            } else {
                line("loss: none")
            }
            line("optimizer: \(optimizer ?? "none")")
        }
        for d in details { line(d) }
        for m in models {
            line("model \(m.file ?? "?"):")
            for l in m.text().split(separator: "\n").dropFirst() { line("  " + l) }
        }
        if !hyperparameters.isEmpty {
            line("hyperparameters:")
            let width = (hyperparameters.map(\.name.count).max() ?? 0) + 2
            for h in hyperparameters {
                line("  " + pad(h.name, width) + pad("default \(h.defaultValue)", 18) + "allowed \(h.allowed)"
                     + (h.inModel ? "" : "  (not in the model; Core ML's default)"))
            }
        }
        let errors = findings.filter { $0.severity == "error" }.count
        let warnings = findings.count - errors
        line("validation: " + (findings.isEmpty ? "no problems" : "\(errors) error\(errors == 1 ? "" : "s"), \(warnings) warning\(warnings == 1 ? "" : "s")"))
        var hints: Set<String> = []   // each hint once, under the first finding it helps
        for f in findings {
            line("  \(f.severity): \(f.message)")
            if let h = f.hint, hints.insert(h).inserted { line("      hint: \(h)") }
        }
        if let note = uncheckedNote { line("  note: \(note)") }
        return s
    }

    // MARK: JSON

    /// The report as pretty-printed JSON with sorted keys (`updraft inspect --json`); non-finite floats become "inf", "-inf", "nan".
    /// - Throws: `EncodingError` only if encoding fails.
    public func json() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }
}

extension HyperparameterValue: Encodable {
    /// Encodes the bare value: a JSON number for `.double`/`.int`, a bool for `.bool`.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case let .double(d): try c.encode(d)
        case let .int(i): try c.encode(i)
        case let .bool(b): try c.encode(b)
        }
    }
}
