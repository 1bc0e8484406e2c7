import UpdraftCore
import UpdraftModel

/// Chooses where a training batch runs, from each device's measured speed (`DeviceProfile`), each
/// layer's work (`CostModel`) and the cost of copying tensors between memories.
///
/// The graph has two parts the executor can place separately (`TrainingGraph`): the frozen prefix
/// (layers whose outputs depend on no updatable parameter: no gradient, forward only) and the
/// trainable tail (the updatable layers and everything downstream of them). The scheduler weighs every
/// allowed device for the whole model and every pair of devices for prefix and tail, and keeps the
/// model on one device unless a split is at least `Options.minimumSplitGain` faster. Small
/// workloads land on the host CPU by the same arithmetic: there, launch latency is what dominates.
public enum Scheduler {
    /// How the scheduler decides between placements: the gain a split must bring, the memory it may fill, and whether data parallelism is allowed.
    public struct Options: Hashable, Sendable {
        /// Fraction of the best single-device time a split must save to be chosen (0.1: 10 %).
        public var minimumSplitGain: Double = 0.1
        /// Share of a device's memory the plan may fill.
        public var memoryHeadroom: Double = 0.9
        /// Whether each mini-batch may be split across devices (`auto`: when it pays by
        /// `minimumSplitGain`, like a prefix/tail split).
        public var dataParallel: DataParallelMode = .auto
        /// The whole job (examples and passes): placements are then ranked by set-up plus every
        /// batch, not by one batch. nil: by one batch, set-up left out (a long run).
        public var job: Job? = nil
        /// Program binaries the cache holds per device (`DeviceProfile.identifier`); a device not
        /// named has none cached.
        public var cachedPrograms: [String: Int] = [:]
        /// Options with the given thresholds; defaults: a 10 % gain to split, 90 % of memory, data parallelism `.auto`.
        public init(minimumSplitGain: Double = 0.1, memoryHeadroom: Double = 0.9, dataParallel: DataParallelMode = .auto) {
            self.minimumSplitGain = minimumSplitGain; self.memoryHeadroom = memoryHeadroom; self.dataParallel = dataParallel
        }
    }

