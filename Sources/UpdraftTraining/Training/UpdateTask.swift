import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftPlacement
import UpdraftData

/// Core ML's task states (MLTaskState), plus `cancelled`: Updraft calls the completion handler after
/// `cancel()` with the model as trained so far, where Core ML drops the work.
public enum UpdateTaskState: Int, Sendable, CustomStringConvertible {
    /// MLTaskState's states with their raw values (suspended before `resume()`, running, cancelling after `cancel()`, completed, failed), and Updraft's `cancelled` once a cancelled run has stopped.
    case suspended = 1, running = 2, cancelling = 3, completed = 4, failed = 5, cancelled = 6
    /// The state's lower-case name (`"running"`, `"cancelled"`, ...), as printed in logs and by the CLI.
    public var description: String {
        switch self {
        case .suspended: return "suspended"
        case .running: return "running"
        case .cancelling: return "cancelling"
        case .completed: return "completed"
        case .failed: return "failed"
        case .cancelled: return "cancelled"
        }
    }
}

/// Core ML's progress events (MLUpdateProgressEvent).
public struct UpdateProgressEvent: OptionSet, Hashable, Sendable {
    /// The event bits: 1 `trainingBegin`, 2 `epochEnd`, 4 `miniBatchEnd`.
    public let rawValue: Int
    /// Makes a set from its bits (see `rawValue`).
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// Once, before the first mini-batch (no metrics yet).
    public static let trainingBegin = UpdateProgressEvent(rawValue: 1 << 0)
    /// After each epoch, with the epoch's metrics (and validation metrics when `validationData` is set).
    public static let epochEnd = UpdateProgressEvent(rawValue: 1 << 1)
    /// After each mini-batch, with that mini-batch's loss.
    public static let miniBatchEnd = UpdateProgressEvent(rawValue: 1 << 2)
    /// Every event: `trainingBegin`, `epochEnd` and `miniBatchEnd`.
    public static let all: UpdateProgressEvent = [.trainingBegin, .epochEnd, .miniBatchEnd]
}

/// What a handler sees (MLUpdateContext).
public struct UpdateContext: Sendable {
    /// The task that sent the event; call `resume(withParameters:)` or `cancel()` on it from a handler.
    public let task: UpdateTask
    /// Which event this is (one bit of `UpdateProgressEvent`; empty in the final context from `wait()`/`run()` and completion).
    public let event: UpdateProgressEvent
    /// The metrics at this event (loss, epoch, mini-batch index); nil at `trainingBegin` and when none were computed.
    public let metrics: TrainingMetrics?
    /// The parameter values in force now.
    public let parameters: TrainingParameters
    /// Set when the task failed.
    public let error: Error?

    /// The model with the weights trained so far (reads them back from the device).
    public func model() throws -> CoreMLModel { try task.currentModel() }
    /// A layer's current weights and bias (MLParameterKey.weights/biases scoped to a layer).
    public func weights(ofLayer name: String) throws -> (weights: Tensor, bias: Tensor?) { try task.weights(ofLayer: name) }
}

/// Handlers for progress events and completion (MLUpdateProgressHandlers). Handlers run on the
/// training thread; training waits while they run. They are `@Sendable`: in a Swift 6 program a
/// closure written in main-actor code (top-level code, a view model) is not main-actor isolated
/// once it is `@Sendable`, so the training thread can call it; to touch main-actor state from a
/// handler, hop there (`Task { @MainActor in ... }`) or iterate `task.events` instead.
public struct UpdateHandlers: Sendable {
    /// Which events call `progress` (MLUpdateProgressHandlers.interestedEvents); default `.all`.
    public var events: UpdateProgressEvent
    /// Called on the training thread for each event in `events`; training waits until it returns.
    public var progress: (@Sendable (UpdateContext) -> Void)?
    /// Called once when the task completes, fails or is cancelled, with the final metrics, parameters and any error.
    public var completion: (@Sendable (UpdateContext) -> Void)?
    /// Called with each one-line warning (a device that failed and the fallback taken) as it
    /// happens, on the training thread. `UpdateTask.warnings` keeps them all.
    public var warning: (@Sendable (String) -> Void)?
    /// Handlers for every event in `events`; each closure is optional (nil: not called).
    public init(events: UpdateProgressEvent = .all, progress: (@Sendable (UpdateContext) -> Void)? = nil,
                completion: (@Sendable (UpdateContext) -> Void)? = nil, warning: (@Sendable (String) -> Void)? = nil) {
        self.events = events; self.progress = progress; self.completion = completion; self.warning = warning
    }
}

