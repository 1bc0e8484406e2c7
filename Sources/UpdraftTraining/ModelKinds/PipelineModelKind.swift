import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftChecks
import UpdraftPlacement
import UpdraftData

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
        let last = try lastModel(of: model)
        switch last.spec.body {
        case .neuralNetwork:
            return try ResolvedRun.resolve(model: model, network: model.pipelineNetwork(through: last.index, trainable: true),
                                           configuration: configuration, environment: environment)
        case .kNearestNeighbors:
            // The k-NN's own checks (k, the settings an append takes); the extractor is placed when the session starts.
            let knn = try KNearestNeighborsModelKind.resolveUpdate(model: model.pipelineModels()[last.index], configuration: configuration)
            return ResolvedRun(model: model, graph: nil, parameters: knn.parameters, configuration: configuration, schedule: nil)
        case .pipeline:
            throw UpdraftError(.unsupported, "the pipeline's last model is itself a pipeline; Updraft updates pipelines of neural networks and a last k-NN or network",
                               hint: "flatten the inner pipeline into the outer one")
        }
    }

    /// A last network: a `TrainingSession` on the joined networks. A last k-NN: an append of the
    /// embedding the models before it compute (`PipelineNearestNeighborsPredictor.vectors`, batched on
    /// the compute units the configuration allows), each example's label its data's.
    static func makeSession(task: UpdateTask, run: ResolvedRun) throws -> any UpdateSession {
        let last = try lastModel(of: run.model)
        guard case var .kNearestNeighbors(knn) = last.spec.body else {
            return try PipelineNetworkSession(training: TrainingSession(task: task, run: run), index: last.index)
        }
        if let k = run.configuration.numberOfNeighbors { try knn.setNumberOfNeighbors(k) }
        // The extractor runs once over the examples; an update searches nothing.
        var configuration = run.configuration
        configuration.job = Scheduler.Job(examples: task.trainingData.count)
        let extractor = try PipelineNearestNeighborsPredictor(pipeline: run.model, configuration: configuration, searches: false,
                                                              batchSize: run.parameters.miniBatchSize, batchSource: "the batch size",
                                                              environment: ProcessInfo.processInfo.environment, warn: { task.warn($0) })
        let source = PipelineEmbeddingSource(extractor: extractor, data: task.trainingData,
                                             labels: (task.trainingData as? KNearestNeighborsExampleSource)
                                                ?? BatchProviderExampleSource(data: task.trainingData, labels: dataLabels(task.trainingData, knn: knn)))
        return try KNearestNeighborsUpdateSession(task: task, run: run, source: source, knn: knn, size: run.model.message.serializedSize,
                                                  device: extractor.deviceName) { model, knn in
            try model.replacingPipelineModel(at: last.index, with: model.pipelineModels()[last.index].replacingKNearestNeighbors(knn))
        }
    }

    /// The labels the data's class indices point into: an image folder's classes, else the k-NN's labels.
    private static func dataLabels(_ data: BatchProvider, knn: KNearestNeighborsSpec) -> ClassLabels {
        if let images = data as? ImageFolderDataset { return .strings(images.classLabels) }
        return knn.distinctClassLabels ?? .strings([])
    }

    /// A last network: the joined networks, trained with the earlier models frozen. A last k-NN: the
    /// joined extractor (forward only), then the search on the host.
    static func plannedNetwork(_ model: CoreMLModel) throws -> (network: CoreMLModel?, note: String?) {
        let last = try lastModel(of: model)
        switch last.spec.body {
        case .neuralNetwork:
            return (try model.pipelineNetwork(through: last.index, trainable: true),
                    last.index == 0 ? nil : "pipeline: the \(last.index == 1 ? "model" : "\(last.index) models") before the last run frozen (the feature cache holds their output); the last trains")
        case let .kNearestNeighbors(knn):
            guard last.index > 0 else { return (nil, KNearestNeighborsModelKind.searchNote(knn)) }
            guard let input = last.spec.description.inputs.first else { return (nil, nil) }
            return (try model.pipelineNetwork(through: last.index - 1, output: input.name),
                    "pipeline: the networks compute '\(input.name)' (forward only), then " + KNearestNeighborsModelKind.searchNote(knn))
        case .pipeline:
            return (nil, "a pipeline inside a pipeline: not planned")
        }
    }

    /// The pipeline's last model (the one an update changes) and its index.
    private static func lastModel(of model: CoreMLModel) throws -> (index: Int, spec: ModelSpec) {
        guard case let .pipeline(p) = model.spec.body, let last = p.models.last else {
            throw UpdraftError(.invalidModel, "the pipeline holds no models", hint: "add the models it runs")
        }
        return (p.models.count - 1, last)
    }

    /// The pipeline's models run as one: a last neural network with the networks before it joined
    /// to it (`CoreMLModel.pipelineNetwork`), a last k-NN behind the joined extractor
    /// (`PipelineNearestNeighborsPredictor`); first, every problem that keeps it from running.
    static func makePredictor(model: CoreMLModel, configuration: UpdateConfiguration, batchSize: Int, batchSource: String,
                              environment: [String: String], warn: @escaping (String) -> Void) throws -> any ModelPredictor {
        try throwFirstError(validate(model, forUpdate: false), doing: "run")
        let last = try lastModel(of: model)
        switch last.spec.body {
        case .kNearestNeighbors:
            return try PipelineNearestNeighborsPredictor(pipeline: model, configuration: configuration, batchSize: batchSize,
                                                         batchSource: batchSource, environment: environment, warn: warn)
        case .neuralNetwork:
            return try NeuralNetworkPredictor(model: model.pipelineNetwork(through: last.index), configuration: configuration,
                                              batchSize: batchSize, batchSource: batchSource, environment: environment, warn: warn)
        case .pipeline:
            throw UpdraftError(.unsupported, "the pipeline's last model is itself a pipeline; Updraft runs pipelines of neural networks and a last k-NN or network",
                               hint: "flatten the inner pipeline into the outer one")
        }
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
