import Foundation
import UpdraftCore
import UpdraftModel

/// Whether training may split each mini-batch across several devices (`DataParallelism`).
public enum DataParallelMode: String, CaseIterable, Codable, Sendable {
    /// When more than one capable device is allowed and the estimate says it pays.
    case auto
    /// Whenever more than one device is allowed, paying or not (tests, measurements).
    case on
    /// Never.
    case off

    /// The environment variable that sets the mode when no option does: auto, on or off.
    public static let environmentVariable = "UPDRAFT_DATA_PARALLEL"

    /// Parses "auto", "on"/"1"/"true", "off"/"0"/"false" in any case.
    public init(parsing text: String) throws {
        switch text.lowercased() {
        case "auto", "automatic": self = .auto
        case "on", "1", "true", "yes": self = .on
        case "off", "0", "false", "no": self = .off
        default:
            throw UpdraftError(.invalidArgument, "unknown data-parallel mode '\(text)'", hint: "use auto, on or off")
        }
    }

    /// The option's value if given, else the environment's, else `auto`.
    public static func resolve(option: String?, environment: [String: String]) throws -> DataParallelMode {
        if let option { return try DataParallelMode(parsing: option) }
        return try resolve(nil, environment: environment)
    }

    /// `mode` when given (typed: never spelled out and parsed again), else the environment's, else `auto`.
    public static func resolve(_ mode: DataParallelMode?, environment: [String: String]) throws -> DataParallelMode {
        if let mode { return mode }
        if let value = environment[environmentVariable], !value.isEmpty {
            do { return try DataParallelMode(parsing: value) } catch {
                throw UpdraftError(.invalidArgument, "\(environmentVariable)=\(value) is not a data-parallel mode",
                                   hint: "set it to auto, on or off")
            }
        }
        return .auto
    }
}

extension ExecutionPlan {
    /// Training on several devices at once, each taking a slice of every mini-batch.
    public struct DataParallelPlan: Hashable, Codable, Sendable {
        /// The replicas' devices, the primary (the fastest) first.
        public var devices: [DeviceProfile]
        /// Examples of each mini-batch per device.
        public var slices: [Int]
        /// The slowest replica's step plus the gradient exchange, per batch (with the feature cache
        /// when the plan has one, as `Scheduler` compares them).
        public var totalMs: Double
        /// Gradients down to the host, combined, and back up to every replica.
        public var exchangeMs: Double
        /// Whether every replica's share fits its memory.
        public var fits: Bool

        /// "data parallel on <device> (<examples>) + ...": each replica with its slice of a mini-batch.
        public var summary: String {
            "data parallel on " + zip(devices, slices).map { "\($0.label) (\($1))" }.joined(separator: " + ")
        }
    }
}