/// Trains a Core ML updatable model, like MLUpdateTask: made from a model, training data, a
/// configuration and handlers; `resume()` starts training on a background thread; handlers see
/// every event; `resume(withParameters:)` from a handler changes optimizer settings for the rest of
/// training; `cancel()` stops after the current mini-batch and — past Core ML — still calls the
/// completion handler with the model as trained so far.
///
/// A task is shared between the caller's thread, the training thread and handlers: its mutable
/// state is guarded by `lock`, except the session, which only the training thread drives (the
/// caller reaches it through lock-guarded requests such as `cancel()` and `resume(withParameters:)`).
public final class UpdateTask: @unchecked Sendable {
    /// The model the task was made from; training never changes it (see `currentModel()`).
    public let originalModel: CoreMLModel
    /// The examples training reads, in mini-batches (MLUpdateTask's `trainingData`).
    public let trainingData: BatchProvider
    /// The configuration the task was made with (before any `resumeFrom` checks); for a task made
    /// from a `ResolvedRun`, the run's, with its backends.
    public let configuration: UpdateConfiguration
    let handlers: UpdateHandlers
    /// The run as resolved before the task was made (`init(run:...)`); nil: the task resolves its
    /// configuration when it starts.
    let resolved: ResolvedRun?

    let lock = NSLock()
    private var _state: UpdateTaskState = .suspended
    private var cancelRequested = false
    private var started = false
    private let done = DispatchSemaphore(value: 0)
    /// How the task ended (the final context without the task: a context holds its task, and the
    /// task holding it would keep both alive for ever).
    var outcome: (metrics: TrainingMetrics?, parameters: TrainingParameters, error: Error?)?
    /// The training run while it runs. Ownership is one way: the task owns the session, which owns
    /// its executors (buffers, workspaces), the feature cache and the fallbacks; the session refers
    /// back to the task unowned. When the task ends, `finish` keeps the results (the trained model,
    /// statistics, a resume point) and drops the session, releasing everything it allocated, host
    /// and device, even while the task itself is still referenced.
    var updateSession: (any UpdateSession)?
    /// The network training session while it runs (nil for another kind's run, and when none runs).
    var session: TrainingSession? { updateSession as? TrainingSession }
    /// What the ended run left behind once its session was released.
    private(set) var ended: EndedRun?
    /// Optimizer changes requested from a handler, applied before the next mini-batch: the
    /// parameters they make, checked when requested during training; the bare values when
    /// requested before it started (checked when applied).
    private var pendingParameters: (values: [ParameterKey: ParameterValue], checked: TrainingParameters?)?

    /// Per-epoch metrics of this run (with a resumed checkpoint's epochs first), written beside the model by `write(to:)`.
    public private(set) var history = TrainingHistory(model: "", parameters: [:])
    /// Subscribers of `events`, each finished when the task ends (guarded by `lock`).
    var eventObservers: [AsyncThrowingStream<UpdateEvent, Error>.Continuation] = []
    /// The current epoch's mini-batch losses, moved into the history at its end.
    private var epochBatchLosses: [Double] = []
    private var _warnings: [String] = []
    /// The TensorBoard log while a network run with `tensorboardDirectory` trains (rank 0 only).
    private var tensorboard: (any TensorBoardLog)?

    /// One line per device that failed during training, naming the reason and where training went
    /// on (also passed to `UpdateHandlers.warning` as they happen).
    public var warnings: [String] {
        lock.lock(); defer { lock.unlock() }
        return _warnings
    }

    func warn(_ message: String) {
        lock.lock(); _warnings.append(message); lock.unlock()
        handlers.warning?(message)
    }

