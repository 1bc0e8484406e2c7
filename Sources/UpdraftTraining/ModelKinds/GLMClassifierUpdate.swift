import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftData

extension GLMClassifierModelKind {
    /// A GLM update, past Core ML (which cannot update this model type): SGD with momentum and weight
    /// decay on the log loss of the model's own rule, each class's sigmoid against "this class or not"
    /// (one versus rest) or the second class's (reference class). A GLM's file holds no hyperparameters,
    /// so they come from the run: learning rate 0.1, 10 epochs, mini-batches of 32, shuffled, unless set.
    /// A probit model is refused by name; so are the settings a GLM's update would ignore.
    static func resolve(model: CoreMLModel, configuration: UpdateConfiguration, environment: [String: String]) throws -> ResolvedRun {
        try throwFirstError(validate(model, forUpdate: true), doing: "be updated")
        guard let glm = model.spec.glmClassifier else {
            throw UpdraftError(.invalidModel, "this model is a \(model.spec.modelType.name), not a GLM classifier")
        }
        guard glm.transform == .logit else {
            throw notYet("updating the probit transform of", kind: name)
        }
        if let o = configuration.optimizer, o != .sgd {
            throw UpdraftError(.invalidArgument, "a GLM update trains with SGD; --optimizer \(o) does not apply", hint: "leave out --optimizer")
        }
        try checkSettings(configuration)
        var overrides = configuration.parameters
        for (key, value) in [(ParameterKey.learningRate, ParameterValue.double(0.1)), (.epochs, .int(10)), (.miniBatchSize, .int(32))] {
            overrides[key] = overrides[key] ?? value
        }
        let parameters = try TrainingParameters(optimizer: .sgd, hyperparameters: [], overrides: overrides)
        return ResolvedRun(model: model, graph: nil, parameters: parameters, configuration: configuration, schedule: nil)
    }

    /// Refuses the settings a GLM's update would ignore (when resolving, and again when the session starts).
    static func checkSettings(_ configuration: UpdateConfiguration) throws {
        try refuseNetworkSettings(configuration, update: "a GLM update", of: "a GLM's update", state: "its weights are the whole state, and a cancelled update keeps them",
                                  again: "write the model (UpdateTask.write(to:)) and update it again to go on", pass: "training",
                                  reads: "it reads each example's vector as it is")
    }

    static func makeSession(task: UpdateTask, run: ResolvedRun) throws -> any UpdateSession {
        try GLMClassifierUpdateSession(task: task, run: run)
    }
}

/// A GLM update as an update task drives it: the examples' vectors read once, then epochs of shuffled
/// mini-batches, each a step of SGD (`w -= lr * v`, `v = momentum * v + g + weightDecay * w`) on the mean
/// log loss, in Double on the host; a `miniBatchEnd` event per batch with its loss, an `epochEnd` per
/// epoch with the last batch's loss and the epoch's mean. Cancelling stops after the current batch, keeping the weights so far.
final class GLMClassifierUpdateSession: UpdateSession {
    unowned let task: UpdateTask
    /// The GLM as trained so far.
    private(set) var glm: GLMClassifierSpec
    var parameters: TrainingParameters
    let hyperparameters: [Hyperparameter] = []
    private(set) var lastMetrics: TrainingMetrics?
    var featureCacheStatistics: FeatureCacheStatistics? { nil }
    var profile: TrainingProfile? { nil }
    /// The examples' vectors `[n * D]` and class indices into the model's labels.
    private let vectors: [Double], classes: [Int]

    init(task: UpdateTask, run: ResolvedRun) throws {
        guard let glm = run.model.spec.glmClassifier, let labels = glm.labels else {
            throw UpdraftError(.invalidModel, "this model is a \(run.model.spec.modelType.name), not a GLM classifier with class labels")
        }
        try GLMClassifierModelKind.checkSettings(run.configuration)
        self.task = task
        self.glm = glm
        parameters = run.parameters
        let source = task.trainingData as? KNearestNeighborsExampleSource ?? BatchProviderExampleSource(data: task.trainingData, labels: labels)
        guard source.count > 0 else { throw UpdraftError(.data, "the training data is empty", hint: "give at least one example") }
        let (x, given) = try source.examples(in: 0..<source.count)
        let d = glm.inputDimension
        guard x.count == source.count * d else {
            throw UpdraftError(.data, "the examples' vectors hold \(x.count / source.count) values each, but the GLM classifier takes \(d)",
                               hint: "give vectors of \(d) values (the model's input), e.g. inputs.npy of shape [N, \(d)]")
        }
        vectors = x.data.map(Double.init)
        classes = try given.asStrings.enumerated().map { i, label in
            guard let c = labels.index(of: label) else {
                throw UpdraftError(.data, "example \(i + 1) is labelled '\(label)', which is not one of the GLM classifier's labels (\(labels.asStrings.joined(separator: ", ")))",
                                   hint: "a GLM update learns the model's own classes; label each example with one of them")
            }
            return c
        }
    }

