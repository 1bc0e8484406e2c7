import Foundation
import UpdraftCore
import UpdraftModel

extension ModelReport.Finding {
    /// A validator's finding as the report shows it.
    public init(_ f: ValidationFinding) {
        self.init(severity: f.severity.rawValue, message: f.message, layer: f.layer, hint: f.hint, layers: f.layers.count > 1 ? f.layers : nil)
    }
}

/// Reports of the models that are not networks: k-nearest-neighbors classifiers here; pipelines are
/// put together by their kind from their models' reports.
extension ModelReport {
    /// The report of a model that is not a network: its features, the lines `details` that describe
    /// it, its `models` (a pipeline's), the values it may be updated with and the `findings`.
    public init(model: CoreMLModel, file: String?, details: [String], models: [ModelReport] = [], classLabels: [String]?,
                hyperparameters: [Parameter], findings: [ValidationFinding]) {
        let spec = model.spec
        self.file = file
        kind = spec.modelType.name
        specificationVersion = Int(spec.specificationVersion)
        isUpdatable = spec.isUpdatable
        shortDescription = spec.description.metadata.shortDescription
        inputs = spec.description.inputs.map(Self.feature)
        outputs = spec.description.outputs.map(Self.feature)
        trainingInputs = spec.description.trainingInputs.map(Self.feature)
        preprocessing = nil
        self.classLabels = classLabels
        layers = []
        totalParameters = 0
        loss = nil
        optimizer = nil
        self.hyperparameters = hyperparameters
        self.findings = findings.map(Finding.init)
        uncheckedLayers = []
        uncheckedNote = nil
        self.details = details
        self.models = models
    }

    /// A k-nearest-neighbors classifier: its samples, labels, k, weighting and index, checked by `KNearestNeighborsValidator`.
    public init(kNearestNeighbors model: CoreMLModel, file: String?) {
        guard case let .kNearestNeighbors(knn) = model.spec.body else {
            self.init(model: model, file: file)
            return
        }
        let labels = knn.labels?.asStrings ?? []
        var perLabel: [String: Int] = [:]
        for l in labels { perLabel[l, default: 0] += 1 }
        let distinct = knn.distinctLabels
        let sampleLabels = distinct.filter { perLabel[$0] != nil }
        let counts = sampleLabels.prefix(10).map { "\($0) \(perLabel[$0] ?? 0)" }.joined(separator: ", ") + (sampleLabels.count > 10 ? ", …" : "")
        let k = knn.numberOfNeighbors
        var details = ["samples: \(knn.samples.count) of dimension \(knn.dimension)" + (labels.isEmpty ? "" : " (per label: \(counts))")]
        details.append("neighbors: k = \(k.map { String($0.defaultValue) } ?? "not set")"
                       + (k?.allowed.map { ", allowed \(HyperparameterConstraint.int($0).description)" } ?? ""))
        details.append("weighting: \(knn.weighting.map { $0 == .uniform ? "uniform" : "inverse distance" } ?? "not set")")
        details.append("index: \(knn.index?.description ?? "not set"), distance: \(knn.squaredEuclideanDistance ? "squared Euclidean" : "not set")")
        if let d = knn.defaultLabel { details.append("default label: \(d.text)") }
        var parameters: [Parameter] = []
        if let k {
            var p = Parameter(name: "numberOfNeighbors", defaultValue: .int(k.defaultValue),
                              allowed: k.allowed.map { HyperparameterConstraint.int($0).description } ?? HyperparameterConstraint.none.description,
                              inModel: true)
            switch k.allowed {
            case let .range(lo, hi)?: p.allowedMin = Double(lo); p.allowedMax = Double(hi)
            case let .set(values)?: p.allowedValues = values
            case nil: break
            }
            parameters.append(p)
        }
        self.init(model: model, file: file, details: details, classLabels: distinct.isEmpty ? nil : distinct,
                  hyperparameters: parameters, findings: KNearestNeighborsValidator.validate(model.spec, knn))
    }
}
