import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftChecks
import UpdraftData

/// One kind of Core ML model Updraft can update. Core ML updates three: neural networks,
/// k-nearest-neighbours classifiers and pipelines. A kind says how a model of it is checked,
/// described, resolved into a run, trained and run forward; `UpdateTask` and the command line's
/// `train`, `inspect`, `evaluate`, `predict` and validation ask the model's kind
/// (`ModelKinds.kind(of:)`) instead of assuming a network, so a new kind is one conforming type
/// and a row in `ModelKinds.all`, with no `if` on the model type elsewhere. The kinds: `NeuralNetworkModelKind`, `KNearestNeighborsModelKind`, `PipelineModelKind`.
///
/// Reading stays in the model tier: `ModelSpec` decodes the Model oneof cases (CoreMLTypes.swift
/// names them all) and refuses the ones no kind reads yet.
protocol UpdatableModelKind: Sendable {
    /// What the kind is called in messages ("neural network").
    static var name: String { get }
    /// The Model oneof cases a model of this kind is stored as.
    static var modelTypes: [CoreMLModelType] { get }
    /// Every problem that keeps `model` from being updated (`forUpdate`) or run, all at once.
    static func validate(_ model: CoreMLModel, forUpdate: Bool) -> [ModelFinding]
    /// What `updraft inspect` shows of `model`.
    static func report(_ model: CoreMLModel, file: String?) -> ModelReport
    /// A run of `configuration` on `model`, resolved once: hyperparameters, resume point, devices.
    static func resolve(model: CoreMLModel, configuration: UpdateConfiguration,
                        environment: [String: String]) throws -> ResolvedRun
    /// The session that carries out a task's run (allocating what it runs on).
    static func makeSession(task: UpdateTask, run: ResolvedRun) throws -> any UpdateSession
    /// Forward work on `model` (evaluation, prediction) within `configuration`'s compute units and
    /// device, for passes of `batchSize` examples (`batchSource` names what set it, for errors).
    static func makePredictor(model: CoreMLModel, configuration: UpdateConfiguration, batchSize: Int, batchSource: String,
                              environment: [String: String], warn: @escaping (String) -> Void) throws -> any ModelPredictor
    /// The network `updraft plan` places for `model` (nil: none runs on a device), and what else
    /// the model's work is, in a line for people.
    static func plannedNetwork(_ model: CoreMLModel) throws -> (network: CoreMLModel?, note: String?)
}

/// What an `UpdateTask` drives while its run goes on, whatever the model kind.
protocol UpdateSession: AnyObject {
    /// The hyperparameters in force (a progress handler may change them between mini-batches).
    var parameters: TrainingParameters { get set }
    /// The model's hyperparameter descriptions: which values a change may take.
    var hyperparameters: [Hyperparameter] { get }
    /// The last event's metrics.
    var lastMetrics: TrainingMetrics? { get }
    /// The feature cache's counters, when the run keeps one.
    var featureCacheStatistics: FeatureCacheStatistics? { get }
    /// Where the training steps' time went so far, when the run is profiled.
    var profile: TrainingProfile? { get }
    /// Seconds spent making the devices ready before the first step (`Executor.prepare(batch:)`); nil
    /// where nothing is prepared.
    var preparationSeconds: Double? { get }
    /// Runs the update to its end (or until the task is cancelled).
    func train() throws
    /// A TensorBoard log of this run in a new event file in `directory` (of `exampleCount` examples),
    /// `warn` told of writes that fail; nil where the kind logs nothing.
    func makeTensorBoardLog(directory: URL, exampleCount: Int, warn: @escaping (String) -> Void) throws -> (any TensorBoardLog)?
    /// `original` with what the run has learnt so far.
    func currentModel(updating original: CoreMLModel) throws -> CoreMLModel
    /// A layer's current weights and bias, read from the device.
    func weights(ofLayer name: String) throws -> (weights: Tensor, bias: Tensor?)
    /// The state to resume this run from, exactly.
    func checkpoint() throws -> TrainingCheckpoint
    /// Releases what the run holds, keeping its results.
    func end(into model: CoreMLModel, keepResumePoint: Bool) -> EndedRun
}

extension UpdateSession {
    var preparationSeconds: Double? { nil }
    func makeTensorBoardLog(directory: URL, exampleCount: Int, warn: @escaping (String) -> Void) throws -> (any TensorBoardLog)? { nil }
}

/// The finding type a kind's validation returns.
typealias ModelFinding = ValidationFinding

/// The model kinds Updraft updates, and which kind a model is.
public enum ModelKinds {
    /// Every kind, in the order their model types are matched.
    static let all: [any UpdatableModelKind.Type] = [NeuralNetworkModelKind.self, KNearestNeighborsModelKind.self, PipelineModelKind.self,
                                                    GLMClassifierModelKind.self]

    /// The kind that updates models stored as `type`; nil when Updraft has none.
    static func kind(for type: CoreMLModelType) -> (any UpdatableModelKind.Type)? {
        all.first { $0.modelTypes.contains(type) }
    }

    /// The kind of `model`. A model Updraft could read has one: the reader refuses other types.
    static func kind(of model: CoreMLModel) -> any UpdatableModelKind.Type {
        kind(for: model.spec.modelType) ?? NeuralNetworkModelKind.self
    }

    /// The names of the Model types some kind reads, for messages ("neuralNetwork, …").
    public static var modelTypeNames: [String] { all.flatMap { $0.modelTypes.map(\.name) } }

    /// Every problem that keeps `model` from being updated or run, all at once, as its kind checks it.
    public static func validate(_ model: CoreMLModel) -> [ValidationFinding] { kind(of: model).validate(model, forUpdate: true) }

    /// Every problem that keeps `model` from being run, and from being updated when `forUpdate`.
    public static func validate(_ model: CoreMLModel, forUpdate: Bool) -> [ValidationFinding] { kind(of: model).validate(model, forUpdate: forUpdate) }

    /// What `updraft inspect` shows of `model` (`file`: the path it was read from, for the header).
    public static func report(_ model: CoreMLModel, file: String? = nil) -> ModelReport { kind(of: model).report(model, file: file) }

    /// Resolves a run of `configuration` on `model` through its kind (`ResolvedRun.resolve` for networks).
    public static func resolve(model: CoreMLModel, configuration: UpdateConfiguration,
                               environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ResolvedRun {
        try kind(of: model).resolve(model: model, configuration: configuration, environment: environment)
    }

    /// The network `updraft plan` places for `model`, through its kind, and a note on the rest of its work.
    public static func plannedNetwork(_ model: CoreMLModel) throws -> (network: CoreMLModel?, note: String?) {
        try kind(of: model).plannedNetwork(model)
    }

    /// Forward work on `model` through its kind, placed within `configuration`'s compute units and
    /// device (`computeUnits`, `deviceOption`/`preferredDevice`; one device, no data parallelism) for
    /// passes of `batchSize` examples; the scheduler's warnings go to `warn` first, then any fallback's.
    /// - Parameter batchSource: what set `batchSize` ("--batch-size"), named when the model cannot hold it.
    public static func predictor(model: CoreMLModel, configuration: UpdateConfiguration = UpdateConfiguration(),
                                 batchSize: Int, batchSource: String = "the batch size",
                                 environment: [String: String] = ProcessInfo.processInfo.environment,
                                 warn: @escaping (String) -> Void) throws -> any ModelPredictor {
        try kind(of: model).makePredictor(model: model, configuration: configuration, batchSize: batchSize, batchSource: batchSource,
                                          environment: environment, warn: warn)
    }
}
