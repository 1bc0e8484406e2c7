import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft train --resume CHECKPOINT.mlmodel`: the checkpoint's state, and which of the settings
/// it fixes the command line gives.
struct ResumeOptions {
    let url: URL
    let checkpoint: TrainingCheckpoint

    init(_ path: String) throws {
        url = URL(fileURLWithPath: path)
        checkpoint = try TrainingCheckpoint.read(forModel: url)
    }

    /// The settings a resumed run takes from the checkpoint unless the command line gives its own
    /// (`UpdateConfiguration.resume(from:keeping:)`): those it gives, which the task then refuses
    /// if they differ from the checkpoint's.
    func settingsGiven(_ args: ParsedArguments) -> Set<ResumedSetting> {
        var given: Set<ResumedSetting> = []
        if args.value("augment") != nil || args.value("random-resized-crop") != nil { given.insert(.augmentation) }
        if args.flag("short-last-batch") { given.insert(.shortLastBatch) }
        if args.flag("frozen-fp16") { given.insert(.frozenActivationsHalfPrecision) }
        if args.value("checkpoint-every") != nil || args.value("checkpoint-every-batches") != nil { given.insert(.checkpointSchedule) }
        return given
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
