import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftLayers
import UpdraftData

/// The executors a training run steps: one, or one replica per device for data parallelism; the
/// devices left to fall back to; the last completed step's state. When a device fails, the step is
/// taken again from the last completed one on what is left (the other replicas, else the next
/// fallback device), after a one-line warning naming the device, the reason and the way out.
/// Snapshots are in TrainingDevices+Snapshots.swift, recovery in TrainingDevices+Recovery.swift,
/// MPI ranks in TrainingDevices+Ranks.swift; their state is set only by this type and those extensions.
final class TrainingDevices {
    let training: TrainingGraph
    let optimizer: OptimizerKind
    var replicas: [Executor] = []
    /// Each replica's share of a mini-batch.
    var shares: [Double] = []
    /// Devices not in use yet, in the order they are tried.
    var fallbacks: [Backend]
    let snapshotPolicy: SnapshotPolicy
    /// The last host copy of the state, when the policy keeps one (nil before the first: a new
    /// executor holds the initial state), and the steps completed since, to take again after it.
    var snapshot: ExecutorState?
    var stepsSinceSnapshot: [ReplayStep] = []
    /// Steps every working replica has completed.
    var completedSteps = 0
    /// Time spent taking snapshots, and how many (the cost of being able to recover).
    var snapshotSeconds = 0.0
    var snapshotCount = 0
    /// Time spent in steps (for the automatic snapshot interval), and steps taken again after a snapshot.
    var stepSeconds = 0.0
    var replayedSteps = 0

    /// What a completed step needs to be taken again on one executor: its gradients (the examples
    /// and how they are computed) and the hyperparameters of its update.
    struct ReplayStep {
        var parameters: TrainingParameters
        var gradients: (Executor) throws -> Void
    }
    let warn: (String) -> Void

    var primary: Executor { replicas[0] }
    /// Whether the replicas may run at the same time: no backend object serves two of them (one
    /// given twice runs its replicas one after the other, as a backend serves one thread at a time).
    var replicasRunTogether: Bool {
        var seen = Set<ObjectIdentifier>()
        for r in replicas {
            for b in Set([ObjectIdentifier(r.prefixBackend), ObjectIdentifier(r.tailBackend)]) where !seen.insert(b).inserted {
                return false
            }
        }
        return true
    }
    /// Where training runs: "cpu", or "opencl:A + opencl:B (data parallel)".
    var description: String {
        replicas.count == 1 ? primary.deviceName : replicas.map(\.deviceName).joined(separator: " + ") + " (data parallel)"
    }

    /// The state training started from: nil for the model's own weights, else a checkpoint's (a
    /// resumed run). Every executor made here starts from it, fallbacks included.
    let start: ExecutorState?
    /// Whether executors run the prefix's start chunked (the run's `UpdraftEnvironment.chunksPrefix`).
    let chunksPrefix: Bool
    /// Steps completed when training started (the start state's step count).
    var startSteps: Int { start?.stepCount ?? 0 }

    init(training: TrainingGraph, optimizer: OptimizerKind, configuration config: UpdateConfiguration,
         start: ExecutorState? = nil, warn: @escaping (String) -> Void) throws {
        self.training = training
        self.optimizer = optimizer
        self.snapshotPolicy = config.placement.snapshots
        self.chunksPrefix = config.environment.chunksPrefix
        self.warn = warn
        self.start = start
        completedSteps = start?.stepCount ?? 0
        var running: [Backend] = []
        var problems: [String] = []
        if let dp = config.placement.dataParallel, !dp.replicas.isEmpty {
            let shares = dp.shares ?? dp.replicas.map { _ in 1 }
            guard shares.count == dp.replicas.count, shares.allSatisfy({ $0.isFinite && $0 > 0 }) else {
                throw UpdraftError(.invalidArgument, "data parallelism needs one positive share per replica, got \(shares) for \(dp.replicas.count)")
            }
            for (backend, share) in zip(dp.replicas, shares) {
                running.append(backend)
                do {
                    replicas.append(try Self.makeExecutor(training: training, optimizer: optimizer, start: start,
                                                          chunksPrefix: chunksPrefix, prefix: backend, tail: backend))
                    self.shares.append(share)
                } catch where isDeviceFailure(error) {
                    problems.append("cannot start a replica on \(backend.name) (\(firstLine(of: error)))")
                }
            }
        } else {
            let (prefix, tail) = config.placement.backends ?? (ReferenceBackend(), ReferenceBackend())
            running = [prefix, tail]
            do {
                replicas = [try Self.makeExecutor(training: training, optimizer: optimizer, start: start,
                                                  chunksPrefix: chunksPrefix, prefix: prefix, tail: tail)]
                shares = [1]
            } catch where isDeviceFailure(error) {
                let name = prefix === tail ? tail.name : "\(prefix.name) + \(tail.name)"
                problems.append("cannot start training on \(name) (\(firstLine(of: error)))")
            }
        }
        fallbacks = fallbackBackends(config.placement.fallbacks, running: running, environment: config.environment)
        if replicas.isEmpty {
            try takeOver(state: nil, problems: problems)
        } else if !problems.isEmpty {
            warn(problems.joined(separator: "; ") + "; training on \(description)")
        }
    }

