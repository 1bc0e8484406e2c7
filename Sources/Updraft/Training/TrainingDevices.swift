import Foundation

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
    if error is OpenCLError { return true }
    if let e = error as? UpdraftError { return e.kind == .device || e.kind == .unsupported }
    return true
}

/// The devices work falls back to: those given, else the host CPU backend unless the work already
/// runs only on the host; never one the work runs on.
func fallbackBackends(_ given: [Backend]?, running: [Backend]) -> [Backend] {
    let onlyHost = running.allSatisfy { $0 is CPUBackend || $0 is ReferenceBackend }
    return (given ?? (onlyHost ? [] : [Scheduler.makeHostBackend()])).filter { f in !running.contains { $0 === f } }
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

/// The executors a training run steps: one, or one replica per device for data parallelism; the
/// devices left to fall back to; the last completed step's state. When a device fails, the step is
/// taken again from the last completed one on what is left (the other replicas, else the next
/// fallback device), after a one-line warning naming the device, the reason and the way out.
final class TrainingDevices {
    let training: TrainingGraph
    let optimizer: OptimizerKind
    private(set) var replicas: [Executor] = []
    /// Each replica's share of a mini-batch.
    private(set) var shares: [Double] = []
    /// Devices not in use yet, in the order they are tried.
    private(set) var fallbacks: [Backend]
    let snapshotPolicy: SnapshotPolicy
    /// The last host copy of the state, when the policy keeps one (nil before the first: a new
    /// executor holds the initial state), and the steps completed since, to take again after it.
    private(set) var snapshot: ExecutorState?
    private var stepsSinceSnapshot: [ReplayStep] = []
    /// Steps every working replica has completed.
    private(set) var completedSteps = 0
    /// Time spent taking snapshots, and how many (the cost of being able to recover).
    private(set) var snapshotSeconds = 0.0
    private(set) var snapshotCount = 0
    /// Time spent in steps (for the automatic snapshot interval), and steps taken again after a snapshot.
    private(set) var stepSeconds = 0.0
    private(set) var replayedSteps = 0

    /// What a completed step needs to be taken again on one executor: its gradients (the examples
    /// and how they are computed) and the hyperparameters of its update.
    struct ReplayStep {
        var parameters: TrainingParameters
        var gradients: (Executor) throws -> Void
    }
    private let warn: (String) -> Void

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
    private let start: ExecutorState?
    /// Steps completed when training started (the start state's step count).
    private var startSteps: Int { start?.stepCount ?? 0 }

    init(training: TrainingGraph, optimizer: OptimizerKind, configuration config: UpdateConfiguration,
         start: ExecutorState? = nil, warn: @escaping (String) -> Void) throws {
        self.training = training
        self.optimizer = optimizer
        self.snapshotPolicy = config.snapshots
        self.warn = warn
        self.start = start
        completedSteps = start?.stepCount ?? 0
        var running: [Backend] = []
        var problems: [String] = []
        if let dp = config.dataParallel, !dp.replicas.isEmpty {
            let shares = dp.shares ?? dp.replicas.map { _ in 1 }
            guard shares.count == dp.replicas.count, shares.allSatisfy({ $0.isFinite && $0 > 0 }) else {
                throw UpdraftError(.invalidArgument, "data parallelism needs one positive share per replica, got \(shares) for \(dp.replicas.count)")
            }
            for (backend, share) in zip(dp.replicas, shares) {
                running.append(backend)
                do {
                    replicas.append(try Self.makeExecutor(training: training, optimizer: optimizer, start: start,
                                                          prefix: backend, tail: backend))
                    self.shares.append(share)
                } catch where isDeviceFailure(error) {
                    problems.append("cannot start a replica on \(backend.name) (\(firstLine(of: error)))")
                }
            }
        } else {
            let (prefix, tail) = config.backends ?? (ReferenceBackend(), ReferenceBackend())
            running = [prefix, tail]
            do {
                replicas = [try Self.makeExecutor(training: training, optimizer: optimizer, start: start, prefix: prefix, tail: tail)]
                shares = [1]
            } catch where isDeviceFailure(error) {
                let name = prefix === tail ? tail.name : "\(prefix.name) + \(tail.name)"
                problems.append("cannot start training on \(name) (\(firstLine(of: error)))")
            }
        }
        fallbacks = fallbackBackends(config.fallbacks, running: running)
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

    /// An executor on these backends holding the start state.
    private func makeExecutor(prefix: Backend, tail: Backend) throws -> Executor {
        try Self.makeExecutor(training: training, optimizer: optimizer, start: start, prefix: prefix, tail: tail)
    }

    private static func makeExecutor(training: TrainingGraph, optimizer: OptimizerKind, start: ExecutorState?,
                                     prefix: Backend, tail: Backend) throws -> Executor {
        let e = try Executor(training: training, optimizer: optimizer, prefixBackend: prefix, tailBackend: tail)
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
                try recover(from: failure, position: position)
            } catch is PeerRetry {
                continue
            }
        }
    }

    private func attemptStep<Input>(count: Int, parameters: TrainingParameters, prepare: (Range<Int>) throws -> Input,
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

    // MARK: Snapshots

    /// Whether a copy of the state is worth keeping: there is somewhere left to carry on.
    private var keepsSnapshots: Bool { snapshotPolicy != .never && !fallbacks.isEmpty }

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
    private func keepSnapshotIfDue() throws {
        guard stepsSinceSnapshot.count >= snapshotInterval else { return }
        try keepSnapshot()
    }

    /// `keepSnapshotIfDue` after a multi-rank step: the other ranks have completed the step, so it is
    /// not taken again when the copy fails; the device that carries on gets the state after it (the
    /// last snapshot and the steps since, this one with its summed gradients).
    private func keepRankSnapshotIfDue(_ step: ReplayStep, position: String) throws {
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
    private func keepSnapshot() throws {
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

    // MARK: Recovery

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
    private func takeOver(state: ExecutorState?, replay: [ReplayStep] = [], problems: [String], position: String? = nil) throws {
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