    func train() throws {
        try task.emit(.trainingBegin, metrics: nil)
        let d = glm.inputDimension, count = classes.count, size = parameters.miniBatchSize
        let lr = parameters.learningRate, momentum = parameters.momentum, decay = parameters[.weightDecay]?.doubleValue ?? 0
        var velocity = glm.weights.map { $0.map { _ in 0.0 } }, offsetVelocity = glm.offsets.map { _ in 0.0 }
        var rng = SplitMix64(seed: parameters.seed)
        for epoch in 0..<parameters.epochs {
            let start = Date()
            let order = parameters.shuffle ? Array(0..<count).shuffled(using: &rng) : Array(0..<count)
            var epochLoss = 0.0, batchLoss = Double.nan
            for (b, first) in stride(from: 0, to: count, by: size).enumerated() {
                if task.isCancelRequested { return }
                let batch = order[first..<min(first + size, count)]
                var gradient = glm.weights.map { $0.map { _ in 0.0 } }, offsetGradient = glm.offsets.map { _ in 0.0 }
                var loss = 0.0
                for i in batch {
                    let x = vectors[i * d..<(i + 1) * d]
                    for (k, z) in glm.scores(x).enumerated() {
                        let y = glm.isPositive(class: classes[i], output: k) ? 1.0 : 0.0
                        let p = glm.transformed(z)
                        loss -= y * log(max(p, 1e-12)) + (1 - y) * log(max(1 - p, 1e-12))
                        for (j, v) in x.enumerated() { gradient[k][j] += (p - y) * v }
                        offsetGradient[k] += p - y
                    }
                }
                let n = Double(batch.count)
                for k in glm.weights.indices {
                    for j in 0..<d {
                        velocity[k][j] = momentum * velocity[k][j] + gradient[k][j] / n + decay * glm.weights[k][j]
                        glm.weights[k][j] -= lr * velocity[k][j]
                    }
                    offsetVelocity[k] = momentum * offsetVelocity[k] + offsetGradient[k] / n
                    glm.offsets[k] -= lr * offsetVelocity[k]
                }
                epochLoss += loss
                batchLoss = loss / n
                try emit(.miniBatchEnd, TrainingMetrics(epochIndex: epoch, miniBatchIndex: b, lossValue: batchLoss))
            }
            // As Core ML's: lossValue is the last mini-batch's; the epoch's mean beside it.
            var m = TrainingMetrics(epochIndex: epoch, lossValue: batchLoss)
            m.meanLoss = epochLoss / Double(count)
            m.seconds = Date().timeIntervalSince(start)
            m.examplesPerSecond = Double(count) / max(m.seconds!, 1e-9)
            try emit(.epochEnd, m)
        }
    }

    func makeTensorBoardLog(directory: URL, exampleCount: Int, warn: @escaping (String) -> Void) throws -> (any TensorBoardLog)? {
        try GLMTensorBoardRun(directory: directory, batchesPerEpoch: (classes.count + parameters.miniBatchSize - 1) / parameters.miniBatchSize,
                              onWriteFailure: warn)
    }

    private func emit(_ event: UpdateProgressEvent, _ metrics: TrainingMetrics) throws {
        var m = metrics
        m.device = "cpu"
        lastMetrics = m
        try task.emit(event, metrics: m)
    }

    func currentModel(updating original: CoreMLModel) throws -> CoreMLModel { try original.replacingGLMClassifier(glm) }

    func weights(ofLayer name: String) throws -> (weights: Tensor, bias: Tensor?) {
        throw UpdraftError(.invalidArgument, "a GLM classifier has no layers; '\(name)' names none",
                           hint: "read the weights from the model (CoreMLModel.spec.glmClassifier)")
    }

    func checkpoint() throws -> TrainingCheckpoint {
        throw UpdraftError(.unsupported, "a GLM update keeps no resume state: its weights are the whole state",
                           hint: "write the model (UpdateTask.write(to:)) and update it again to go on")
    }

    func end(into model: CoreMLModel, keepResumePoint: Bool) -> EndedRun {
        EndedRun(model: Result { try model.replacingGLMClassifier(glm) }, cacheStatistics: nil,
                 devices: TrainingDevices.Record(description: "cpu", replicaCount: 1, fallbackCount: 0, snapshotCount: 0, replayedSteps: 0, workspaceBatchSizes: []),
                 resumePoint: nil)
    }
}

/// What a GLM update logs for TensorBoard, with a network run's tags and steps (mini-batch `b` of
/// epoch `e` is step `e * batchesPerEpoch + b + 1`): `batch/loss` each mini-batch; `train/loss` (the
/// epoch's mean), `learning_rate` and `images_per_second` each epoch, when the file is synced.
private final class GLMTensorBoardRun: TensorBoardLog {
    let writer: TensorBoardWriter
    let batchesPerEpoch: Int

    init(directory: URL, batchesPerEpoch: Int, onWriteFailure: @escaping (String) -> Void) throws {
        writer = try TensorBoardWriter(directory: directory)
        writer.onWriteFailure = onWriteFailure
        self.batchesPerEpoch = max(1, batchesPerEpoch)
    }

    func record(_ event: UpdateProgressEvent, metrics: TrainingMetrics?, parameters: TrainingParameters, resumedFrom: TrainingPosition?) {
        guard let m = metrics else { return }
        let step = Int64(m.epochIndex * batchesPerEpoch + (m.miniBatchIndex ?? batchesPerEpoch - 1) + 1)
        var values: [ProtoMessage] = []
        switch event {
        case .miniBatchEnd: values = [TensorBoardEvent.scalar("batch/loss", m.lossValue)]
        case .epochEnd:
            values = [TensorBoardEvent.scalar("train/loss", m.meanLoss ?? m.lossValue), TensorBoardEvent.scalar("learning_rate", parameters.learningRate)]
            if let rate = m.examplesPerSecond { values.append(TensorBoardEvent.scalar("images_per_second", rate)) }
        default: return
        }
        writer.write(record: TensorBoardEvent.summary(wallTime: Date().timeIntervalSince1970, step: step, values))
        if event == .epochEnd { writer.flush() }
    }

    func end(_ state: UpdateTaskState) { writer.flush() }
}
