import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftChecks
import UpdraftPlacement
import UpdraftData

/// The k-nearest-neighbors classifier kind (Model field 404): read, written back byte for byte,
/// checked by `KNearestNeighborsValidator`, shown by `updraft inspect`, and run by exact search on
/// the host (`evaluate`, `ModelKinds.predictor`), updated by appending samples
/// (`KNearestNeighborsUpdateSession`, ModelKinds/KNearestNeighborsUpdate.swift).
enum KNearestNeighborsModelKind: UpdatableModelKind {
    static let name = "k-nearest-neighbors classifier"
    static let modelTypes: [CoreMLModelType] = [.kNearestNeighborsClassifier]

    static func validate(_ model: CoreMLModel, forUpdate: Bool) -> [ModelFinding] {
        guard case let .kNearestNeighbors(knn) = model.spec.body else { return [] }
        return KNearestNeighborsValidator.validate(model.spec, knn)
    }

    static func report(_ model: CoreMLModel, file: String?) -> ModelReport { ModelReport(kNearestNeighbors: model, file: file) }

    static func resolve(model: CoreMLModel, configuration: UpdateConfiguration, environment: [String: String]) throws -> ResolvedRun {
        try resolveUpdate(model: model, configuration: configuration)
    }

    static func makeSession(task: UpdateTask, run: ResolvedRun) throws -> any UpdateSession {
        try KNearestNeighborsUpdateSession(task: task, run: run)
    }

    static func plannedNetwork(_ model: CoreMLModel) throws -> (network: CoreMLModel?, note: String?) {
        (nil, model.kNearestNeighbors.map(searchNote))
    }

    /// Where a k-NN's work runs, for `updraft plan`.
    static func searchNote(_ knn: KNearestNeighborsSpec) -> String {
        "k-NN: \(knn.samples.count) samples of dimension \(knn.dimension) (\(knn.index?.description ?? "linear") index), "
            + "searched exactly and appended to on the host CPU; no device plan"
    }

    /// Exact search on the host (`NearestNeighbors`) with the configuration's `numberOfNeighbors`
    /// (else the model's) and `unknownDistance`, once the model passes `KNearestNeighborsValidator`
    /// (else its first error, named).
    static func makePredictor(model: CoreMLModel, configuration: UpdateConfiguration, batchSize: Int, batchSource: String,
                              environment: [String: String], warn: @escaping (String) -> Void) throws -> any ModelPredictor {
        try throwFirstError(validate(model, forUpdate: false), doing: "run")
        let work = model.kNearestNeighbors.flatMap { NearestNeighborsDevice.work($0, queries: configuration.placement.job?.examples) }
        return try NearestNeighborsPredictor(model: model, k: configuration.nearestNeighbors.k, unknownDistance: configuration.nearestNeighbors.unknownDistance,
                                             device: NearestNeighborsDevice.choose(configuration, environment: environment, work: work, warn: warn),
                                             warn: warn)
    }
}

/// Throws the first error among `findings` (saying how many more there are), when there is one.
func throwFirstError(_ findings: [ModelFinding], doing what: String) throws {
    let errors = findings.errors
    guard let first = errors.first else { return }
    throw UpdraftError(.invalidModel, "the model cannot \(what): \(first.message)" + (errors.count > 1 ? " (and \(errors.count - 1) more problems)" : ""),
                       hint: first.hint ?? "`updraft inspect` lists every problem")
}

/// The error for what a kind reads but cannot do yet.
func notYet(_ what: String, kind: String = KNearestNeighborsModelKind.name) -> UpdraftError {
    UpdraftError(.unsupported, "\(what) a \(kind) is not supported yet: Updraft reads, checks and writes such models, and trains neural networks",
                 hint: "`updraft inspect` shows and checks the model")
}

/// A k-NN as a pipeline's last model: an update appends the embedding the models before it compute
/// (`PipelineNearestNeighborsPredictor.vectors`, batched on the compute units the configuration allows),
/// each example's label its data's; a prediction searches behind that extractor.
extension KNearestNeighborsModelKind: PipelineLastModelKind {
    static func resolveAsLast(pipeline: CoreMLModel, index: Int, configuration: UpdateConfiguration,
                              environment: [String: String]) throws -> ResolvedRun {
        // The k-NN's own checks (k, the settings an append takes); the extractor is placed when the session starts.
        let knn = try resolveUpdate(model: pipeline.pipelineModels()[index], configuration: configuration)
        return ResolvedRun(model: pipeline, graph: nil, parameters: knn.parameters, configuration: configuration, schedule: nil)
    }

    static func makeSessionAsLast(task: UpdateTask, run: ResolvedRun, index: Int) throws -> any UpdateSession {
        guard case var .kNearestNeighbors(knn) = try run.model.pipelineModels()[index].spec.body else {
            throw UpdraftError(.invalidModel, "the pipeline's model \(index + 1) is not a k-NN")
        }
        if let k = run.configuration.nearestNeighbors.k { try knn.setNumberOfNeighbors(k) }
        // The extractor runs once over the examples; an update searches nothing.
        var configuration = run.configuration
        configuration.placement.job = Scheduler.Job(examples: task.trainingData.count)
        let extractor = try PipelineNearestNeighborsPredictor(pipeline: run.model, configuration: configuration, searches: false,
                                                              batchSize: run.parameters.miniBatchSize, batchSource: "the batch size",
                                                              environment: ProcessInfo.processInfo.environment, warn: { task.warn($0) })
        let source = PipelineEmbeddingSource(extractor: extractor, data: task.trainingData,
                                             labels: (task.trainingData as? KNearestNeighborsExampleSource)
                                                ?? BatchProviderExampleSource(data: task.trainingData, labels: dataLabels(task.trainingData, knn: knn)))
        return try KNearestNeighborsUpdateSession(task: task, run: run, source: source, knn: knn, size: run.model.message.serializedSize,
                                                  device: extractor.deviceName) { model, knn in
            try model.replacingPipelineModel(at: index, with: model.pipelineModels()[index].replacingKNearestNeighbors(knn))
        }
    }

    /// The labels the data's class indices point into: an image folder's classes, else the k-NN's labels.
    private static func dataLabels(_ data: BatchProvider, knn: KNearestNeighborsSpec) -> ClassLabels {
        if let images = data as? ImageFolderDataset { return .strings(images.classLabels) }
        return knn.distinctClassLabels ?? .strings([])
    }

    static func plannedNetworkAsLast(pipeline: CoreMLModel, index: Int) throws -> (network: CoreMLModel?, note: String?) {
        let last = try pipeline.pipelineModels()[index].spec
        guard case let .kNearestNeighbors(knn) = last.body else { return (nil, nil) }
        guard index > 0 else { return (nil, searchNote(knn)) }
        guard let input = last.description.inputs.first else { return (nil, nil) }
        return (try pipeline.pipelineNetwork(through: index - 1, output: input.name),
                "pipeline: the networks compute '\(input.name)' (forward only), then " + searchNote(knn))
    }

    static func makePredictorAsLast(pipeline: CoreMLModel, index: Int, configuration: UpdateConfiguration, batchSize: Int,
                                    batchSource: String, environment: [String: String],
                                    warn: @escaping (String) -> Void) throws -> any ModelPredictor {
        try PipelineNearestNeighborsPredictor(pipeline: pipeline, configuration: configuration, batchSize: batchSize,
                                              batchSource: batchSource, environment: environment, warn: warn)
    }
}
