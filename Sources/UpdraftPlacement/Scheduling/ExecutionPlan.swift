import Foundation
import UpdraftCore

/// Where a training batch runs: every layer's device and estimated times, the tensors copied between
/// devices, and the total per batch. The executor runs the frozen prefix (forward only) on
/// `prefixDevice` and the trainable tail (forward, backward, optimizer steps) on `tailDevice`; they
/// are the same device unless splitting paid. `Scheduler.backends(for:)` opens the two backends.
public struct ExecutionPlan: Hashable, Codable, Sendable {
    /// Which part of the network a step belongs to: the frozen `prefix` (forward only) or the trainable `tail`.
    public enum Segment: String, Codable, Sendable { case prefix, tail }

    /// One layer (or the loss) and where it runs.
    public struct LayerStep: Hashable, Codable, Sendable {
        /// The layer's name in the model (or "loss").
        public var name: String
        /// The op (`LayerOp.name`), or "loss(<kind>)" for the loss.
        public var type: String
        /// Whether the layer runs in the frozen prefix or the trainable tail.
        public var segment: Segment
        /// `DeviceProfile.identifier` of the device it runs on.
        public var device: String
        /// Estimated forward time per batch, in milliseconds.
        public var forwardMs: Double
        /// Gradients (and the optimizer step for updatable layers); nil for layers that need none.
        public var backwardMs: Double?
    }

    /// A tensor copied per batch between host memory and a device, or between devices.
    public struct Transfer: Hashable, Codable, Sendable {
        /// What is copied, for the table: "input 'image'", "target '...'", "loss and accuracy", a blob passed from prefix to tail.
        public var what: String
        /// "host" or a `DeviceProfile.identifier`.
        public var from: String
        /// "host" or a `DeviceProfile.identifier`: where the tensor goes.
        public var to: String
        /// Size of the copy per batch, in bytes.
        public var bytes: Int
        /// Estimated time of the copy per batch, in milliseconds.
        public var ms: Double
    }

    /// A placement the scheduler weighed.
    public struct Candidate: Hashable, Codable, Sendable {
        /// `DeviceProfile.identifier` of the device for the frozen prefix.
        public var prefixDevice: String
        /// `DeviceProfile.identifier` of the device for the trainable tail.
        public var tailDevice: String
        /// Estimated time per batch with this placement, in milliseconds, transfers included.
        public var totalMs: Double
        /// Whether the estimated memory fits on the device(s).
        public var fits: Bool
        /// The devices' set-up (contexts and programs) before the first batch, in milliseconds.
        public var setupMs: Double? = nil
        /// The whole job, set-up included, in milliseconds; nil when the plan was made without a job.
        public var jobMs: Double? = nil
        /// Whether prefix and tail run on different devices.
        public var isSplit: Bool { prefixDevice != tailDevice }
    }

    /// The mini-batch size the plan was estimated for.
    public var batchSize: Int
    /// The compute units the scheduler chose within (as `UpdateConfiguration.placement.computeUnits`).
    public var computeUnits: ComputeUnits
    /// The device that runs the frozen prefix (forward only).
    public var prefixDevice: DeviceProfile
    /// The device that runs the trainable tail (forward, backward, optimizer steps).
    public var tailDevice: DeviceProfile
    /// Layers in execution order (topological), then the loss.
    public var layers: [LayerStep]
    /// Tensors copied per batch between memories, in execution order.
    public var transfers: [Transfer]
    /// Everything per batch: forward, backward and optimizer steps, loss, transfers.
    public var totalMs: Double
    /// Per batch once the feature cache holds the prefix's outputs (the executor's default): the
    /// tail, the cached features uploaded to it, targets and loss. Nil without a prefix or a tail.
    public var cachedTotalMs: Double?
    /// Every placement weighed, fastest first.
    public var candidates: [Candidate]
    /// Remarks on the choice (a pinned device, memory that does not fit, an empty tail).
    public var notes: [String]
    /// Set when every mini-batch is split across several devices; the layers and transfers above
    /// then describe the single-device placement it was weighed against.
    public var dataParallel: DataParallelPlan? = nil
    /// What each OpenCL device of the placement pays once before the first batch (empty on the host).
    public var setup: [SetupEstimate]? = nil
    /// The job the plan was made for (`Scheduler.Options.job`), if any.
    public var job: Scheduler.Job? = nil
    /// The whole job's estimate, set-up included, in milliseconds; nil without a job.
    public var jobMs: Double? = nil

    /// The set-up before the first batch, in milliseconds (0 on the host).
    public var setupMs: Double { (setup ?? []).reduce(0) { $0 + $1.ms } }

