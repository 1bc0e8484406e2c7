import UpdraftCore

/// Reading the typed spec from parsed protobuf messages. Field numbers are those of coremltools'
/// Model.proto, FeatureTypes.proto, NeuralNetwork.proto, Parameters.proto and DataStructures.proto
/// (see /work/shared/reference/coreml-training.md). Wire-level problems throw `ProtobufError`
/// (byte offset, message path, expectation); values that make no sense throw `UpdraftError`.
extension ModelSpec {
    /// Reads a Model message: a neural network, a k-NN classifier or a pipeline (whose models are read the same way).
    init(reading r: ProtoReader) throws {
        specificationVersion = try r.int32(1, "specificationVersion") ?? 0
        description = try ModelDescription(reading: r.messageOrEmpty(2, "description"))
        isUpdatable = try r.bool(10, "isUpdatable") ?? false
        guard let typeField = r.message.fields.last(where: { $0.number >= 200 }) else {
            throw UpdraftError(.invalidModel, "the model holds no model type (no neural network or other model in it)",
                               hint: "is this a Core ML .mlmodel file?")
        }
        let type = CoreMLModelType(rawValue: typeField.number)
        self.body = try Self.body(reading: r.child(typeField, named: type?.name ?? "field \(typeField.number)"), type: type, field: typeField.number)
    }

    /// The body of a model stored under Model field `field` (`type`, when Updraft knows its name).
    private static func body(reading body: ProtoReader, type: CoreMLModelType?, field: Int) throws -> ModelBody {
        switch type {
        case .neuralNetworkClassifier?: return .neuralNetwork(try NeuralNetworkSpec(reading: body, kind: .classifier))
        case .neuralNetworkRegressor?: return .neuralNetwork(try NeuralNetworkSpec(reading: body, kind: .regressor))
        case .neuralNetwork?: return .neuralNetwork(try NeuralNetworkSpec(reading: body, kind: .plain))
        case .kNearestNeighborsClassifier?: return .kNearestNeighbors(try KNearestNeighborsSpec(reading: body))
        case .pipelineClassifier?: return .pipeline(try PipelineSpec(reading: body, kind: .classifier))
        case .pipelineRegressor?: return .pipeline(try PipelineSpec(reading: body, kind: .regressor))
        case .pipeline?: return .pipeline(try PipelineSpec(reading: body, kind: .plain))
        default:
            if let t = type, let family = try ModelBody.family(reading: body, type: t) { return family }
            let name = CoreMLModelType.name(ofField: field)
            let families = ModelBody.families.flatMap { $0.modelTypes }.map(\.name)
            throw UpdraftError(.unsupported,
                "this model is a \(name) (Model field \(field)); Updraft reads neural networks, k-nearest-neighbors classifiers, "
                    + families.joined(separator: ", ") + " and pipelines of them",
                hint: "Updraft reads neuralNetwork, neuralNetworkClassifier, neuralNetworkRegressor, kNearestNeighborsClassifier, "
                    + families.joined(separator: ", ") + ", pipeline, pipelineClassifier and pipelineRegressor models")
        }
    }
}

// MARK: Description

extension ModelDescription {
    init(reading r: ProtoReader) throws {
        inputs = try r.messages(1, "input").map(FeatureDescription.init(reading:))
        outputs = try r.messages(10, "output").map(FeatureDescription.init(reading:))
        trainingInputs = try r.messages(50, "trainingInput").map(FeatureDescription.init(reading:))
        predictedFeatureName = try r.string(11, "predictedFeatureName") ?? ""
        predictedProbabilitiesName = try r.string(12, "predictedProbabilitiesName") ?? ""
        metadata = try ModelMetadata(reading: r.messageOrEmpty(100, "metadata"))
    }
}

extension ModelMetadata {
    init(reading r: ProtoReader) throws {
        shortDescription = try r.string(1, "shortDescription") ?? ""
        versionString = try r.string(2, "versionString") ?? ""
        author = try r.string(3, "author") ?? ""
        license = try r.string(4, "license") ?? ""
        userDefined = try r.messages(100, "userDefined").map {
            KeyValue(key: try $0.string(1, "key") ?? "", value: try $0.string(2, "value") ?? "")
        }
    }
}

extension FeatureDescription {
    init(reading r: ProtoReader) throws {
        name = try r.string(1, "name") ?? ""
        shortDescription = try r.string(2, "shortDescription") ?? ""
        let t = try r.messageOrEmpty(3, "type")
        isOptional = try t.bool(1000, "isOptional") ?? false
        type = try FeatureType(reading: t)
    }
}

extension FeatureType {
    static let caseNames: [Int: String] = [1: "int64Type", 2: "doubleType", 3: "stringType", 4: "imageType",
                                           5: "multiArrayType", 6: "dictionaryType", 7: "sequenceType", 8: "stateType"]

    init(reading r: ProtoReader) throws {
        guard let f = r.message.fields.last(where: { $0.number < 1000 }) else {
            self = .unsupported("no type")
            return
        }
        let name = FeatureType.caseNames[f.number] ?? "feature type \(f.number)"
        let m = try r.child(f, named: name)
        switch f.number {
        case 1: self = .int64
        case 2: self = .double
        case 3: self = .string
        case 4:
            self = .image(ImageFeatureType(
                width: Int(try m.int64(1, "width") ?? 0), height: Int(try m.int64(2, "height") ?? 0),
                colorSpace: ImageColorSpace(rawValue: try m.int32(3, "colorSpace") ?? 0),
                hasFlexibleSize: m.has(21) || m.has(31)))
        case 5:
            self = .multiArray(ArrayFeatureType(
                shape: try m.varints(1, "shape").map { Int(truncatingIfNeeded: $0) },
                dataType: ArrayDataType(rawValue: try m.int32(2, "dataType") ?? 0),
                hasFlexibleShape: m.has(21) || m.has(31)))
        case 6:
            guard let key = m.lastOf([1, 2]) else { self = .unsupported("dictionaryType without a key type"); return }
            self = .dictionary(key.number == 1 ? .int64 : .string)
        default:
            self = .unsupported(name)
        }
    }
}

