import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftChecks
import UpdraftData

/// What a model kind does as a pipeline's last model, the one an update changes; the models before
/// it only run. `PipelineModelKind` hands its work to the last model's kind through this, so a kind
/// that can end a pipeline conforms here (`NeuralNetworkModelKind`: trained behind the networks before
/// it, joined; `KNearestNeighborsModelKind`: appends the embedding they compute).
protocol PipelineLastModelKind: UpdatableModelKind {
    /// The run that updates `pipeline`'s model at `index` (its last).
    static func resolveAsLast(pipeline: CoreMLModel, index: Int, configuration: UpdateConfiguration,
                              environment: [String: String]) throws -> ResolvedRun
    /// The session of that run.
    static func makeSessionAsLast(task: UpdateTask, run: ResolvedRun, index: Int) throws -> any UpdateSession
    /// The network `updraft plan` places for `pipeline` run up to `index`, and a note on the rest.
    static func plannedNetworkAsLast(pipeline: CoreMLModel, index: Int) throws -> (network: CoreMLModel?, note: String?)
    /// `pipeline` run forward as one model, its model at `index` last.
    static func makePredictorAsLast(pipeline: CoreMLModel, index: Int, configuration: UpdateConfiguration, batchSize: Int,
                                    batchSource: String, environment: [String: String],
                                    warn: @escaping (String) -> Void) throws -> any ModelPredictor
}

/// The pipeline kind (Model fields 200, 201, 202): its models read as their own kinds; checked as
/// Core ML checks a pipeline (`PipelineValidator`) and each model by its kind; shown with each
/// model's report; run and updated as `CoreMLModel.pipelineNetwork` joins its networks.
enum PipelineModelKind: UpdatableModelKind {
    static let name = "pipeline"
    static let modelTypes: [CoreMLModelType] = [.pipeline, .pipelineClassifier, .pipelineRegressor]

    static func validate(_ model: CoreMLModel, forUpdate: Bool) -> [ModelFinding] {
        guard case let .pipeline(p) = model.spec.body else { return [] }
        var findings = PipelineValidator.validate(model.spec, p)
        do {
            // The last model of an updatable pipeline is the one that learns; the others only run.
            let models = try model.pipelineModels()
            for (i, m) in models.enumerated() {
                let learns = forUpdate && model.spec.isUpdatable && i == models.count - 1
                findings += ModelKinds.validate(m, forUpdate: learns).map {
                    ModelFinding($0.severity, "\(p.name(of: i)): \($0.message)", layer: $0.layer, hint: $0.hint, layers: $0.layers)
                }
            }
        } catch {
            findings.append(ModelFinding(.error, "the pipeline's models cannot be read: \(firstLine(of: error))"))
        }
        return findings
    }

    static func report(_ model: CoreMLModel, file: String?) -> ModelReport {
        guard case let .pipeline(p) = model.spec.body else { return ModelReport(model: model, file: file) }
        let models = (try? model.pipelineModels()) ?? []
        let reports = models.enumerated().map { i, m in
            var r = ModelKinds.report(m, file: p.name(of: i))
            // As part of the pipeline: only the last model of an updatable pipeline needs to be updatable.
            r.findings = ModelKinds.validate(m, forUpdate: model.spec.isUpdatable && i == models.count - 1).map(ModelReport.Finding.init)
            return r
        }
        let chain = zip(p.models.indices, p.models).map { "\(p.name(of: $0)) (\($1.modelType.name))" }.joined(separator: " -> ")
        return ModelReport(model: model, file: file, details: ["models: \(p.models.count): \(chain)"], models: reports,
                           classLabels: reports.last?.classLabels, hyperparameters: reports.last?.hyperparameters ?? [],
                           findings: validate(model, forUpdate: true))
    }

    /// A pipeline whose last model is a neural network trains that network with every model before
    /// it frozen: the run is resolved on the pipeline's networks joined (`pipelineNetwork(through:trainable:)`),
    /// so the earlier models are the frozen prefix the feature cache covers.
    static func resolve(model: CoreMLModel, configuration: UpdateConfiguration, environment: [String: String]) throws -> ResolvedRun {
        try throwFirstError(validate(model, forUpdate: true), doing: "be updated")
        let last = try lastKind(of: model, doing: "updates")
        return try last.kind.resolveAsLast(pipeline: model, index: last.index, configuration: configuration, environment: environment)
    }

    /// A last network: a `TrainingSession` on the joined networks. A last k-NN: an append of the
    /// embedding the models before it compute.
    static func makeSession(task: UpdateTask, run: ResolvedRun) throws -> any UpdateSession {
        let last = try lastKind(of: run.model, doing: "updates")
        return try last.kind.makeSessionAsLast(task: task, run: run, index: last.index)
    }