extension Scheduler {
    /// The best data-parallel plan over the allowed devices, or nil with fewer than two candidates.
    ///
    /// Devices are ranked by how fast each alone trains a batch; the k fastest (k = 2, 3, …) share
    /// every batch in proportion to their speed, each at least one example. A replica's time is its own plan at its slice size;
    /// the step takes the slowest replica's time plus the exchange: each replica's gradients down to
    /// the host and the combined gradients back up (nothing for the host backend), and the host's
    /// pass over them. In `auto` mode the replicas are OpenCL devices: the host's cores stay free to
    /// feed them (load data, launch kernels, combine gradients), and OpenCL CPU devices such as PoCL,
    /// which run on those same cores, count once. `on` takes every allowed device, the host too.
    static func dataParallelPlan(graph: NetworkGraph, batchSize: Int, devices allowed: [DeviceProfile],
                                 mode: DataParallelMode, options: Options) throws -> ExecutionPlan.DataParallelPlan? {
        guard mode != .off, batchSize >= 2, allowed.count >= 2 else { return nil }
        let full = try GraphAnalysis(graph: graph, batch: batchSize)
        guard full.loss != nil, full.hasTail else { return nil }
        func steady(_ e: Evaluation) -> Double { e.cachedSeconds ?? e.totalSeconds }
        var ranked = allowed.map { d in (device: d, seconds: steady(evaluate(full, prefix: d, tail: d, options: options))) }
            .sorted { $0.seconds < $1.seconds }
        if mode == .auto {
            var sawCPU = false
            ranked = ranked.filter { entry in
                guard !entry.device.isHost else { return false }
                guard entry.device.kind == .cpu else { return true }
                defer { sawCPU = true }
                return !sawCPU
            }
        }
        guard ranked.count >= 2 else { return nil }

        let gradientBytes = Double(graph.updatableLayers.reduce(0) { $0 + $1.parameterCount } * 4)
        let hostBandwidth = (allowed.first(where: \.isHost)?.bandwidthGBps ?? 10) * 1e9
        var analyses: [Int: GraphAnalysis] = [batchSize: full]
        func analysis(_ n: Int) throws -> GraphAnalysis {
            if let a = analyses[n] { return a }
            let a = try GraphAnalysis(graph: graph, batch: n)
            analyses[n] = a
            return a
        }
        var best: ExecutionPlan.DataParallelPlan?
        for k in 2...min(ranked.count, batchSize) {
            let chosen = Array(ranked.prefix(k))
            var slices = DataParallelMode.sliceSizes(count: batchSize, shares: chosen.map { 1 / max($0.seconds, 1e-12) })
            // Every replica takes at least one example (a slower one then decides the time, and the
            // estimate says whether that pays).
            while let empty = slices.firstIndex(of: 0), let largest = slices.indices.max(by: { slices[$0] < slices[$1] }) {
                slices[largest] -= 1
                slices[empty] += 1
            }
            var slowest = 0.0, fits = true, exchange = 0.0
            for (entry, n) in zip(chosen, slices) {
                let e = evaluate(try analysis(n), prefix: entry.device, tail: entry.device, options: options)
                slowest = max(slowest, steady(e))
                fits = fits && e.fits
                if !entry.device.isHost {
                    exchange += 2 * CostModel.transferSeconds(bytes: gradientBytes, from: entry.device, to: full.hostMemory)
                }
            }
            exchange += Double(k + 1) * gradientBytes * 2 / hostBandwidth
            let plan = ExecutionPlan.DataParallelPlan(devices: chosen.map(\.device), slices: slices,
                                                      totalMs: (slowest + exchange) * 1e3, exchangeMs: exchange * 1e3, fits: fits)
            if let b = best, (b.fits ? 0 : 1, b.totalMs) <= (plan.fits ? 0 : 1, plan.totalMs) { continue }
            best = plan
        }
        return best
    }

    /// Adds the data-parallel choice to a single-device plan: taken in `on` mode, or in `auto`
    /// mode when it fits and beats the plan by `minimumSplitGain`; noted either way.
    static func considerDataParallel(_ plan: inout ExecutionPlan, graph: NetworkGraph, devices allowed: [DeviceProfile],
                                     options: Options) throws {
        guard let dp = try dataParallelPlan(graph: graph, batchSize: plan.batchSize, devices: allowed,
                                            mode: options.dataParallel, options: options) else {
            if options.dataParallel == .on {
                plan.notes.append("data parallelism was asked for, but fewer than two devices are allowed")
            }
            return
        }
        let single = plan.cachedTotalMs ?? plan.totalMs
        let pays = dp.fits && dp.totalMs < single * (1 - options.minimumSplitGain)
        let estimate = "about \(ExecutionPlan.ms(dp.totalMs)) ms per batch (\(ExecutionPlan.ms(dp.exchangeMs)) ms of it "
            + "exchanging gradients) against \(ExecutionPlan.ms(single)) ms on one device"
        if options.dataParallel == .on || pays {
            plan.dataParallel = dp
            plan.notes.append("\(dp.summary): \(estimate)\(options.dataParallel == .on && !pays ? " (forced)" : "")")
        } else {
            plan.notes.append("not data parallel: \(dp.summary) would take \(estimate)")
        }
    }
}

extension DataParallelMode {
    /// Slice sizes for a batch of `count` examples split by `shares` (largest remainder, so the
    /// sizes add up to `count`; a replica whose share rounds to nothing gets an empty slice but still
    /// applies the update).
    public static func sliceSizes(count: Int, shares: [Double]) -> [Int] {
        guard !shares.isEmpty else { return [] }
        let clean = shares.map { $0.isFinite && $0 > 0 ? $0 : 0 }
        let total = clean.reduce(0, +)
        let weights = total > 0 ? clean.map { $0 / total } : clean.map { _ in 1 / Double(clean.count) }
        let exact = weights.map { $0 * Double(count) }
        var sizes = exact.map { Int($0.rounded(.down)) }
        var left = count - sizes.reduce(0, +)
        // Largest remainders first; ties to the earlier replica.
        let order = exact.indices.sorted { (exact[$0] - Double(sizes[$0]), -$0) > (exact[$1] - Double(sizes[$1]), -$1) }
        var k = 0
        while left > 0 { sizes[order[k % order.count]] += 1; left -= 1; k += 1 }
        return sizes
    }
}
