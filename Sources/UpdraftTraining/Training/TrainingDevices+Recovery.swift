import Foundation
import UpdraftCore
import UpdraftData

/// Carrying on after a device failed: dropping replicas others outlive, or taking the step again
/// from the last snapshot on what is left.
extension TrainingDevices {
    /// Removes failed replicas that others outlive, with a warning.
    func drop(_ failed: [(index: Int, error: Error)], note: String) {
        let gone = Set(failed.map(\.index))
        let names = failed.map { replicas[$0.index].deviceName }
        let kept = replicas.indices.filter { !gone.contains($0) }
        replicas = kept.map { replicas[$0] }
        shares = kept.map { shares[$0] }
        warn("\(names.joined(separator: ", ")) failed \(note) (\(firstLine(of: failed[0].error))); continuing on \(description)")
    }

    /// Carries on after `failure`: on the replicas that did not fail (their state is the last
    /// completed step's), else on the next fallback device with the state of the last completed step
    /// (the snapshot, or read back from a failed device that still answers). Throws when neither is
    /// possible.
    func recover(from failure: ReplicaFailure, position: String) throws {
        let gone = Set(failure.failures.map(\.index))
        let names = failure.failures.map { replicas[$0.index].deviceName }
        let reason = "\(names.joined(separator: ", ")) failed (\(firstLine(of: failure.failures[0].error)))"
        let kept = replicas.indices.filter { !gone.contains($0) }
        if !kept.isEmpty {
            replicas = kept.map { replicas[$0] }
            shares = kept.map { shares[$0] }
            warn("\(reason); continuing on \(description) from the last completed step, \(position) again")
            return
        }
        guard !fallbacks.isEmpty else {
            throw UpdraftError(.device, "\(reason); no other device is left to train on",
                               hint: "use --compute-units cpuOnly, or check the device with `updraft devices`")
        }
        // Executors count their steps from the start state's, so the last completed step's state is
        // the one whose step count is `completedSteps`: read back from a failed device that still
        // answers, else the snapshot (or the start state) with the steps since taken again.
        var state: ExecutorState? = nil
        var replay: [ReplayStep] = []
        if completedSteps > startSteps {
            if failure.phase != .snapshot, snapshot?.stepCount != completedSteps {
                for i in gone.sorted() {
                    if let s = try? replicas[i].captureState(), s.stepCount == completedSteps { state = s; break }
                }
            }
            if state == nil, keepsSnapshots || snapshot != nil,
               (snapshot?.stepCount ?? startSteps) + stepsSinceSnapshot.count == completedSteps {
                state = snapshot
                replay = stepsSinceSnapshot
            }
            guard state != nil || replay.count == completedSteps - startSteps else {
                throw UpdraftError(.device, "\(reason), and the state of the last completed step could not be read back",
                                   hint: "run again (with --compute-units cpuOnly to avoid the device)")
            }
        }
        try takeOver(state: state, replay: replay, problems: [reason], position: position)
    }

    /// Makes a single executor on the next fallback device that works, with `state` (nil: the
    /// start state), and warns once naming what failed and where training goes on.
    func takeOver(state: ExecutorState?, replay: [ReplayStep] = [], problems: [String], position: String? = nil) throws {
        var problems = problems
        let before = (replicas, shares)
        do {
            let (_, backend) = try takeOverOnFallback(&fallbacks, problems: &problems, work: "train on") { backend in
                let e = try makeExecutor(prefix: backend, tail: backend)
                if let state { try e.restoreState(state) }
                replicas = [e]
                shares = [1]
                // The steps since the snapshot, again (on this executor alone: it is the only replica now).
                for step in replay {
                    try step.gradients(e)
                    try e.applyUpdate(step.parameters)
                }
                if !replay.isEmpty {
                    snapshot = try e.captureState()
                    stepsSinceSnapshot = []
                }
            }
            replayedSteps += replay.count
            if !keepsSnapshots { snapshot = nil; stepsSinceSnapshot = [] }
            let resume = position.map { " from the last completed step, \($0) again" } ?? ""
            warn(problems.joined(separator: "; ") + "; continuing on \(backend.name)\(resume)")
        } catch {
            (replicas, shares) = before
            throw error
        }
    }
}