    /// What the devices did, kept once they are released (tests and reports).
    struct Record {
        var description: String
        var replicaCount: Int
        var fallbackCount: Int
        var snapshotCount: Int
        var replayedSteps: Int
        /// The primary executor's workspace batch sizes.
        var workspaceBatchSizes: [Int]
    }

    var record: Record {
        Record(description: description, replicaCount: replicas.count, fallbackCount: fallbacks.count,
               snapshotCount: snapshotCount, replayedSteps: replayedSteps,
               workspaceBatchSizes: replicas.first?.workspaceBatchSizes ?? [])
    }

    /// Drops the executors (their parameters, optimizer state and workspaces), the fallback devices,
    /// the snapshot and the steps kept to take again (whose closures hold the training session):
    /// once a run has ended, nothing of it stays allocated.
    func release() {
        // The last step's queued work first: the backends then let go of the buffers it used.
        for r in replicas { try? r.prefixBackend.synchronize(); try? r.tailBackend.synchronize() }
        replicas = []
        shares = []
        fallbacks = []
        snapshot = nil
        stepsSinceSnapshot = []
    }

    /// An executor on these backends holding the start state, with the run's settings.
    func makeExecutor(prefix: Backend, tail: Backend) throws -> Executor {
        try Self.makeExecutor(training: training, optimizer: optimizer, start: start, chunksPrefix: chunksPrefix, prefix: prefix, tail: tail)
    }

    static func makeExecutor(training: TrainingGraph, optimizer: OptimizerKind, start: ExecutorState?, chunksPrefix: Bool,
                             prefix: Backend, tail: Backend) throws -> Executor {
        let e = try Executor(training: training, optimizer: optimizer, prefixBackend: prefix, tailBackend: tail)
        e.chunksPrefix = chunksPrefix
        if let start { try e.restoreState(start) }
        return e
    }

    // MARK: Steps

    /// One optimizer step over a mini-batch of `count` examples: each replica's slice is prepared
    /// on this thread (`prepare`, given the slice's positions in the batch), its gradients computed
    /// on all replicas at once (`gradients`), combined on the host, and applied on every replica.
    /// A device failure is recovered from and the step taken again.
    /// - Parameter position: where training stands, for warnings ("epoch 1 mini-batch 3").
    /// - Parameter rank: in a multi-rank run, this rank's part (`count` is then its own examples).
    func step<Input>(count: Int, position: String, parameters: () -> TrainingParameters, rank: RankShare? = nil,
                     prepare: @escaping (Range<Int>) throws -> Input,
                     gradients: @escaping (Executor, Input) throws -> Executor.BatchResult) throws -> Executor.BatchResult {
        while true {
            do {
                let hyper = parameters()
                let start = Date()
                var summed: [[Float]]? = nil
                let result: Executor.BatchResult
                if let rank {
                    (result, summed) = try attemptRankStep(share: rank, count: count, position: position, parameters: hyper,
                                                           prepare: prepare, gradients: gradients)
                } else {
                    result = try attemptStep(count: count, parameters: hyper, prepare: prepare, gradients: gradients)
                }
                stepSeconds += Date().timeIntervalSince(start)
                completedSteps += 1
                if keepsSnapshots {
                    let replay = ReplayStep(parameters: hyper, gradients: { e in
                        // A multi-rank step is taken again with the gradients summed over the ranks.
                        if let summed { try e.setGradients(summed) } else { _ = try gradients(e, try prepare(0..<count)) }
                    })
                    stepsSinceSnapshot.append(replay)
                    if summed != nil {
                        try keepRankSnapshotIfDue(replay, position: position)
                        return result
                    }
                    try keepSnapshotIfDue()
                } else {
                    snapshot = nil
                    stepsSinceSnapshot = []
                }
                return result
            } catch let failure as ReplicaFailure {
                // Several ranks: the others wait to hear whether this rank carries on (RankAgreement.swift).
                guard let rank else { try recover(from: failure, position: position); continue }
                try rank.exchange.agreeOnRecovery(position: position) { try recover(from: failure, position: position) }
            } catch is PeerRetry {
                try rank?.exchange.agreeOnRecovery(position: position) {}
                continue
            }
        }
    }

