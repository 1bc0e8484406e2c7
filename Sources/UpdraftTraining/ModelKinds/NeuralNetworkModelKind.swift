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
        if configuration.numberOfNeighbors != nil || configuration.unknownDistance != nil {
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
