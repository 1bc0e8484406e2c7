import UpdraftCore
import UpdraftModel
import UpdraftData

/// Training that diverges (a learning rate far too high, data with NaN in it) produces a NaN or
/// infinite loss, then NaN weights; left alone it trains on, and writes NaN models and checkpoints.
/// Updraft looks at every mini-batch's loss before its update is applied (the loss is read back
/// before the optimizer step anyway), and at the trained weights at the end of every epoch, and
/// keeps the last state known to be finite so that a stop never leaves NaN weights behind.
/// What training does when a mini-batch's loss is NaN or infinite.
public enum NonFinitePolicy: Equatable, Sendable {
    /// Stop with `UpdraftError` (kind `.data`) naming the epoch and mini-batch; the model keeps the
    /// state of the last step whose loss and weights were finite.
    case stop
    /// Skip the mini-batch (no update), with one warning per skipped batch, and go on. Weights that
    /// became non-finite still stop training.
    case skipBatch
}

/// A mini-batch whose loss was not finite; its update was not applied.
struct NonFiniteLoss: Error {
    var loss: Double
}

extension ExecutorState {
    /// The first non-finite parameter, as (tensor name, index, value), or nil when all are finite.
    /// The optimizer state is checked too: a NaN moment turns the next update into NaN.
    var firstNonFinite: (name: String, index: Int, value: Float)? {
        for t in tensors {
            for values in [t.values] + t.state {
                if let i = values.firstIndex(where: { !$0.isFinite }) { return (t.name, i, values[i]) }
            }
        }
        return nil
    }
}

/// The last state of the trained tensors known to be finite, and the way back to it.
final class FiniteStateKeeper {
    /// Where the run stood when the last finite state was read: what a resume from it needs besides the state.
    struct Point {
        var state: ExecutorState
        var position: TrainingPosition
        /// The parameters in force then (a handler may have changed them since).
        var parameters: TrainingParameters
        /// How many epochs the run's history held then.
        var epochsInHistory: Int
    }
    private(set) var lastFinite: Point?
    /// Set when the guard stopped training: the run can resume from `lastFinite`.
    var stopped = false

    /// Reads the state of `devices`' primary replica; when it is finite it becomes the last finite
    /// state (with where the run stands, `at`) and nil is returned, else the first non-finite value
    /// is (and the state is not kept).
    func check(_ devices: TrainingDevices, at position: TrainingPosition, parameters: TrainingParameters,
               epochsInHistory: Int) throws -> (name: String, index: Int, value: Float)? {
        try devices.primary.tailBackend.synchronize()
        let state = try devices.primary.captureState()
        if let bad = state.firstNonFinite { return bad }
        lastFinite = Point(state: state, position: position, parameters: parameters, epochsInHistory: epochsInHistory)
        return nil
    }

    /// Puts every replica back to the last finite state (nothing to do without one: the executors
    /// then still hold the state they started with, which the caller checked).
    func restore(_ devices: TrainingDevices) throws {
        guard let lastFinite else { return }
        for r in devices.replicas { try r.restoreState(lastFinite.state) }
    }
}

extension TrainingSession {
    /// The error that stops training at `position` because the loss was `loss`.
    func nonFiniteLossError(_ loss: Double, position: String) -> UpdraftError {
        UpdraftError(.data,
            "training stopped at \(position): the loss is \(loss), not a finite number; the model keeps the weights of the last finite step",
            hint: "lower the learning rate (now \(formatHyperparameter(parameters.learningRate))), check the data for NaN or huge values, "
                + "or skip such mini-batches (--skip-nonfinite; UpdateConfiguration.nonFinite = .skipBatch)")
    }

    /// The error that stops training because a trained value became `value`.
    func nonFiniteWeightsError(_ bad: (name: String, index: Int, value: Float), position: String, restored: Bool) -> UpdraftError {
        UpdraftError(.data,
            "training stopped at \(position): \(bad.name) holds \(bad.value) at index \(bad.index), not a finite number; "
                + (restored ? "the model keeps the weights of the last epoch whose weights were all finite"
                            : "the model keeps the weights it started with"),
            hint: "lower the learning rate (now \(formatHyperparameter(parameters.learningRate))) or check the data for NaN or huge values")
    }
}

extension TrainingSession {
    /// Reads the primary replica's state and keeps it as the last finite one (with the position,
    /// parameters and history length of now) when it is finite; returns the first non-finite value otherwise.
    private func checkFinite() throws -> (name: String, index: Int, value: Float)? {
        try finiteState.check(devices, at: position, parameters: parameters, epochsInHistory: task.history.epochs.count)
    }

    /// Before the first step: the weights training starts from must be finite.
    func checkInitialWeights() throws {
        if let bad = try checkFinite() {
            throw UpdraftError(.invalidModel, "\(bad.name) holds \(bad.value) at index \(bad.index) before training starts",
                               hint: "the model's weights must be finite numbers (see `updraft inspect`)")
        }
    }

    /// A mini-batch's loss was not finite (its update was not applied): stop, or skip it by policy.
    /// Weights that went bad in the steps before go back to the last finite state, and stop training.
    /// A stop keeps a resume point at the last finite step (`finiteResumePoint`).
    func handleNonFiniteLoss(_ loss: Double, position: String) throws {
        if let bad = try checkFinite() {
            try finiteState.restore(devices)
            finiteState.stopped = true
            throw nonFiniteWeightsError(bad, position: position, restored: true)
        }
        switch task.configuration.nonFinite {
        case .stop:
            finiteState.stopped = true
            throw nonFiniteLossError(loss, position: position)
        case .skipBatch: task.warn("\(position): the loss is \(loss), not a finite number; skipping the mini-batch (no update)")
        }
    }

    /// At the end of an epoch: the trained weights must be finite (else back to the last finite state, and stop).
    func checkWeights(position: String) throws {
        if let bad = try checkFinite() {
            try finiteState.restore(devices)
            finiteState.stopped = true
            throw nonFiniteWeightsError(bad, position: position, restored: true)
        }
    }

    /// After the guard stopped training: the checkpoint of the last finite step — its weights and
    /// optimizer state, position, parameters and history — so that a resumed run (with the data
    /// fixed or a lower learning rate) continues from that step exactly. Nil when the guard did not stop the run.
    func finiteResumePoint() throws -> TrainingCheckpoint? {
        guard finiteState.stopped, let point = finiteState.lastFinite else { return nil }
        var checkpoint = try self.checkpoint()
        checkpoint.state = point.state
        checkpoint.position = point.position
        checkpoint.parameters = point.parameters
        checkpoint.history = Array(checkpoint.history.prefix(point.epochsInHistory))
        return checkpoint
    }
}