    func attemptStep<Input>(count: Int, parameters: TrainingParameters, prepare: (Range<Int>) throws -> Input,
                                    gradients: (Executor, Input) throws -> Executor.BatchResult) throws -> Executor.BatchResult {
        let reps = replicas
        let sizes = reps.count == 1 ? [count] : DataParallelism.sliceSizes(count: count, shares: shares)
        let inputs = try DataParallelism.ranges(sizes).map { $0.isEmpty ? nil : try prepare($0) }
        let outcomes = DataParallelism.concurrently(reps.count, together: replicasRunTogether) { i -> Executor.BatchResult? in
            guard let input = inputs[i] else { return nil }
            return try gradients(reps[i], input)
        }
        var results: [Executor.BatchResult] = []
        try collect(outcomes, phase: .gradients) { if let r = $0 { results.append(r) } }
        let result = DataParallelism.combine(results)
        // Before the update: a non-finite loss's update would make every weight NaN.
        guard result.loss.isFinite else { throw NonFiniteLoss(loss: result.loss) }

        if reps.count == 1 {
            do { try reps[0].applyUpdate(parameters) } catch where isDeviceFailure(error) {
                throw ReplicaFailure(phase: .update, failures: [(0, error)])
            }
        } else {
            var gathered: [[[Float]]] = [], weights: [Double] = []
            let downloads = reps.indices.map { i in Result { sizes[i] > 0 ? try reps[i].gradientValues() : nil } }
            try collect(downloads, phase: .reduction) { _ in }
            for (i, d) in downloads.enumerated() {
                if case let .success(g?) = d { gathered.append(g); weights.append(Double(sizes[i]) / Double(max(1, count))) }
            }
            let combined = try DataParallelism.combine(gathered, weights: weights)
            let updates = DataParallelism.concurrently(reps.count, together: replicasRunTogether) { i in
                try reps[i].setGradients(combined)
                try reps[i].applyUpdate(parameters)
            }
            let failed = try deviceFailures(updates)
            if failed.count == reps.count { throw ReplicaFailure(phase: .update, failures: failed) }
            // The others completed the step: it stands, without the replicas that failed.
            if !failed.isEmpty { drop(failed, note: "while applying the update") }
        }
        return result
    }

    /// Runs `body` on the primary replica (validation), recovering from device failures.
    func onPrimary<T>(position: String, _ body: (Executor) throws -> T) throws -> T {
        while true {
            do { return try body(primary) } catch where isDeviceFailure(error) {
                try recover(from: ReplicaFailure(phase: .evaluation, failures: [(0, error)]), position: position)
            }
        }
    }

    /// Passes successes to `use`; throws a `ReplicaFailure` for device failures, and any other
    /// error as it is.
    func collect<T>(_ outcomes: [Result<T, Error>], phase: ReplicaFailure.Phase, _ use: (T) -> Void) throws {
        let failed = try deviceFailures(outcomes)
        if !failed.isEmpty { throw ReplicaFailure(phase: phase, failures: failed) }
        for case let .success(v) in outcomes { use(v) }
    }

    func deviceFailures<T>(_ outcomes: [Result<T, Error>]) throws -> [(index: Int, error: Error)] {
        var failed: [(index: Int, error: Error)] = []
        for (i, o) in outcomes.enumerated() {
            if case let .failure(e) = o {
                guard isDeviceFailure(e) else { throw e }
                failed.append((i, e))
            }
        }
        return failed
    }
}
