import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftData

extension KNearestNeighborsModelKind {
    /// A k-NN update: one pass over the data, in its order, in batches of `miniBatchSize` (default
    /// 32); epochs must be 1 (a second pass would store every sample twice); no optimizer settings,
    /// shuffling or seed apply. `--neighbors`
    /// (`numberOfNeighbors`) is checked against the model's allowed values here, before any work.
    static func resolveUpdate(model: CoreMLModel, configuration: UpdateConfiguration) throws -> ResolvedRun {
        guard case let .kNearestNeighbors(knn) = model.spec.body else {
            throw UpdraftError(.invalidModel, "this model is a \(model.spec.modelType.name), not a k-nearest-neighbors classifier")
        }
        if let k = configuration.nearestNeighbors.k { try knn.checkNumberOfNeighbors(k) }
        for key in configuration.parameters.keys where ![.miniBatchSize, .epochs, .shuffle].contains(key) {
            throw UpdraftError(.invalidArgument, "\(key) does not apply to a k-NN update: it stores each example as a sample, with no optimizer",
                               hint: "leave out \(key); --batch-size sets how many examples go per progress step, --neighbors sets k")
        }
        if let s = configuration.parameters[.shuffle], s != .bool(false) {
            throw UpdraftError(.invalidArgument, "a k-NN update appends the examples in the data's order; shuffle = \(s) does not apply",
                               hint: "leave out shuffle (the samples' order only breaks distance ties)")
        }
        if let e = configuration.parameters[.epochs], e.intValue != 1 {
            throw UpdraftError(.invalidArgument, "a k-NN update is one pass over the data; epochs = \(e) would store every example \(e) times",
                               hint: "leave out --epochs (or give 1)")
        }
        try checkSettings(configuration)
        var overrides = configuration.parameters
        overrides[.miniBatchSize] = overrides[.miniBatchSize] ?? .int(32)
        let parameters = try TrainingParameters(optimizer: .sgd, hyperparameters: [], overrides: overrides)
        return ResolvedRun(model: model, graph: nil, parameters: parameters, configuration: configuration, schedule: nil)
    }

    /// Refuses the settings a bare k-NN's update would ignore (checked when resolving, and again when
    /// the session starts, since a resolved run's settings may change before a task is made from it).
    static func checkSettings(_ configuration: UpdateConfiguration) throws {
        try refuseNetworkSettings(configuration, update: "a k-NN update", of: "a bare k-NN's update",
                                  state: "it appends, and a cancelled update keeps what it appended",
                                  again: "update the written model again with the examples left", pass: "the pass",
                                  reads: "it stores each example's vector as it is")
    }
}

/// Refuses, for `update` (a kind with no network: "a k-NN update"), the settings only a network's
/// training has: resume state and checkpoints (`state` says why there are none, `again` what to do),
/// validation during `pass`, and augmentation and half-precision activations (`reads` says why).
func refuseNetworkSettings(_ configuration: UpdateConfiguration, update: String, of owner: String, state: String,
                           again: String, pass: String, reads: String) throws {
    if configuration.checkpoints.resumeFrom != nil || configuration.checkpoints.everyEpochs != nil || configuration.checkpoints.everyMiniBatches != nil {
        throw UpdraftError(.invalidArgument, "\(update) has no resume state or checkpoints: \(state)", hint: again)
    }
    if configuration.data.validationData != nil {
        throw UpdraftError(.invalidArgument, "\(update) does not evaluate during \(pass)",
                           hint: "evaluate the written model (updraft evaluate, ModelKinds.predictor)")
    }
    let a = configuration.data.augmentation
    if !a.isIdentity || a.randomResizedCrop != nil || configuration.frozenActivationsHalfPrecision || configuration.featureCache.halfPrecision {
        throw UpdraftError(.invalidArgument, "augmentation, --frozen-fp16 and --feature-cache-fp16 do not apply to \(owner): \(reads)",
                           hint: "leave them out")
    }
}

/// A k-NN update as an update task drives it: one pass over a `KNearestNeighborsExampleSource`,
/// each batch's vectors appended as samples with their labels (`KNearestNeighborsSpec.append`), a
/// `miniBatchEnd` event per batch and an `epochEnd` at the end. A k-NN has no loss: the events'
/// `lossValue` is NaN. Cancelling stops after the current batch, keeping every sample appended.
final class KNearestNeighborsUpdateSession: UpdateSession {
    unowned let task: UpdateTask
    let source: KNearestNeighborsExampleSource
    /// Examples appended so far in this pass.
    private(set) var appendedCount = 0
    /// The k-NN as appended so far.
    private(set) var knn: KNearestNeighborsSpec
    /// Puts an updated k-NN into the task's model (the bare k-NN's: `replacingKNearestNeighbors`).
    let apply: (CoreMLModel, KNearestNeighborsSpec) throws -> CoreMLModel
    var parameters: TrainingParameters
    let hyperparameters: [Hyperparameter] = []
    private(set) var lastMetrics: TrainingMetrics?
    var featureCacheStatistics: FeatureCacheStatistics? { nil }
    var profile: TrainingProfile? { nil }

    func makeTensorBoardLog(directory: URL, exampleCount: Int, warn: @escaping (String) -> Void) throws -> (any TensorBoardLog)? {
        try TensorBoardAppendRun(directory: directory, session: self, onWriteFailure: warn)
    }
    /// Where the vectors come from, for the metrics' device ("cpu" for a bare k-NN).
    let device: String

