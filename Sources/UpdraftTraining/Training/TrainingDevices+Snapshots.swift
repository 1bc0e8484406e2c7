import Foundation
import UpdraftData

/// Host copies of the training state, kept while a fallback device is left to carry on with.
extension TrainingDevices {
    /// Whether a copy of the state is worth keeping: there is somewhere left to carry on.
    var keepsSnapshots: Bool { snapshotPolicy != .never && !fallbacks.isEmpty }

    /// Steps between snapshots now. Automatic: 1 until the first is measured, then enough that
    /// snapshots cost at most 2% of step time, and at most 20 (the steps a fallback may have to take again).
    var snapshotInterval: Int {
        switch snapshotPolicy {
        case .never: return .max
        case let .every(n): return max(1, n)
        case .automatic:
            return Self.automaticInterval(snapshotSeconds: snapshotSeconds, snapshots: snapshotCount,
                                          stepSeconds: stepSeconds, steps: completedSteps)
        }
    }

    static func automaticInterval(snapshotSeconds: Double, snapshots: Int, stepSeconds: Double, steps: Int) -> Int {
        guard snapshots > 0, steps > 0, stepSeconds > 0 else { return 1 }
        let ratio = (snapshotSeconds / Double(snapshots)) / (0.02 * stepSeconds / Double(steps))
        return ratio.isFinite ? max(1, min(20, Int(ratio.rounded(.up)))) : 20
    }

    /// Takes a snapshot when enough steps have passed since the last.
    func keepSnapshotIfDue() throws {
        guard stepsSinceSnapshot.count >= snapshotInterval else { return }
        try keepSnapshot()
    }

    /// `keepSnapshotIfDue` after a multi-rank step: the other ranks have completed the step, so it is
    /// not taken again when the copy fails; the device that carries on gets the state after it (the
    /// last snapshot and the steps since, this one with its summed gradients).
    func keepRankSnapshotIfDue(_ step: ReplayStep, position: String) throws {
        do {
            try keepSnapshotIfDue()
        } catch let failure as ReplicaFailure {
            completedSteps += 1
            stepsSinceSnapshot.append(step)
            try recover(from: failure, position: position)
        }
    }

    /// Copies the state of the step just completed, from the first replica that answers. Replicas
    /// that do not are dropped; when none does, the step is lost with them (`.snapshot`), and is taken
    /// again from the previous snapshot.
    func keepSnapshot() throws {
        var failed: [(index: Int, error: Error)] = []
        for (i, r) in replicas.enumerated() {
            do {
                // The step's queued work first: waiting for it is not the snapshot's cost.
                try r.tailBackend.synchronize()
                let start = Date()
                let s = try r.captureState()
                snapshotSeconds += Date().timeIntervalSince(start)
                snapshotCount += 1
                if !failed.isEmpty { drop(failed, note: "while reading back the state") }
                snapshot = s
                stepsSinceSnapshot = []
                return
            } catch where isDeviceFailure(error) {
                failed.append((i, error))
            }
        }
        // Not completed after all: the step is taken again after recovery.
        completedSteps -= 1
        stepsSinceSnapshot.removeLast()
        throw ReplicaFailure(phase: .snapshot, failures: failed)
    }
}