    /// The plan for training `graph` with batches of `batchSize` on the `devices` that
    /// `computeUnits` allows. Throws when no device is allowed or the batch size is not positive.
    public static func plan(graph: NetworkGraph, batchSize: Int, computeUnits: ComputeUnits,
                            devices: [DeviceProfile], options: Options = Options()) throws -> ExecutionPlan {
        guard batchSize >= 1 else {
            throw UpdraftError(.invalidArgument, "batch size must be at least 1, got \(batchSize)")
        }
        let allowed = devices.filter { computeUnits.allows($0) && $0.isUsable }
        guard !allowed.isEmpty else {
            let listed = devices.isEmpty ? "none" : devices.map(\.label).joined(separator: ", ")
            throw UpdraftError(.device, "no device allowed by compute units \(computeUnits.rawValue) (devices: \(listed))",
                               hint: "use --compute-units all, or pin a device with --device (see `updraft devices`)")
        }
        let analysis = try GraphAnalysis(graph: graph, batch: batchSize)

        var evaluated: [Evaluation] = []
        for tail in allowed {
            evaluated.append(evaluate(analysis, prefix: tail, tail: tail, options: options))
        }
        if analysis.hasPrefix && analysis.hasTail {
            for prefix in allowed { for tail in allowed where tail != prefix {
                evaluated.append(evaluate(analysis, prefix: prefix, tail: tail, options: options))
            } }
        }
        // Fitting first, then fastest (for the whole job when there is one); ties keep the given
        // order (single-device placements first, the host first among them).
        let ranked = evaluated.enumerated().sorted {
            ($0.element.fits ? 0 : 1, $0.element.rankSeconds, $0.offset) < ($1.element.fits ? 0 : 1, $1.element.rankSeconds, $1.offset)
        }.map(\.element)

        var notes: [String] = []
        guard var chosen = ranked.first(where: { !$0.isSplit }) else {
            throw UpdraftError(.device, "no single-device placement was weighed")  // one per allowed device, never empty
        }
        if let split = ranked.first(where: \.isSplit) {
            // A split is taken when only it fits, or when it is clearly faster.
            let onlyItFits = split.fits && !chosen.fits
            let clearlyFaster = split.fits == chosen.fits
                && split.rankSeconds < chosen.rankSeconds * (1 - options.minimumSplitGain)
            if onlyItFits || clearlyFaster { chosen = split }
        }
        if !chosen.fits {
            notes.append("the estimated memory (\(formatBytes(chosen.memoryBytes))) exceeds every allowed device; "
                         + "a smaller --batch-size may be needed")
        }
        if let reason = analysis.forwardOnlyReason {
            notes.append("planned forward only, every layer in the prefix: \(reason)")
        }
        if let cached = chosen.cachedSeconds {
            notes.append("with the feature cache (on by default) the prefix runs in the first epoch only; "
                         + "later batches take about \(ExecutionPlan.ms(cached * 1e3)) ms")
        }
        if let job = options.job, let jobSeconds = chosen.jobSeconds {
            let setup = chosen.setupSeconds > 0 ? ", set-up \(ExecutionPlan.ms(chosen.setupSeconds * 1e3)) ms of it" : ""
            notes.append("planned for the whole job (\(job)): about \(ExecutionPlan.ms(jobSeconds * 1e3)) ms\(setup)")
        }
        let running = Set(analysis.layers.map(\.name))
        let skipped = graph.layers.map(\.name).filter { !running.contains($0) }
        if !skipped.isEmpty {
            let names = skipped.count <= 4 ? skipped.joined(separator: ", ") : "\(skipped.count) layers"
            notes.append("not run in training (off the path to the loss, or fused into it): \(names)")
        }
        var plan = ExecutionPlan(
            batchSize: batchSize, computeUnits: computeUnits,
            prefixDevice: chosen.prefix, tailDevice: chosen.tail,
            layers: chosen.steps, transfers: chosen.transfers, totalMs: chosen.totalSeconds * 1e3,
            cachedTotalMs: chosen.cachedSeconds.map { $0 * 1e3 },
            candidates: ranked.map {
                ExecutionPlan.Candidate(prefixDevice: $0.prefix.identifier, tailDevice: $0.tail.identifier,
                                        totalMs: $0.totalSeconds * 1e3, fits: $0.fits, setupMs: $0.setupSeconds * 1e3,
                                        jobMs: $0.jobSeconds.map { $0 * 1e3 })
            },
            notes: notes)
        plan.setup = chosen.setup
        plan.job = options.job
        plan.jobMs = chosen.jobSeconds.map { $0 * 1e3 }
        try considerDataParallel(&plan, graph: graph, devices: allowed, options: options)
        return plan
    }

    // MARK: Evaluating one placement

    struct Evaluation {
        var prefix: DeviceProfile
        var tail: DeviceProfile
        var steps: [ExecutionPlan.LayerStep]
        var transfers: [ExecutionPlan.Transfer]
        var totalSeconds: Double
        /// Per batch once the prefix's outputs are cached (nil without a prefix and a tail).
        var cachedSeconds: Double?
        var memoryBytes: UInt64
        var fits: Bool
        /// Each device's set-up (context and programs) for its part.
        var setup: [SetupEstimate] = []
        /// Every batch of the job plus the set-up; nil without a job.
        var jobSeconds: Double? = nil
        var isSplit: Bool { prefix != tail }
        var setupSeconds: Double { setup.reduce(0) { $0 + $1.ms } * 1e-3 }
        /// What placements are ranked by: the whole job when there is one, else one batch.
        var rankSeconds: Double { jobSeconds ?? totalSeconds }
    }

