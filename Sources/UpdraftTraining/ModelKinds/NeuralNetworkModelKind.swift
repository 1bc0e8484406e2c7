import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftChecks
import UpdraftData

/// The neural network kind (Model's neuralNetwork, neuralNetworkClassifier and neuralNetworkRegressor):
/// checked by `ModelValidator`, shown by `ModelReport`, resolved by `ResolvedRun.resolve` and trained by a
/// `TrainingSession` (mini-batches, epochs, an optimizer) on the executor.
enum NeuralNetworkModelKind: UpdatableModelKind {
    static let name = "neural network"
    static let modelTypes: [CoreMLModelType] = [.neuralNetwork, .neuralNetworkClassifier, .neuralNetworkRegressor]

    static func validate(_ model: CoreMLModel, forUpdate: Bool) -> [ModelFinding] { ModelValidator.validate(model, forUpdate: forUpdate) }

    static func report(_ model: CoreMLModel, file: String?) -> ModelReport { ModelReport(model: model, file: file) }

    static func resolve(model: CoreMLModel, configuration: UpdateConfiguration,
                        environment: [String: String]) throws -> ResolvedRun {
        try refuseNearestNeighborsSettings(configuration)
        return try ResolvedRun.resolve(model: model, configuration: configuration, environment: environment)
    }

    static func makeSession(task: UpdateTask, run: ResolvedRun) throws -> any UpdateSession {
        try TrainingSession(task: task, run: run)
    }

    static func plannedNetwork(_ model: CoreMLModel) throws -> (network: CoreMLModel?, note: String?) { (model, nil) }

    static func makePredictor(model: CoreMLModel, configuration: UpdateConfiguration, batchSize: Int, batchSource: String,
                              environment: [String: String], warn: @escaping (String) -> Void) throws -> any ModelPredictor {
        try refuseNearestNeighborsSettings(configuration)
        return try NeuralNetworkPredictor(model: model, configuration: configuration, batchSize: batchSize, batchSource: batchSource,
                                   environment: environment, warn: warn)
    }

    /// A network has no k: `numberOfNeighbors` and `unknownDistance` are refused by name, not ignored.
    private static func refuseNearestNeighborsSettings(_ configuration: UpdateConfiguration) throws {
        if configuration.nearestNeighbors.k != nil || configuration.nearestNeighbors.unknownDistance != nil {
            throw UpdraftError(.invalidArgument, "--neighbors and --unknown-distance (numberOfNeighbors, unknownDistance) apply to k-nearest-neighbors classifiers; this model is a neural network",
                               hint: "leave them out for this model")
        }
    }
}

/// A network's training run, as an update task drives it.
extension TrainingSession: UpdateSession {
    var featureCacheStatistics: FeatureCacheStatistics? { cache?.statistics }
    var profile: TrainingProfile? { profiler?.profile() }

    func currentModel(updating original: CoreMLModel) throws -> CoreMLModel { try executor.exportModel(into: original) }

    func weights(ofLayer name: String) throws -> (weights: Tensor, bias: Tensor?) { try executor.weights(ofLayer: name) }

    func makeTensorBoardLog(directory: URL, exampleCount: Int, warn: @escaping (String) -> Void) throws -> (any TensorBoardLog)? {
        try TensorBoardRun(directory: directory, session: self, exampleCount: exampleCount, onWriteFailure: warn)
    }
}

/// A network as a pipeline's last model: trained behind the networks before it, joined into one
/// (`CoreMLModel.pipelineNetwork(through:trainable:)`), so the earlier models are the frozen prefix the
/// feature cache covers; its trained layers go back into the pipeline's last model.
extension NeuralNetworkModelKind: PipelineLastModelKind {
    static func resolveAsLast(pipeline: CoreMLModel, index: Int, configuration: UpdateConfiguration,
                              environment: [String: String]) throws -> ResolvedRun {
        try ResolvedRun.resolve(model: pipeline, network: pipeline.pipelineNetwork(through: index, trainable: true),
                                configuration: configuration, environment: environment)
    }

    static func makeSessionAsLast(task: UpdateTask, run: ResolvedRun, index: Int) throws -> any UpdateSession {
        try PipelineNetworkSession(training: TrainingSession(task: task, run: run), index: index)
    }

    static func plannedNetworkAsLast(pipeline: CoreMLModel, index: Int) throws -> (network: CoreMLModel?, note: String?) {
        (try pipeline.pipelineNetwork(through: index, trainable: true),
         index == 0 ? nil : "pipeline: the \(index == 1 ? "model" : "\(index) models") before the last run frozen (the feature cache holds their output); the last trains")
    }

    static func makePredictorAsLast(pipeline: CoreMLModel, index: Int, configuration: UpdateConfiguration, batchSize: Int,
                                    batchSource: String, environment: [String: String],
                                    warn: @escaping (String) -> Void) throws -> any ModelPredictor {
        try NeuralNetworkPredictor(model: pipeline.pipelineNetwork(through: index), configuration: configuration,
                                   batchSize: batchSize, batchSource: batchSource, environment: environment, warn: warn)
    }
}
