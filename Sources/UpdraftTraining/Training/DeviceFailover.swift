import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftPlacement
import UpdraftData

/// When training keeps a host copy of its state (parameters, optimizer moments, step count) so that
/// it can carry on elsewhere if every device it runs on fails. The steps since the copy are kept
/// too (which examples, which hyperparameters) and taken again on the device that takes over.
public enum SnapshotPolicy: Equatable, Sendable {
    /// While a fallback device is left to carry on with: after the first step, then as often as
    /// costs at most 2% of training time (reading the copy back synchronises with the device and
    /// crosses the bus), at least every 20 steps. The copy is the trained tensors only (not the
    /// frozen ones): for fine-tuning a head, a few megabytes at most.
    case automatic
    /// After every `n`-th completed step, while a fallback device is left.
    case every(Int)
    /// Never: recovery reads the state back from a replica that still works, or from the failed
    /// device if it still answers and failed outside an optimizer update; otherwise training fails.
    case never
}

/// Whether an error means "this device cannot do it" (so another device may) rather than "this
/// input is wrong" (which no device fixes): OpenCL errors, Updraft's device and unsupported errors,
/// and errors of types Updraft does not know (a custom backend's). Data, model and argument errors
/// are not.
func isDeviceFailure(_ error: Error) -> Bool {
    if error is DeviceFailure { return true }
    if let e = error as? UpdraftError { return e.kind == .device || e.kind == .unsupported }
    return true
}

/// The devices work falls back to: those given, else the host CPU backend unless the work already
/// runs only on the host; never one the work runs on.
func fallbackBackends(_ given: [Backend]?, running: [Backend], environment: UpdraftEnvironment = .process) -> [Backend] {
    let onlyHost = running.allSatisfy(\.runsOnHostCPU)
    return (given ?? (onlyHost ? [] : [Scheduler.makeHostBackend(environment: environment)])).filter { f in !running.contains { $0 === f } }
}

/// Tries `fallbacks` in order, removing each, until `start` succeeds on one; the device failures of
/// those that could not take over join `problems`. When none is left, throws a device error naming
/// every problem, ending in "no other device is left to `work`".
func takeOverOnFallback<T>(_ fallbacks: inout [Backend], problems: inout [String], work: String,
                           _ start: (Backend) throws -> T) throws -> (result: T, backend: Backend) {
    while !fallbacks.isEmpty {
        let backend = fallbacks.removeFirst()
        do {
            return (try start(backend), backend)
        } catch where isDeviceFailure(error) {
            problems.append("\(backend.name) could not take over (\(firstLine(of: error)))")
        }
    }
    throw UpdraftError(.device, problems.joined(separator: "; ") + "; no other device is left to \(work)",
                       hint: "use --compute-units cpuOnly, or check the device with `updraft devices`")
}

/// Device failures of some replicas during one phase of a step.
struct ReplicaFailure: Error, CustomStringConvertible {
    enum Phase: String { case gradients, reduction, update, snapshot, evaluation }
    var phase: Phase
    /// Replica index and its error.
    var failures: [(index: Int, error: Error)]
    var description: String { failures.map { "replica \($0.index): \(firstLine(of: $0.error))" }.joined(separator: "; ") }
}