    /// What the last model's kind places: a last network's joined networks, a last k-NN's extractor;
    /// nothing (with a note) for a last model no kind can end a pipeline with.
    static func plannedNetwork(_ model: CoreMLModel) throws -> (network: CoreMLModel?, note: String?) {
        let last: (index: Int, kind: any PipelineLastModelKind.Type)
        do { last = try lastKind(of: model, doing: "plans") } catch let e as UpdraftError where e.kind == .unsupported {
            return (nil, e.message + ": not planned")
        }
        return try last.kind.plannedNetworkAsLast(pipeline: model, index: last.index)
    }

    /// The kind of the pipeline's last model (the one an update changes), which the pipeline's work
    /// goes to, and its index. A kind that cannot end a pipeline is refused by name.
    private static func lastKind(of model: CoreMLModel, doing what: String) throws -> (index: Int, kind: any PipelineLastModelKind.Type) {
        guard case let .pipeline(p) = model.spec.body, let last = p.models.last else {
            throw UpdraftError(.invalidModel, "the pipeline holds no models", hint: "add the models it runs")
        }
        guard let kind = ModelKinds.kind(for: last.modelType) as? any PipelineLastModelKind.Type else {
            throw UpdraftError(.unsupported, "the pipeline's last model is a \(last.modelType.name); Updraft \(what) pipelines whose last model is a neural network or a k-NN",
                               hint: "flatten an inner pipeline into the outer one")
        }
        return (p.models.count - 1, kind)
    }

    /// The pipeline's models run as one: a last neural network with the networks before it joined
    /// to it (`CoreMLModel.pipelineNetwork`), a last k-NN behind the joined extractor
    /// (`PipelineNearestNeighborsPredictor`); first, every problem that keeps it from running.
    static func makePredictor(model: CoreMLModel, configuration: UpdateConfiguration, batchSize: Int, batchSource: String,
                              environment: [String: String], warn: @escaping (String) -> Void) throws -> any ModelPredictor {
        try throwFirstError(validate(model, forUpdate: false), doing: "run")
        let last = try lastKind(of: model, doing: "runs")
        return try last.kind.makePredictorAsLast(pipeline: model, index: last.index, configuration: configuration, batchSize: batchSize,
                                                 batchSource: batchSource, environment: environment, warn: warn)
    }

}

/// The run of a pipeline whose last model is a network: a `TrainingSession` on the joined networks,
/// whose trained layers (the last model's, by their own names) go back into the pipeline's last model.
final class PipelineNetworkSession: UpdateSession {
    let training: TrainingSession
    /// The position of the trained model in the pipeline.
    let index: Int

    init(training: TrainingSession, index: Int) { self.training = training; self.index = index }

    var parameters: TrainingParameters {
        get { training.parameters }
        set { training.parameters = newValue }
    }
    var hyperparameters: [Hyperparameter] { training.hyperparameters }
    var lastMetrics: TrainingMetrics? { training.lastMetrics }
    var featureCacheStatistics: FeatureCacheStatistics? { training.featureCacheStatistics }
    var profile: TrainingProfile? { training.profile }
    var preparationSeconds: Double? { training.preparationSeconds }

    func train() throws { try training.train() }

    /// The pipeline's last network trains: its run's log.
    func makeTensorBoardLog(directory: URL, exampleCount: Int, warn: @escaping (String) -> Void) throws -> (any TensorBoardLog)? {
        try training.makeTensorBoardLog(directory: directory, exampleCount: exampleCount, warn: warn)
    }

    func currentModel(updating original: CoreMLModel) throws -> CoreMLModel {
        try original.replacingPipelineModel(at: index, with: training.currentModel(updating: original.pipelineModels()[index]))
    }

    func weights(ofLayer name: String) throws -> (weights: Tensor, bias: Tensor?) { try training.weights(ofLayer: name) }

    func checkpoint() throws -> TrainingCheckpoint { try training.checkpoint() }

    func end(into original: CoreMLModel, keepResumePoint: Bool) -> EndedRun {
        let own = Result { try original.pipelineModels()[index] }
        var ended = training.end(into: (try? own.get()) ?? original, keepResumePoint: keepResumePoint)
        ended.model = Result { try original.replacingPipelineModel(at: index, with: ended.model.get()) }
        return ended
    }
}

/// A pipeline's k-NN examples: the vectors the models before it compute from the data's inputs,
/// with the labels `labels` gives.
struct PipelineEmbeddingSource: KNearestNeighborsExampleSource {
    let extractor: PipelineNearestNeighborsPredictor
    let data: BatchProvider
    let labels: KNearestNeighborsExampleSource

    var count: Int { data.count }

    func labels(in range: Range<Int>) throws -> ClassLabels { try labels.labels(in: range) }

    func examples(in range: Range<Int>) throws -> (vectors: Tensor, labels: ClassLabels) {
        let position = "examples \(range.lowerBound + 1)-\(range.upperBound)"
        return (try extractor.vectors(data, range: range, position: position).vectors, try labels.labels(in: range))
    }
}