    static func evaluate(_ a: GraphAnalysis, prefix: DeviceProfile, tail: DeviceProfile, options: Options) -> Evaluation {
        var steps: [ExecutionPlan.LayerStep] = []
        var compute = 0.0, tailCompute = 0.0
        for (i, layer) in a.layers.enumerated() {
            let device = a.inPrefix[i] ? prefix : tail
            let work = a.work[i]
            let forward = CostModel.seconds(work.forward, on: device)
            let backward: Double? = a.runsBackward[i]
                ? CostModel.seconds(work.backwardData + work.backwardWeights + work.optimizer, on: device) : nil
            compute += forward + (backward ?? 0)
            if !a.inPrefix[i] { tailCompute += forward + (backward ?? 0) }
            steps.append(.init(name: layer.name, type: layer.op.name + (a.fusedIntoConvolution[i] ? " (fused)" : ""),
                               segment: a.inPrefix[i] ? .prefix : .tail, device: device.identifier,
                               forwardMs: forward * 1e3, backwardMs: backward.map { $0 * 1e3 }))
        }
        if let loss = a.loss {
            let t = CostModel.seconds(CostModel.lossWork(loss, batch: a.batch), on: tail)
            compute += t
            tailCompute += t
            steps.append(.init(name: loss.name, type: "loss(\(loss.kind.rawValue))", segment: .tail,
                               device: tail.identifier, forwardMs: t * 1e3, backwardMs: 0))
        }

        // nil stands for host memory (the data loader's batch, the loss the trainer reads).
        func transfer(_ what: String, bytes: Int, from: DeviceProfile?, to: DeviceProfile?) -> ExecutionPlan.Transfer? {
            let source = from ?? a.hostMemory, destination = to ?? a.hostMemory
            if source == destination || (source.isHost && destination.isHost) { return nil }
            let t = CostModel.transferSeconds(bytes: Double(bytes), from: source, to: destination)
            return .init(what: what, from: source.isHost ? "host" : source.identifier,
                         to: destination.isHost ? "host" : destination.identifier, bytes: bytes, ms: t * 1e3)
        }
        var transfers: [ExecutionPlan.Transfer?] = []
        var perBatch: [ExecutionPlan.Transfer?] = []  // the transfers also paid once features are cached
        transfers.append(transfer("input '\(a.graph.input.name)'", bytes: a.inputBytes, from: nil, to: a.hasPrefix ? prefix : tail))
        if let loss = a.loss {
            perBatch.append(transfer("target '\(loss.targetFeature.name)'", bytes: a.targetBytes, from: nil, to: tail))
            perBatch.append(transfer("loss and accuracy", bytes: 8, from: tail, to: nil))
        } else if let last = a.layers.last {
            transfers.append(transfer("output '\(last.output)'", bytes: a.outputBytes, from: a.hasTail ? tail : prefix, to: nil))
        }
        if prefix != tail {
            for (blob, bytes) in a.boundary {
                transfers.append(transfer("'\(blob)' (prefix to tail)", bytes: bytes, from: prefix, to: tail))
            }
        }
        let all = (transfers + perBatch).compactMap { $0 }
        let total = compute + all.reduce(0) { $0 + $1.ms } * 1e-3

        var cached: Double? = nil
        if a.hasPrefix && a.hasTail && a.loss != nil {
            let features = a.boundary.compactMap { transfer("", bytes: $0.bytes, from: nil, to: tail) }
            cached = tailCompute + (features + perBatch.compactMap { $0 }).reduce(0) { $0 + $1.ms } * 1e-3
        }

        let tailMemory = a.tailMemory + a.boundaryBytes
        let memory = prefix == tail ? a.prefixMemory + a.tailMemory : max(a.prefixMemory, tailMemory)
        let fits = prefix == tail
            ? fitsIn(prefix, a.prefixMemory + a.tailMemory, options)
            : fitsIn(prefix, a.prefixMemory, options) && fitsIn(tail, tailMemory, options)
        var evaluation = Evaluation(prefix: prefix, tail: tail, steps: steps, transfers: all, totalSeconds: total,
                                    cachedSeconds: cached, memoryBytes: memory, fits: fits)
        // Set-up: each device makes the programs of the layers it runs (both parts when it runs both).
        typealias Part = (device: DeviceProfile, segments: Set<ExecutionPlan.Segment>)
        let both: Set<ExecutionPlan.Segment> = [.prefix, .tail], prefixOnly: Set<ExecutionPlan.Segment> = [.prefix]
        let tailOnly: Set<ExecutionPlan.Segment> = [.tail]
        let parts: [Part] = prefix == tail ? [(prefix, both)] : [(prefix, prefixOnly), (tail, tailOnly)]
        evaluation.setup = parts.compactMap { device, segments in
            guard !device.isHost else { return nil }
            let programs = a.programCount(segments)
            let cachedPrograms = min(programs, options.cachedPrograms[device.identifier] ?? 0)
            return SetupEstimate(device: device.identifier, programs: programs, cachedPrograms: cachedPrograms,
                                 ms: device.setupSeconds(programs: programs, cached: cachedPrograms) * 1e3)
        }
        if let job = options.job {
            let batches = Double(job.batchesPerPass(batchSize: a.batch))
            let later = Double(job.passes - 1) * batches * (cached ?? total)
            evaluation.jobSeconds = evaluation.setupSeconds + batches * total + later
        }
        return evaluation
    }

    static func fitsIn(_ d: DeviceProfile, _ bytes: UInt64, _ options: Options) -> Bool {
        Double(bytes) <= Double(d.memoryBytes) * options.memoryHeadroom
    }
}
