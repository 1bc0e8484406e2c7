import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft train --resume CHECKPOINT.mlmodel`: the checkpoint's state, and the run settings the
/// command line leaves out taken from it.
struct ResumeOptions {
    let url: URL
    let checkpoint: TrainingCheckpoint

    init(_ path: String) throws {
        url = URL(fileURLWithPath: path)
        checkpoint = try TrainingCheckpoint.read(forModel: url)
    }

    /// The configuration of the run being resumed: the checkpoint's augmentation (unless --augment
    /// says otherwise, which the task then refuses), short last batch, checkpoint schedule, and the
    /// data-parallel shares for the same number of replicas.
    func apply(to config: inout UpdateConfiguration, augmentGiven: Bool, shortLastBatchGiven: Bool, frozenHalfGiven: Bool,
               scheduleGiven: Bool) {
        config.resumeFrom = checkpoint
        if !augmentGiven { config.augmentation = checkpoint.augmentation }
        if !shortLastBatchGiven { config.shortLastBatch = checkpoint.shortLastBatch }
        if !frozenHalfGiven { config.frozenActivationsHalfPrecision = checkpoint.frozenActivationsHalfPrecision }
        if !scheduleGiven {
            config.checkpointEvery = checkpoint.checkpointEvery
            config.checkpointEveryMiniBatches = checkpoint.checkpointEveryMiniBatches
        }
        if var dp = config.dataParallel, let shares = checkpoint.dataParallelShares, shares.count == dp.replicas.count {
            dp.shares = shares
            config.dataParallel = dp
        }
    }

    var summary: String {
        "resuming \(url.lastPathComponent) at \(checkpoint.position.description) of \(checkpoint.parameters.epochs) epochs"
    }
}

/// For tests of kill and resume: with UPDRAFT_PAUSE_AFTER_MINI_BATCH=K in the environment, `train`
/// stops after its K-th mini-batch (counted in this process), says so on stderr, and waits there
/// until it is killed. Checkpoints due up to mini-batch K-1 are on disk by then.
func pauseForTestsIfAsked(_ handle: @escaping @Sendable (UpdateContext) -> Void) -> @Sendable (UpdateContext) -> Void {
    guard let text = ProcessInfo.processInfo.environment["UPDRAFT_PAUSE_AFTER_MINI_BATCH"], let k = Int(text), k > 0 else {
        return handle
    }
    nonisolated(unsafe) var seen = 0  // handlers run one at a time, on the training thread
    return { ctx in
        handle(ctx)
        guard ctx.event == .miniBatchEnd else { return }
        seen += 1
        if seen == k {
            printError("paused after mini-batch \(k) (UPDRAFT_PAUSE_AFTER_MINI_BATCH); waiting to be killed")
            while true { sleep(3600) }
        }
    }
}
