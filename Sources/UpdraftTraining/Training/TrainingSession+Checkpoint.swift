import Foundation
import UpdraftCore
import UpdraftData

/// Checkpoints of a running session: the state to resume from, captured between mini-batches.
extension TrainingSession {
    /// The run as it stands now (between mini-batches): trained tensors with their optimizer
    /// state, position, parameters in force, settings, history, and what the run belongs to.
    func checkpoint() throws -> TrainingCheckpoint {
        let config = configuration
        let identity = try self.identity()
        return TrainingCheckpoint(
            modelFingerprint: identity.model, data: identity.data, optimizer: parameters.optimizer, parameters: parameters,
            shortLastBatch: config.data.shortLastBatch, augmentation: config.data.augmentation,
            frozenActivationsHalfPrecision: config.frozenActivationsHalfPrecision, checkpointEvery: config.checkpoints.everyEpochs,
            checkpointEveryMiniBatches: config.checkpoints.everyMiniBatches, dataParallelShares: config.placement.dataParallel?.shares,
            device: devices.description, position: position, history: task.history.epochs, state: try executor.captureState())
    }

    /// The model's and the data's fingerprints, computed at the first checkpoint (a resumed run
    /// takes its checkpoint's: they were checked when it started).
    private func identity() throws -> (model: UInt64, data: DataFingerprint) {
        if let known = fingerprints { return known }
        let computed = try configuration.checkpoints.resumeFrom.map { ($0.modelFingerprint, $0.data) }
            ?? (TrainingCheckpoint.fingerprint(of: task.originalModel), DataFingerprint(of: task.trainingData))
        fingerprints = computed
        return computed
    }

    /// Writes the model, its history and its resume state to the configuration's checkpoint URL
    /// (with several MPI ranks, rank 0 alone writes).
    func writeCheckpoint() throws {
        guard let url = configuration.checkpoints.url, configuration.distributed?.isPrimary ?? true else { return }
        // A checkpoint that cannot be written (a full disk) costs the checkpoint, not the run.
        do { try task.writeCheckpoint(to: url) } catch {
            task.warn("cannot write the checkpoint (\(position)) to \(url.path) (\(firstLine(of: error))); training goes on")
        }
    }
}