// MARK: Network

extension NeuralNetworkSpec {
    init(reading r: ProtoReader, kind: NeuralNetworkKind) throws {
        self.kind = kind
        let layerReaders = try r.messages(1, "layers")
        var layers: [LayerSpec] = []
        layers.reserveCapacity(layerReaders.count)
        for (i, l) in layerReaders.enumerated() { layers.append(try LayerSpec(reading: l, index: i)) }
        self.layers = layers
        preprocessing = try r.messages(2, "preprocessing").map(PreprocessingSpec.init(reading:))
        arrayInputShapeMapping = try r.int32(5, "arrayInputShapeMapping") ?? 0
        imageInputShapeMapping = try r.int32(6, "imageInputShapeMapping") ?? 0
        updateParameters = try r.message(10, "updateParams").map(UpdateParameters.init(reading:))
        classLabels = nil
        labelProbabilityLayerName = ""
        if kind == .classifier {
            if let labels = r.lastOf([100, 101]) {
                if labels.number == 100 {
                    let v = try r.child(labels, named: "stringClassLabels")
                    classLabels = .strings(try v.strings(1, "vector"))
                } else {
                    let v = try r.child(labels, named: "int64ClassLabels")
                    classLabels = .int64(try v.varints(1, "vector").map { Int64(bitPattern: $0) })
                }
            }
            labelProbabilityLayerName = try r.string(200, "labelProbabilityLayerName") ?? ""
        }
    }
}

extension PreprocessingSpec {
    init(reading r: ProtoReader) throws {
        featureName = try r.string(1, "featureName") ?? ""
        hasMeanImage = false
        scaler = nil
        if let f = r.lastOf([10, 11]) {
            if f.number == 10 {
                let s = try r.child(f, named: "scaler")
                scaler = ImageScaler(channelScale: try s.float(10, "channelScale") ?? 0,
                                     redBias: try s.float(22, "redBias") ?? 0, greenBias: try s.float(21, "greenBias") ?? 0,
                                     blueBias: try s.float(20, "blueBias") ?? 0, grayBias: try s.float(30, "grayBias") ?? 0)
            } else {
                hasMeanImage = true
            }
        }
    }
}

// MARK: Update parameters

extension DoubleParameter {
    init(reading r: ProtoReader) throws {
        defaultValue = try r.double(1, "defaultValue") ?? 0
        range = try r.message(10, "range").map {
            DoubleBounds(min: try $0.double(1, "minValue") ?? 0, max: try $0.double(2, "maxValue") ?? 0)
        }
    }
}

extension Int64Parameter {
    init(reading r: ProtoReader) throws {
        defaultValue = try r.int64(1, "defaultValue") ?? 0
        allowed = nil
        if let f = r.lastOf([10, 11]) {
            if f.number == 10 {
                let m = try r.child(f, named: "range")
                allowed = .range(min: try m.int64(1, "minValue") ?? 0, max: try m.int64(2, "maxValue") ?? 0)
            } else {
                let m = try r.child(f, named: "set")
                allowed = .set(try m.varints(1, "values").map { Int64(bitPattern: $0) })
            }
        }
    }
}

extension UpdateParameters {
    init(reading r: ProtoReader) throws {
        lossLayers = try r.messages(1, "lossLayers").map(LossLayerSpec.init(reading:))
        optimizer = nil
        if let o = try r.message(2, "optimizer"), let f = o.lastOf(OptimizerKind.coreMLFields),
           let kind = OptimizerKind(coreMLField: f.number), let fields = kind.optimizerType.coreML {
            let m = try o.child(f, named: fields.name)
            var spec = OptimizerSpec(kind: kind,
                                     learningRate: try m.message(1, "learningRate").map(DoubleParameter.init(reading:)),
                                     miniBatchSize: try m.message(2, "miniBatchSize").map(Int64Parameter.init(reading:)))
            for p in fields.parameters {
                spec[p.key] = try m.message(p.field, p.key.rawValue).map(DoubleParameter.init(reading:))
            }
            optimizer = spec
        }
        epochs = try r.message(3, "epochs").map(Int64Parameter.init(reading:))
        shuffle = try r.message(10, "shuffle").map { BoolParameter(defaultValue: try $0.bool(1, "defaultValue") ?? false) }
        seed = try r.message(20, "seed").map(Int64Parameter.init(reading:))
    }
}

extension LossLayerSpec {
    init(reading r: ProtoReader) throws {
        name = try r.string(1, "name") ?? ""
        kind = nil; input = ""; target = ""; unknownTypeField = nil
        guard let f = r.message.fields.last(where: { $0.number >= 10 }) else { return }
        switch f.number {
        case 10, 11:
            let caseName = f.number == 10 ? "categoricalCrossEntropyLossLayer" : "meanSquaredErrorLossLayer"
            let m = try r.child(f, named: caseName)
            kind = f.number == 10 ? .categoricalCrossEntropy : .meanSquaredError
            input = try m.string(1, "input") ?? ""
            target = try m.string(2, "target") ?? ""
        default:
            unknownTypeField = f.number
        }
    }
}
