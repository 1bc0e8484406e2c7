import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftData

/// One progress event as a value, for `UpdateTask.events`: what a progress handler's context
/// carries, without the task.
public struct UpdateEvent: Sendable {
    /// Which event this is: one of `trainingBegin`, `epochEnd`, `miniBatchEnd`.
    public let event: UpdateProgressEvent
    /// The mini-batch's (or epoch's) metrics; nil at trainingBegin.
    public let metrics: TrainingMetrics?
    /// The parameter values in force when the event happened.
    public let parameters: TrainingParameters
}

/// Swift concurrency beside Core ML's handlers: `for try await event in task.events` and
/// `try await task.run()`. Training itself runs on a thread of its own either way, never on the
/// caller's executor, so awaiting it from the main actor blocks nothing.
extension UpdateTask {
    /// Every progress event from now on (all kinds, whatever the handlers' event mask), as an async
    /// sequence. It ends when the task completes or is cancelled, and throws the error of a task that
    /// failed. Subscribe before starting the task to see `trainingBegin`.
    public var events: AsyncThrowingStream<UpdateEvent, Error> {
        AsyncThrowingStream(bufferingPolicy: .unbounded) { continuation in
            lock.lock()
            let ended = outcome
            if ended == nil { eventObservers.append(continuation) }
            lock.unlock()
            if let ended {
                if state == .failed, let error = ended.error { continuation.finish(throwing: error) } else { continuation.finish() }
            }
        }
    }

    /// Trains (starting the task if nobody has yet, else waiting for it) and returns the trained model.
    /// Throws the error of a failed task; cancelling the calling Swift task cancels training after the
    /// current mini-batch and throws `UpdraftError(.cancelled)` — `currentModel()` still has the model
    /// trained so far, as Core ML's completion handler would.
    public func run() async throws -> CoreMLModel {
        let ended: UpdateContext = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<UpdateContext, Never>) in
                resume()
                let waiter = Thread { [self] in continuation.resume(returning: wait()) }
                waiter.start()
            }
        } onCancel: {
            cancel()
        }
        switch ended.task.state {
        case .completed:
            return try currentModel()
        case .cancelled:
            throw UpdraftError(.cancelled, "training was cancelled",
                               hint: "task.currentModel() holds the model trained so far; a checkpoint (writeCheckpoint) resumes it")
        default:
            throw ended.error ?? UpdraftError(.device, "training ended in state \(ended.task.state) without an error")
        }
    }

    func yieldToEventObservers(_ event: UpdateEvent) {
        lock.lock(); let observers = eventObservers; lock.unlock()
        for observer in observers { observer.yield(event) }
    }

    func finishEventObservers(error: Error?) {
        lock.lock(); let observers = eventObservers; eventObservers = []; lock.unlock()
        for observer in observers {
            if let error { observer.finish(throwing: error) } else { observer.finish() }
        }
    }
}
