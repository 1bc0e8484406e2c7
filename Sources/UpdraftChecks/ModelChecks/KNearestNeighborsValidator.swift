import UpdraftCore
import UpdraftModel

/// Core ML's rules for a k-nearest-neighbors classifier (NearestNeighbors.proto's validator), every
/// problem at once: k above 0 and inside its allowed values, a weighting, an index and a distance
/// set, a kd-tree's leaf size above 0, as many labels as samples and each sample `numberOfDimensions`
/// long, a default label of the labels' type, and an empty index only with a default label; the
/// input a vector of that dimension; for an updatable model, training inputs of the input and the label.
public enum KNearestNeighborsValidator {
    /// Every finding for the k-NN `knn` inside `spec` (the Model around it), errors first in check order.
    public static func validate(_ spec: ModelSpec, _ knn: KNearestNeighborsSpec) -> [ValidationFinding] {
        var findings: [ValidationFinding] = []
        func error(_ m: String, hint: String? = nil) { findings.append(ValidationFinding(.error, m, hint: hint)) }
        let builder = "coremltools' KNearestNeighborsClassifierBuilder"

        if knn.dimension <= 0 {
            error("the k-NN's numberOfDimensions is \(knn.dimension); it must be at least 1",
                  hint: "set number_of_dimensions when making the model with \(builder)")
        }
        if let k = knn.numberOfNeighbors {
            if k.defaultValue <= 0 {
                error("numberOfNeighbors is \(k.defaultValue); it must be at least 1", hint: "set_number_of_neighbors_with_bounds(k, ...) with k >= 1")
            } else if !k.allows(k.defaultValue) {
                error("numberOfNeighbors' default \(k.defaultValue) is outside its allowed values (\(k.allowed.map { "\($0)" } ?? "any"))",
                      hint: "make the allowed range or set include the default")
            }
            if case let .range(lo, _)? = k.allowed, lo <= 0 {
                error("numberOfNeighbors' allowed range starts at \(lo); k must be at least 1")
            }
            if case let .set(values)? = k.allowed, values.contains(where: { $0 <= 0 }) {
                error("numberOfNeighbors' allowed set \(values) holds a value below 1")
            }
        } else {
            error("the k-NN has no numberOfNeighbors", hint: "set_number_of_neighbors_with_bounds(k, ...)")
        }
        if knn.weighting == nil { error("the k-NN sets no weighting scheme (uniform or inverse distance)") }
        switch knn.index {
        case nil: error("the k-NN's index sets no index type (linear or kd-tree)")
        case let .kdTree(leafSize)? where leafSize <= 0:
            error("the k-NN's kd-tree leaf size is \(leafSize); it must be at least 1", hint: "leaf_size=30 is coremltools' default")
        default: break
        }
        if !knn.squaredEuclideanDistance { error("the k-NN's index sets no distance function (squared Euclidean is the only one)") }

        let labelCount = knn.labels?.count ?? 0
        if labelCount != knn.samples.count {
            error("the k-NN holds \(knn.samples.count) sample\(knn.samples.count == 1 ? "" : "s") but \(labelCount) label\(labelCount == 1 ? "" : "s"); each sample needs one label")
        }
        let wrong = knn.samples.indices.filter { knn.samples[$0].count != Int(knn.dimension) }
        if let first = wrong.first {
            error("\(wrong.count) sample\(wrong.count == 1 ? " is" : "s are") not \(knn.dimension) long (the first, sample \(first), has \(knn.samples[first].count) values)")
        }
        switch (knn.labels, knn.defaultLabel) {
        case (.strings?, .int64?), (.int64?, .string?):
            error("the default label is \(knn.defaultLabel.map { if case .string = $0 { return "a string" } else { return "an int64" } } ?? "") but the labels are not",
                  hint: "give the default label the labels' type")
        case (_, nil) where knn.samples.isEmpty:
            error("the k-NN holds no samples and no default label: it has nothing to predict",
                  hint: "give a default_class_label, or add samples")
        default: break
        }

        // The input: one vector of the index's dimension.
        findings += ModelValidator.vectorInput(spec, dimension: Int(knn.dimension), of: "k-NN classifier")
        // The predicted label's output has the labels' type.
        let predicted = spec.description.predictedFeatureName
        if let out = spec.description.outputs.first(where: { $0.name == predicted }) {
            switch (knn.labels ?? knn.defaultLabel.map { if case .string = $0 { return .strings([]) } else { return .int64([]) } }, out.type) {
            case (.strings?, .string), (.int64?, .int64), (nil, _): break
            default: error("the predicted label output '\(predicted)' is \(out.type), not the type of the k-NN's labels")
            }
        } else {
            error("the model names no predicted-label output ('\(predicted)' is not among its outputs)",
                  hint: "set predictedFeatureName to the label output")
        }
        if spec.isUpdatable {
            if spec.specificationVersion < 4 {
                error("an updatable model needs specification version 4 or later; this one is \(spec.specificationVersion)")
            }
            let training = Set(spec.description.trainingInputs.map(\.name))
            for f in spec.description.inputs where !training.contains(f.name) {
                error("the k-NN is updatable but its input '\(f.name)' is not a training input", hint: "list the input and the label as training inputs")
            }
            if !training.contains(predicted) {
                error("the k-NN is updatable but its label '\(predicted)' is not a training input", hint: "list the input and the label as training inputs")
            }
        }
        return findings
    }
}

/// Core ML's rules for a pipeline's structure (the models' own rules are their kinds'): names, when
/// given, as many as the models and unique; an updatable pipeline's last model updatable (it may be
/// a pipeline itself) and no other; a pipeline that is not updatable holds no updatable model.
public enum PipelineValidator {
    /// Every structural finding for the pipeline `pipeline` inside `spec`.
    public static func validate(_ spec: ModelSpec, _ pipeline: PipelineSpec) -> [ValidationFinding] {
        var findings: [ValidationFinding] = []
        func error(_ m: String, hint: String? = nil) { findings.append(ValidationFinding(.error, m, hint: hint)) }
        if pipeline.models.isEmpty { error("the pipeline holds no models") }
        if !pipeline.names.isEmpty {
            if pipeline.names.count != pipeline.models.count {
                error("the pipeline names \(pipeline.names.count) model\(pipeline.names.count == 1 ? "" : "s") but holds \(pipeline.models.count)",
                      hint: "give one name per model, or none")
            }
            var seen = Set<String>()
            for n in pipeline.names where !seen.insert(n).inserted { error("the pipeline's model name '\(n)' is used more than once") }
        }
        let updatable = pipeline.models.indices.filter { pipeline.models[$0].isUpdatable }
        if spec.isUpdatable {
            if spec.specificationVersion < 4 {
                error("an updatable model needs specification version 4 or later; this one is \(spec.specificationVersion)")
            }
            if let last = pipeline.models.indices.last, !updatable.contains(last) {
                error("the pipeline is updatable but its last model, \(pipeline.name(of: last)), is not",
                      hint: "in an updatable pipeline the last model is the one that learns: mark it updatable")
            }
            for i in updatable where i != pipeline.models.count - 1 {
                error("only the last model of an updatable pipeline may be updatable, and \(pipeline.name(of: i)) is",
                      hint: "freeze the earlier models (the feature extractor)")
            }
        } else if let first = updatable.first {
            error("the pipeline is not updatable but its model \(pipeline.name(of: first)) is",
                  hint: "mark the pipeline updatable (isUpdatable) or its model not")
        }
        return findings
    }
}