    /// - Parameters:
    ///   - knn: the k-NN to append to (with `numberOfNeighbors` already set to any new k).
    ///   - apply: how the appended k-NN goes into the model.
    ///   - size: the model's serialized size before the update, for the 2 GiB check.
    /// - Throws: before any work, when the source's labels are of the other type or the update
    ///   would pass protobuf's 2 GiB limit (saying how many samples still fit).
    init(task: UpdateTask, run: ResolvedRun, source: KNearestNeighborsExampleSource, knn: KNearestNeighborsSpec,
         size: Int, device: String = "cpu", apply: @escaping (CoreMLModel, KNearestNeighborsSpec) throws -> CoreMLModel) throws {
        self.task = task
        self.source = source
        self.knn = knn
        self.apply = apply
        self.device = device
        parameters = run.parameters
        guard source.count > 0 else { throw UpdraftError(.data, "the training data is empty", hint: "give at least one example") }
        let labels = try source.labels(in: 0..<source.count)
        // The type and the room are checked for the whole pass before the first sample is stored.
        try knn.checkLabelType(of: labels)
        try run.model.checkKNearestNeighborsRoom(appending: labels, dimension: Int(knn.dimension), currentSize: size)
    }

    /// A bare k-NN's session: the task's training data as a source (a `KNearestNeighborsExampleSource`
    /// itself, or a `BatchProvider` whose class indices point into the model's labels).
    convenience init(task: UpdateTask, run: ResolvedRun) throws {
        guard case var .kNearestNeighbors(knn) = run.model.spec.body else {
            throw UpdraftError(.invalidModel, "this model is a \(run.model.spec.modelType.name), not a k-nearest-neighbors classifier")
        }
        try KNearestNeighborsModelKind.checkSettings(run.configuration)
        if let k = run.configuration.nearestNeighbors.k { try knn.setNumberOfNeighbors(k) }
        let source = task.trainingData as? KNearestNeighborsExampleSource
            ?? BatchProviderExampleSource(data: task.trainingData, labels: knn.distinctClassLabels ?? .strings([]))
        try self.init(task: task, run: run, source: source, knn: knn, size: run.model.message.serializedSize) { model, knn in
            try model.replacingKNearestNeighbors(knn)
        }
    }

    func train() throws {
        try task.emit(.trainingBegin, metrics: nil)
        let size = parameters.miniBatchSize, count = source.count
        let batches = stride(from: 0, to: count, by: size).map { $0..<min($0 + size, count) }
        let start = Date()
        appendedCount = 0
        for (b, range) in batches.enumerated() {
            if task.isCancelRequested { return }
            let (vectors, labels) = try source.examples(in: range)
            let d = Int(knn.dimension)
            guard vectors.shape.dims.count == 2, vectors.shape.dims[0] == range.count, labels.count == range.count else {
                throw UpdraftError(.data, "examples \(range.lowerBound + 1)-\(range.upperBound) gave vectors \(vectors.shape) and \(labels.count) labels for \(range.count) examples",
                                   hint: "a k-NN example source gives [n, D] vectors and n labels")
            }
            guard vectors.shape.dims[1] == d else {
                throw UpdraftError(.data, "the examples' vectors have dimension \(vectors.shape.dims[1]), but the k-NN's samples have dimension \(d)",
                                   hint: "give vectors of \(d) values (the model's numberOfDimensions), e.g. inputs.npy of shape [N, \(d)]")
            }
            let rows = (0..<range.count).map { Array(vectors.data[$0 * d..<($0 + 1) * d]) }
            try knn.append(samples: rows, labels: labels)
            appendedCount += range.count
            var m = TrainingMetrics(epochIndex: 0, miniBatchIndex: b, lossValue: .nan)
            m.device = device
            lastMetrics = m
            try task.emit(.miniBatchEnd, metrics: m)
        }
        var m = TrainingMetrics(epochIndex: 0, lossValue: .nan)
        m.seconds = Date().timeIntervalSince(start)
        m.examplesPerSecond = Double(appendedCount) / max(m.seconds!, 1e-9)
        m.device = device
        lastMetrics = m
        try task.emit(.epochEnd, metrics: m)
    }

    func currentModel(updating original: CoreMLModel) throws -> CoreMLModel { try apply(original, knn) }

    func weights(ofLayer name: String) throws -> (weights: Tensor, bias: Tensor?) {
        throw UpdraftError(.invalidArgument, "a k-NN has no layers; '\(name)' names none", hint: "read the samples from the model (KNearestNeighborsSpec.samples)")
    }

    func checkpoint() throws -> TrainingCheckpoint {
        throw UpdraftError(.unsupported, "a k-NN update keeps no resume state: a cancelled update keeps what it appended",
                           hint: "write the model (UpdateTask.write(to:)) and update it again with the examples left")
    }

    func end(into model: CoreMLModel, keepResumePoint: Bool) -> EndedRun {
        EndedRun(model: Result { try apply(model, knn) }, cacheStatistics: nil, devices: TrainingDevices.Record(description: device, replicaCount: 1, fallbackCount: 0, snapshotCount: 0, replayedSteps: 0, workspaceBatchSizes: []), resumePoint: nil)
    }
}