    /// Whether prefix and tail run on different devices.
    public var isSplit: Bool { prefixDevice != tailDevice }
    /// How many of `layers` run in the frozen prefix.
    public var prefixLayerCount: Int { layers.filter { $0.segment == .prefix }.count }
    /// The estimated time of all `transfers` per batch, in milliseconds.
    public var transferMs: Double { transfers.reduce(0) { $0 + $1.ms } }
    /// The devices used, prefix first (or the data-parallel replicas), without repeats.
    public var devices: [DeviceProfile] {
        if let dp = dataParallel { return dp.devices }
        return isSplit ? [prefixDevice, tailDevice] : [tailDevice]
    }
    /// One line saying where the plan runs ("all on ...", "prefix on ..., tail on ...", or the data-parallel replicas).
    public var summary: String {
        if let dp = dataParallel { return dp.summary }
        return isSplit ? "prefix on \(prefixDevice.label), tail on \(tailDevice.label)" : "all on \(tailDevice.label)"
    }

    // MARK: Rendering

    /// The plan as a table for the terminal.
    public func text() -> String {
        var s = "Plan for batch \(batchSize), compute units \(computeUnits.rawValue): \(summary)\n"
        for n in notes { s += "note: \(n)\n" }
        s += "\n"
        var rows = [["layer", "type", "part", "device", "forward ms", "backward ms"]]
        for l in layers {
            rows.append([l.name, l.type, l.segment.rawValue, l.device, Self.ms(l.forwardMs), l.backwardMs.map(Self.ms) ?? "-"])
        }
        let forward = layers.reduce(0) { $0 + $1.forwardMs }, backward = layers.reduce(0) { $0 + ($1.backwardMs ?? 0) }
        rows.append(["sum", "", "", "", Self.ms(forward), Self.ms(backward)])
        s += formatTable(rows, rightAligned: [4, 5])
        s += "\nTransfers per batch:\n"
        if transfers.isEmpty {
            s += "  none (everything stays in one memory)\n"
        } else {
            var t = [["what", "from", "to", "bytes", "ms"]]
            for x in transfers { t.append([x.what, x.from, x.to, formatBytes(UInt64(max(0, x.bytes))), Self.ms(x.ms)]) }
            s += formatTable(t, rightAligned: [3, 4])
        }
        s += "\nTotal per batch: \(Self.ms(totalMs)) ms (forward \(Self.ms(forward)), backward \(Self.ms(backward)), "
            + "transfers \(Self.ms(transferMs)))\n"
        s += "Set-up before the first batch: " + setupText + "\n"
        if let job, let jobMs { s += "Whole job (\(job)): \(Self.ms(jobMs)) ms, set-up included\n" }
        if candidates.count > 1 {
            s += "\nPlacements weighed:\n"
            var c = [["prefix", "tail", "ms per batch", "set-up ms"] + (jobMs == nil ? [] : ["job ms"]) + ["memory"]]
            for x in candidates {
                c.append([x.prefixDevice, x.tailDevice, Self.ms(x.totalMs), Self.ms(x.setupMs ?? 0)]
                         + (jobMs == nil ? [] : [x.jobMs.map(Self.ms) ?? "-"]) + [x.fits ? "fits" : "too big"])
            }
            s += formatTable(c, rightAligned: jobMs == nil ? [2, 3] : [2, 3, 4])
        }
        s += "\nDevices:\n"
        for d in devices { s += "  \(d)\n" }
        return s
    }

    /// "none (the host CPU)" or, per OpenCL device, its milliseconds and programs built and cached.
    var setupText: String {
        guard let setup, !setup.isEmpty else { return "none (the host CPU)" }
        return setup.map {
            "\($0.device) \(Self.ms($0.ms)) ms (context, \($0.programs) programs: \($0.programs - $0.cachedPrograms) to build, "
                + "\($0.cachedPrograms) from the program cache)"
        }.joined(separator: "; ")
    }

    /// The plan as a JSON object (what `json()` prints), for callers that add keys of their own.
    public func jsonObject() throws -> [String: Any] {
        var object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(self)) as? [String: Any] ?? [:]
        object["isSplit"] = isSplit
        object["transferMs"] = transferMs
        object["setupMs"] = setupMs
        return object
    }

    /// The plan as pretty JSON with sorted keys.
    public func json() throws -> String {
        let data = try JSONSerialization.data(withJSONObject: try jsonObject(), options: [.prettyPrinted, .sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    /// Milliseconds with about three significant digits.
    static func ms(_ v: Double) -> String {
        if v >= 100 { return String(format: "%.0f", v) }
        if v >= 10 { return String(format: "%.1f", v) }
        if v >= 1 { return String(format: "%.2f", v) }
        return String(format: "%.3f", v)
    }
}