    /// What the feature cache holds (nil when it is off, or before training starts).
    public var featureCacheStatistics: FeatureCacheStatistics? { updateSession?.featureCacheStatistics ?? ended?.cacheStatistics }
    /// Where the training steps' time went so far, per layer and pass, when `UpdateConfiguration.reporting.profile`
    /// is on (nil otherwise). Set its `sgemmGFLOPS` to a measured SGEMM rate to see each row's share of it.
    public var profile: TrainingProfile? { updateSession?.profile ?? ended?.profile }
    /// Seconds spent before the first step making the devices ready for the run's layers and batch
    /// sizes (`Executor.prepare(batch:)`: e.g. the CPU's oneDNN primitives), outside every epoch's
    /// time; nil before training starts, and for a run that prepares nothing (a k-NN update).
    public var preparationSeconds: Double? { updateSession?.preparationSeconds ?? ended?.preparationSeconds }

    /// Where the task is now (MLUpdateTask.state); `.suspended` before `resume()` and while a handler runs.
    public var state: UpdateTaskState {
        lock.lock(); defer { lock.unlock() }
        return _state
    }
    func setState(_ s: UpdateTaskState) { lock.lock(); _state = s; lock.unlock() }

    /// A task that trains `model` on `trainingData`; nothing runs until `resume()` or `run()`.
    /// Its configuration is resolved (`ResolvedRun.resolve`) when training starts; what that
    /// cannot resolve fails the task.
    public init(model: CoreMLModel, trainingData: BatchProvider, configuration: UpdateConfiguration = UpdateConfiguration(),
                handlers: UpdateHandlers = UpdateHandlers()) {
        self.originalModel = model
        self.trainingData = trainingData
        self.configuration = configuration
        self.handlers = handlers
        self.resolved = nil
    }

    /// A task that trains `run` as it was resolved (its parameters, resume point and devices,
    /// neither checked nor scheduled again) on `trainingData`; nothing runs until `resume()` or `run()`.
    /// A run's backends serve one task at a time.
    public init(run: ResolvedRun, trainingData: BatchProvider, handlers: UpdateHandlers = UpdateHandlers()) {
        self.originalModel = run.model
        self.trainingData = trainingData
        self.configuration = run.configuration
        self.handlers = handlers
        self.resolved = run
    }

    /// As `init(model:trainingData:configuration:handlers:)`, reading the model from a `.mlmodel` file first. Throws when it cannot be read or parsed.
    public convenience init(modelAt url: URL, trainingData: BatchProvider,
                            configuration: UpdateConfiguration = UpdateConfiguration(),
                            handlers: UpdateHandlers = UpdateHandlers()) throws {
        self.init(model: try CoreMLModel(contentsOf: url), trainingData: trainingData,
                  configuration: configuration, handlers: handlers)
    }

    /// Continues the run whose checkpoint model is at `checkpoint` (its state is the `.resume` file
    /// beside it): the configuration's augmentation, short-last-batch and half-precision-prefix settings are the checkpoint's,
    /// and so are its checkpoint schedule and URL unless the configuration sets its own. Handlers see
    /// `trainingBegin` again, then the events of the mini-batches left.
    public convenience init(resumingFrom checkpoint: URL, trainingData: BatchProvider,
                            configuration: UpdateConfiguration = UpdateConfiguration(),
                            handlers: UpdateHandlers = UpdateHandlers()) throws {
        let state = try TrainingCheckpoint.read(forModel: checkpoint)
        var config = configuration
        let ownSchedule = config.checkpoints.everyEpochs != nil || config.checkpoints.everyMiniBatches != nil
        config.resume(from: state, keeping: ownSchedule ? [.checkpointSchedule] : [])
        if config.checkpoints.url == nil { config.checkpoints.url = checkpoint }
        self.init(model: try CoreMLModel(contentsOf: checkpoint), trainingData: trainingData, configuration: config, handlers: handlers)
    }

    /// Starts training on a background thread and returns at once. Called from a handler (or again
    /// after starting) it does nothing: training continues when the handler returns.
    public func resume() {
        lock.lock()
        if started { lock.unlock(); return }
        started = true
        _state = .running
        lock.unlock()
        let thread = Thread { [self] in run() }
        thread.stackSize = 8 << 20
        thread.start()
    }

