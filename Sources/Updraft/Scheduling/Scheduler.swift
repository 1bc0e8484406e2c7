/// Chooses where a training batch runs, from each device's measured speed (`DeviceProfile`), each
/// layer's work (`CostModel`) and the cost of copying tensors between memories.
///
/// The graph has two parts the executor can place separately: the frozen prefix (the layers before
/// the first updatable layer in execution order, which need no gradient and run forward only) and
/// the trainable tail (everything from the first updatable layer on). The scheduler weighs every
/// allowed device for the whole model and every pair of devices for prefix and tail, and keeps the
/// model on one device unless a split is at least `Options.minimumSplitGain` faster. Small
/// workloads land on the host CPU by the same arithmetic: there, launch latency is what dominates.
public enum Scheduler {
    public struct Options: Hashable, Sendable {
        /// Fraction of the best single-device time a split must save to be chosen (0.1: 10 %).
        public var minimumSplitGain: Double = 0.1
        /// Share of a device's memory the plan may fill.
        public var memoryHeadroom: Double = 0.9
        public init(minimumSplitGain: Double = 0.1, memoryHeadroom: Double = 0.9) {
            self.minimumSplitGain = minimumSplitGain; self.memoryHeadroom = memoryHeadroom
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
        if analysis.prefixCount > 0 && analysis.prefixCount < graph.layers.count {
            for prefix in allowed { for tail in allowed where tail != prefix {
                evaluated.append(evaluate(analysis, prefix: prefix, tail: tail, options: options))
            } }
        }
        // Fastest first; ties keep the given order (single-device placements come first).
        let ranked = evaluated.enumerated().sorted {
            ($0.element.fits ? 0 : 1, $0.element.totalSeconds, $0.offset) < ($1.element.fits ? 0 : 1, $1.element.totalSeconds, $1.offset)
        }.map(\.element)

        var notes: [String] = []
        let singles = ranked.filter { !$0.isSplit }
        var chosen = singles[0]
        if let split = ranked.first(where: \.isSplit), split.fits || !chosen.fits,
           split.totalSeconds < chosen.totalSeconds * (1 - options.minimumSplitGain) {
            chosen = split
        }
        if !chosen.fits {
            notes.append("the estimated memory (\(formatBytes(chosen.memoryBytes))) exceeds every allowed device; "
                         + "a smaller --batch-size may be needed")
        }
        if analysis.prefixCount == graph.layers.count {
            notes.append("no updatable layer: every layer runs forward only")
        } else if graph.loss == nil {
            notes.append("the loss is not usable (\(graph.lossProblem?.message ?? "no loss layer")): no backward times")
        }
        return ExecutionPlan(
            batchSize: batchSize, computeUnits: computeUnits,
            prefixDevice: chosen.prefix, tailDevice: chosen.tail,
            layers: chosen.steps, transfers: chosen.transfers, totalMs: chosen.totalSeconds * 1e3,
            candidates: ranked.map {
                ExecutionPlan.Candidate(prefixDevice: $0.prefix.identifier, tailDevice: $0.tail.identifier,
                                        totalMs: $0.totalSeconds * 1e3, fits: $0.fits)
            },
            notes: notes)
    }

    // MARK: Evaluating one placement

    struct Evaluation {
        var prefix: DeviceProfile
        var tail: DeviceProfile
        var steps: [ExecutionPlan.LayerStep]
        var transfers: [ExecutionPlan.Transfer]
        var totalSeconds: Double
        var memoryBytes: UInt64
        var fits: Bool
        var isSplit: Bool { prefix != tail }
    }

    static func evaluate(_ a: GraphAnalysis, prefix: DeviceProfile, tail: DeviceProfile, options: Options) -> Evaluation {
        var steps: [ExecutionPlan.LayerStep] = []
        var total = 0.0
        for (i, layer) in a.graph.layers.enumerated() {
            let inPrefix = i < a.prefixCount
            let device = inPrefix ? prefix : tail
            let work = a.work[i]
            let forward = CostModel.seconds(work.forward, on: device)
            let backward: Double? = a.runsBackward[i]
                ? CostModel.seconds(work.backwardData + work.backwardWeights, on: device) : nil
            total += forward + (backward ?? 0)
            steps.append(.init(name: layer.name, type: layer.op.name, segment: inPrefix ? .prefix : .tail,
                               device: device.identifier, forwardMs: forward * 1e3, backwardMs: backward.map { $0 * 1e3 }))
        }
        if let loss = a.graph.loss, a.prefixCount < a.graph.layers.count {
            let t = CostModel.seconds(CostModel.lossWork(loss, batch: a.batch), on: tail)
            total += t
            steps.append(.init(name: loss.name, type: "loss(\(loss.kind.rawValue))", segment: .tail,
                               device: tail.identifier, forwardMs: t * 1e3, backwardMs: 0))
        }

        var transfers: [ExecutionPlan.Transfer] = []
        func move(_ what: String, bytes: Int, from: DeviceProfile?, to: DeviceProfile?) {
            // nil stands for host memory (the data loader's batch, the loss the trainer reads).
            let source = from ?? a.hostMemory, destination = to ?? a.hostMemory
            if source == destination || (source.isHost && destination.isHost) { return }
            let t = CostModel.transferSeconds(bytes: Double(bytes), from: source, to: destination)
            transfers.append(.init(what: what, from: source.isHost ? "host" : source.identifier,
                                   to: destination.isHost ? "host" : destination.identifier, bytes: bytes, ms: t * 1e3))
        }
        let inputReaders = Set(a.inputReaders.map { $0 < a.prefixCount ? prefix : tail })
        for device in inputReaders.sorted(by: { $0.identifier < $1.identifier }) {
            move("input '\(a.graph.input.name)'", bytes: a.inputBytes, from: nil, to: device)
        }
        if a.targetBytes > 0, let loss = a.graph.loss {
            move("target '\(loss.targetFeature.name)'", bytes: a.targetBytes, from: nil, to: tail)
        }
        if prefix != tail {
            for (blob, bytes) in a.boundary { move("'\(blob)' (prefix to tail)", bytes: bytes, from: prefix, to: tail) }
        }
        if a.graph.loss != nil && a.prefixCount < a.graph.layers.count {
            move("loss and accuracy", bytes: 8, from: tail, to: nil)
        } else if let last = a.graph.layers.last {
            move("output '\(last.output)'", bytes: a.outputBytes, from: a.prefixCount > 0 ? prefix : tail, to: nil)
        }
        total += transfers.reduce(0) { $0 + $1.ms } * 1e-3

        let tailMemory = a.tailMemory + a.boundaryBytes
        let memory = prefix == tail ? a.prefixMemory + a.tailMemory : max(a.prefixMemory, tailMemory)
        let fits = prefix == tail
            ? fitsIn(prefix, a.prefixMemory + a.tailMemory, options)
            : fitsIn(prefix, a.prefixMemory, options) && fitsIn(tail, tailMemory, options)
        return Evaluation(prefix: prefix, tail: tail, steps: steps, transfers: transfers, totalSeconds: total,
                          memoryBytes: memory, fits: fits)
    }

    static func fitsIn(_ d: DeviceProfile, _ bytes: UInt64, _ options: Options) -> Bool {
        Double(bytes) <= Double(d.memoryBytes) * options.memoryHeadroom
    }
}
