import Foundation
import UpdraftCore
import UpdraftData

/// This rank's part in a step of a multi-rank run: the exchange, and every rank's weight in the
/// global batch's gradient.
struct RankShare {
    var exchange: GradientExchange
    var weights: [Double]
    /// Whether this rank's task was cancelled (told to the others with the step's losses).
    var wantsToStop: () -> Bool
}

/// Another rank's device failed during a step: every rank takes the step again (that rank on the
/// device it fell back to).
struct PeerRetry: Error {}

extension TrainingDevices {
    /// One step of a multi-rank run: this rank's examples on its replicas (combined locally as in
    /// `attemptStep`), the sum over ranks (`GradientExchange`: bucket by bucket, overlapping backward
    /// when one replica trains), then the same update on every rank. Returns the global batch's result
    /// and the summed gradients (to take the step again after a device failure on this rank).
    func attemptRankStep<Input>(share: RankShare, count: Int, position: String, parameters: TrainingParameters,
                                prepare: (Range<Int>) throws -> Input,
                                gradients: (Executor, Input) throws -> Executor.BatchResult) throws -> (Executor.BatchResult, [[Float]]) {
        let exchange = share.exchange
        let stepNumber = completedSteps + 1
        exchange.begin(weights: share.weights)
        var local = Executor.BatchResult(loss: 0, correct: 0, count: 0)
        var failure: Error? = nil
        do {
            let reps = replicas
            let sizes = reps.count == 1 ? [count] : DataParallelism.sliceSizes(count: count, shares: shares)
            let inputs = try DataParallelism.ranges(sizes).map { $0.isEmpty ? nil : try prepare($0) }
            if reps.count == 1 {
                if let input = inputs[0] {
                    let r = reps[0]
                    r.gradientsReady = { [unowned r] layer in try exchange.layerReady(layer, executor: r) }
                    defer { r.gradientsReady = nil }
                    do {
                        try exchange.injectFailureIfDue(step: stepNumber)
                        local = try gradients(r, input)
                        try exchange.contributeRest(from: r)
                    } catch where isDeviceFailure(error) {
                        throw ReplicaFailure(phase: .gradients, failures: [(0, error)])
                    }
                }
            } else {
                let outcomes = DataParallelism.concurrently(reps.count, together: replicasRunTogether) { i -> Executor.BatchResult? in
                    guard let input = inputs[i] else { return nil }
                    if i == 0 { try exchange.injectFailureIfDue(step: stepNumber) }
                    return try gradients(reps[i], input)
                }
                var results: [Executor.BatchResult] = []
                try collect(outcomes, phase: .gradients) { if let r = $0 { results.append(r) } }
                local = DataParallelism.combine(results)
                var gathered: [[[Float]]] = [], weights: [Double] = []
                let downloads = reps.indices.map { i in Result { sizes[i] > 0 ? try reps[i].gradientValues() : nil } }
                try collect(downloads, phase: .reduction) { _ in }
                for (i, d) in downloads.enumerated() {
                    if case let .success(g?) = d { gathered.append(g); weights.append(Double(sizes[i]) / Double(max(1, count))) }
                }
                if !gathered.isEmpty { exchange.contribute(try DataParallelism.combine(gathered, weights: weights)) }
            }
        } catch {
            failure = error
        }
        let status: GradientExchange.Status = failure == nil ? .ok : (failure is ReplicaFailure ? .deviceFailed : .failed)
        let (summed, ranks) = try exchange.finish(local: local, status: status, stop: share.wantsToStop())
        if let failure { throw failure }
        let world = exchange.world
        if let bad = ranks.firstIndex(where: { $0.status == .failed }) {
            throw UpdraftError(.ranks, "rank \(bad) of \(world.size) stopped with an error at \(position) (its message is in its output); \(world.name) stops too",
                               hint: "fix what rank \(bad) reports and run again")
        }
        if ranks.contains(where: { $0.status == .deviceFailed }) { throw PeerRetry() }
        // Every rank sees the same global loss, so all skip (or stop at) a non-finite step together.
        let global = DataParallelism.combine(ranks.map(\.result))
        guard global.loss.isFinite else { throw NonFiniteLoss(loss: global.loss) }
        try applyOnEveryReplica(summed, parameters: parameters, position: position)
        return (global, summed)
    }

    /// Applies the summed gradients on every replica. The other ranks have applied them already, so
    /// a replica that fails here is replaced (from the last completed step) and the update applied
    /// again there, rather than the step taken again.
    private func applyOnEveryReplica(_ summed: [[Float]], parameters: TrainingParameters, position: String) throws {
        while true {
            let reps = replicas
            let updates = DataParallelism.concurrently(reps.count, together: replicasRunTogether) { i in
                try reps[i].setGradients(summed)
                try reps[i].applyUpdate(parameters)
            }
            let failed = try deviceFailures(updates)
            if failed.isEmpty { return }
            if failed.count < reps.count {
                drop(failed, note: "while applying the update")
                return
            }
            try recover(from: ReplicaFailure(phase: .update, failures: failed), position: position)
        }
    }
}