    /// From inside a handler: continue with new optimizer settings (learning rate, momentum, betas,
    /// eps, weight decay). Mini-batch size, epochs, shuffle and seed are fixed once training starts;
    /// changing them throws. Values are checked against the model's allowed values.
    public func resume(withParameters parameters: [ParameterKey: ParameterValue]) throws {
        let current = updateSession?.parameters
        for (key, value) in parameters where !key.isOptimizerSetting {
            if let current, let now = current[key], (try? TrainingParameters.normalize(key, value)) == now { continue }
            throw UpdraftError(.invalidArgument, "\(key) cannot change once training has started",
                               hint: "only optimizer settings (learningRate, momentum, beta1, beta2, eps, weightDecay) can change in resume(withParameters:)")
        }
        var checked: TrainingParameters? = nil
        if var p = current {
            for (k, v) in parameters { try p.set(k, v, descriptions: updateSession!.hyperparameters) }
            checked = p
        }
        lock.lock(); pendingParameters = (parameters, checked); lock.unlock()
        resume()
    }

    /// Stops after the current mini-batch; the completion handler then gets the model trained so far.
    public func cancel() {
        lock.lock()
        cancelRequested = true
        if _state == .running || _state == .suspended { _state = .cancelling }
        let notStarted = !started
        started = true
        lock.unlock()
        if notStarted { finish(.cancelled, error: nil, metrics: nil) }
    }

    var isCancelRequested: Bool { lock.lock(); defer { lock.unlock() }; return cancelRequested }

    /// Blocks until the task has completed, failed or been cancelled, and returns the final context.
    @discardableResult
    public func wait() -> UpdateContext {
        done.wait()
        done.signal()
        return finalContext
    }

    private var finalContext: UpdateContext {
        lock.lock(); let o = outcome!; lock.unlock()
        return UpdateContext(task: self, event: [], metrics: o.metrics, parameters: o.parameters, error: o.error)
    }

    /// Runs training on the calling thread (resume() + wait() without the extra thread).
    @discardableResult
    public func run() -> UpdateContext {
        lock.lock(); started = true; if _state == .suspended { _state = .running }; lock.unlock()
        do {
            let run = try resolved ?? resolve()
            let session = try ModelKinds.kind(of: originalModel).makeSession(task: self, run: run)
            self.updateSession = session
            history = TrainingHistory(model: "", parameters: session.parameters.values.reduce(into: [:]) { $0[$1.key.rawValue] = "\($1.value)" })
            if let resumed = configuration.checkpoints.resumeFrom {
                history.epochs = resumed.history
                epochBatchLosses = resumed.position.batchLosses
            }
            if let directory = configuration.reporting.tensorboardDirectory, configuration.distributed?.isPrimary ?? true {
                // The session's kind says what its log is (a network's run, a pipeline's last network's, a k-NN's append).
                tensorboard = try session.makeTensorBoardLog(directory: directory, exampleCount: trainingData.count) { [unowned self] in warn($0) }
            }
            try session.train()
            finish(isCancelRequested ? .cancelled : .completed, error: nil, metrics: session.lastMetrics)
        } catch {
            finish(isCancelRequested ? .cancelled : .failed, error: error, metrics: updateSession?.lastMetrics)
        }
        return finalContext
    }

    /// The task's configuration resolved as it starts, with the scheduler's warnings passed on.
    private func resolve() throws -> ResolvedRun {
        var configuration = configuration
        if configuration.placement.job == nil { configuration.placement.job = Scheduler.Job(examples: trainingData.count) }
        let run = try ModelKinds.resolve(model: originalModel, configuration: configuration, environment: configuration.environment.variables)
        run.warnings.forEach { warn($0) }
        return run
    }

    private func finish(_ state: UpdateTaskState, error: Error?, metrics: TrainingMetrics?) {
        let params = updateSession?.parameters ?? (try? TrainingParameters(optimizer: .sgd, hyperparameters: []))!
        if let session = updateSession {
            ended = session.end(into: originalModel, keepResumePoint: state == .cancelled)
            self.updateSession = nil
        }
        tensorboard?.end(state)
        tensorboard = nil
        lock.lock(); outcome = (metrics, params, error); lock.unlock()
        setState(state)
        handlers.completion?(finalContext)
        finishEventObservers(error: state == .failed ? error : nil)
        done.signal()
    }

    /// Calls the progress handler for `event` (if wanted), with the task suspended meanwhile, then
    /// applies any parameters the handler passed to resume(withParameters:).
    func emit(_ event: UpdateProgressEvent, metrics: TrainingMetrics?) throws {
        if event == .miniBatchEnd, let metrics { epochBatchLosses.append(metrics.lossValue) }
        if event == .epochEnd, var metrics {
            metrics.miniBatchLosses = epochBatchLosses
            epochBatchLosses = []
            history.epochs.append(metrics)
        }
        if let session = updateSession {
            tensorboard?.record(event, metrics: metrics, parameters: session.parameters, resumedFrom: configuration.checkpoints.resumeFrom?.position)
        }
        if let session = updateSession { yieldToEventObservers(UpdateEvent(event: event, metrics: metrics, parameters: session.parameters)) }
        guard handlers.events.contains(event), let progress = handlers.progress, let session = updateSession else { return }
        // Suspended while the handler runs, unless a cancel came first (it may arrive between the
        // event reaching the `events` observers and this line): the handler then sees `.cancelling`.
        lock.lock()
        if _state == .running { _state = .suspended }
        lock.unlock()
        progress(UpdateContext(task: self, event: event, metrics: metrics, parameters: session.parameters, error: nil))
        lock.lock()
        if _state == .suspended { _state = cancelRequested ? .cancelling : .running }
        let pending = pendingParameters
        pendingParameters = nil
        lock.unlock()
        if let checked = pending?.checked {
            session.parameters = checked
        } else if let pending {
            for (k, v) in pending.values { try session.parameters.set(k, v, descriptions: session.hyperparameters) }
        }
    }

    /// The model with the current weights.
    public func currentModel() throws -> CoreMLModel {
        if let session = updateSession { return try session.currentModel(updating: originalModel) }
        if let ended { return try ended.model.get() }
        return originalModel
    }

    /// A layer's current weights and bias (nil when the layer has none): read from the device while training, else from the final or original model. Throws when the layer has no weights (or no layer has that name).
    public func weights(ofLayer name: String) throws -> (weights: Tensor, bias: Tensor?) {
        if let session = updateSession { return try session.weights(ofLayer: name) }
        let model = try ended?.model.get() ?? originalModel
        return (try model.weights(ofLayer: name), try model.bias(ofLayer: name))
    }

    /// Where an ended run can be resumed from: where a cancelled run stopped, or the last finite step
    /// of a run the non-finite guard stopped (`NonFinitePolicy.stop`: a NaN or infinite loss or weight);
    /// nil while training, after a completed run and after other failures. Give it to
    /// `UpdateConfiguration.resume(from:)` (or write it with `writeCheckpoint(to:)`) to continue the run,
    /// with the data fixed or a lower learning rate (`parameters`), from that step exactly.
    public var resumePoint: TrainingCheckpoint? { updateSession == nil ? ended?.resumePoint : nil }

    /// Writes a checkpoint: the resume state (`TrainingCheckpoint`, as `<model>.resume`), then the
    /// model and its history, each atomically. While training, from a handler or another thread
    /// between mini-batches; after a cancelled run, where it stopped; after a run the non-finite
    /// guard stopped, its last finite step (`resumePoint`).
    public func writeCheckpoint(to url: URL) throws {
        let checkpoint: TrainingCheckpoint
        if let session = updateSession {
            checkpoint = try session.checkpoint()
        } else if let point = ended?.resumePoint {
            checkpoint = point
        } else {
            throw UpdraftError(.invalidArgument, "the task has no run to checkpoint (\(state == .completed ? "it completed" : "it is \(state)"))",
                               hint: "write a checkpoint while the task trains, after it was cancelled, or after the non-finite guard stopped it")
        }
        try checkpoint.write(forModel: url)
        try write(to: url)
    }

    /// Writes the current model atomically, and its training history next to it.
    public func write(to url: URL) throws {
        try currentModel().write(to: url)
        var h = history
        h.model = url.lastPathComponent
        try h.write(to: TrainingHistory.url(forModel: url))
    }
}
