import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftPlacement
import UpdraftData

/// Memory admission for the update tasks of one process (issue 26, item 1): tasks started at once on
/// one device share what it has. Before a training session makes its executors it reserves its planned
/// footprint (`MemoryPreflight.footprint` per replica, the scheduler's estimate) on every memory it
/// uses — a GPU's own memory, or host memory for the CPU backends and PoCL — and gives it back when
/// it ends. A task that does not fit beside the others waits, in arrival order, until they release
/// enough; one that could never fit, even alone, fails with an `UpdraftError` naming its need and the
/// memory's capacity. The others never see it. The feature cache is not reserved: it keeps to budgets
/// of its own, and a device tier that cannot grow moves to host memory.
final class DeviceMemoryLedger: @unchecked Sendable {
    static let shared = DeviceMemoryLedger()

    /// One memory the ledger counts: "host" (host memory: the CPU backends and PoCL), or a device's own.
    struct Memory: Hashable, Sendable {
        var key: String
        /// For messages: "host memory", "opencl:... memory".
        var name: String
        /// What the whole memory holds (before `MemoryPreflight.headroom`), when not overridden.
        var bytes: UInt64

        static func == (a: Memory, b: Memory) -> Bool { a.key == b.key }
        func hash(into h: inout Hasher) { h.combine(key) }
    }

    /// Host memory, as available now.
    static var host: Memory { Memory(key: "host", name: "host memory", bytes: HostMemory.available()) }

    /// The memory `backend`'s buffers take.
    static func memory(of backend: Backend) -> Memory {
        switch backend.memory {
        case .host:
            return host
        case let .device(bytes, _):
            let key = (backend.innermost as? OpenCLBackend).map { "opencl:\($0.device.index)" } ?? backend.name
            return Memory(key: key, name: "\(backend.name) memory", bytes: bytes)
        }
    }

    private let condition = NSCondition()
    private var reserved: [String: UInt64] = [:]
    private var capacities: [String: UInt64] = [:]
    private var overrides: [String: UInt64] = [:]
    /// Waiting reservations by ticket, admitted in ticket order.
    private var waiting: [Int] = []
    private var nextTicket = 0
    private var admittedNow = 0
    private var counters = (peakAdmitted: 0, waited: 0)
    private var peaks: [String: UInt64] = [:]

    /// Tests: admit at most `bytes` on the memory `key` ("host", or "opencl:<device index>"), headroom
    /// included, instead of what it has; nil goes back to the device's. The peaks restart.
    func overrideCapacity(_ bytes: UInt64?, for key: String) {
        condition.lock(); defer { condition.unlock() }
        overrides[key] = bytes
        counters = (admittedNow, 0)
        peaks = reserved
        condition.broadcast()
    }

    /// Tests and reports: the most reservations held at once, how many had to wait, and the most
    /// bytes held at once per memory, since the last `overrideCapacity`.
    var statistics: (peakAdmitted: Int, waited: Int, peakReserved: [String: UInt64]) {
        condition.lock(); defer { condition.unlock() }
        return (counters.peakAdmitted, counters.waited, peaks)
    }

    /// Bytes admitted on `memory` in all: the override, else the memory's size less the preflight's
    /// headroom (host memory as available when first counted).
    private func capacity(_ memory: Memory) -> UInt64 {
        if let o = overrides[memory.key] { return o }
        if let known = capacities[memory.key] { return known }
        let c = UInt64(Double(memory.bytes) * MemoryPreflight.headroom)
        capacities[memory.key] = c
        return c
    }

    /// Reserves `need` (bytes per memory), waiting while it does not fit beside what others hold and
    /// while an earlier reservation waits. Throws at once when a need exceeds its memory's capacity,
    /// and when `stop` says so while waiting (`UpdraftError(.cancelled)`). `waits` is called once, with
    /// a line saying what it waits for, when it has to.
    func admit(_ need: [Memory: UInt64], what: String, stop: () -> Bool, waits: (String) -> Void) throws -> MemoryAdmission {
        let need = need.filter { $0.value > 0 }
        condition.lock()
        defer { condition.unlock() }
        for (memory, bytes) in need.sorted(by: { $0.key.key < $1.key.key }) where bytes > capacity(memory) {
            let c = capacity(memory)
            throw UpdraftError(.device,
                "\(what) needs an estimated \(formatBytes(bytes)) of \(memory.name), more than the \(formatBytes(c)) it admits for all tasks at once, so it can never start",
                hint: "pass a smaller --batch-size (MLUpdateTask: a smaller miniBatchSize), or train on a device with more memory")
        }
        let ticket = nextTicket
        nextTicket += 1
        waiting.append(ticket)
        defer { waiting.removeAll { $0 == ticket } }
        func fits() -> Bool { need.allSatisfy { reserved[$0.key.key, default: 0] + $0.value <= capacity($0.key) } }
        var said = false
        while waiting.first != ticket || !fits() {
            if stop() { throw UpdraftError(.cancelled, "\(what) was cancelled while waiting for memory") }
            if !said {
                said = true
                counters.waited += 1
                let short = need.first { reserved[$0.key.key, default: 0] + $0.value > capacity($0.key) } ?? need.first!
                waits("\(what) waits for \(formatBytes(short.value)) of \(short.key.name): the tasks running hold "
                      + "\(formatBytes(reserved[short.key.key, default: 0])) of the \(formatBytes(capacity(short.key))) admitted")
            }
            _ = condition.wait(until: Date().addingTimeInterval(0.05))
        }
        for (memory, bytes) in need {
            reserved[memory.key, default: 0] += bytes
            peaks[memory.key] = max(peaks[memory.key, default: 0], reserved[memory.key]!)
        }
        admittedNow += 1
        counters.peakAdmitted = max(counters.peakAdmitted, admittedNow)
        // The next in line may fit too.
        condition.broadcast()
        return MemoryAdmission(ledger: self, need: Dictionary(uniqueKeysWithValues: need.map { ($0.key.key, $0.value) }))
    }

    fileprivate func release(_ need: [String: UInt64]) {
        condition.lock(); defer { condition.unlock() }
        for (key, bytes) in need { reserved[key, default: 0] -= min(bytes, reserved[key, default: 0]) }
        admittedNow -= 1
        condition.broadcast()
    }
}

/// Memory a task holds in the ledger, given back by `release()` (once) or when it goes.
final class MemoryAdmission {
    private let ledger: DeviceMemoryLedger
    private var need: [String: UInt64]?

    fileprivate init(ledger: DeviceMemoryLedger, need: [String: UInt64]) {
        self.ledger = ledger
        self.need = need
    }

    func release() {
        guard let need else { return }
        self.need = nil
        ledger.release(need)
    }

    deinit { release() }
}

extension TrainingSession {
    /// A run's replicas as its configuration plans them: the backends and each one's slice of a mini-batch.
    typealias PlannedReplica = (prefix: Backend, tail: Backend, batch: Int)

    static func plannedReplicas(batchSize: Int, configuration config: UpdateConfiguration) -> [PlannedReplica] {
        if let dp = config.placement.dataParallel, !dp.replicas.isEmpty {
            let slices = DataParallelism.sliceSizes(count: batchSize, shares: dp.shares ?? dp.replicas.map { _ in 1 })
            return zip(dp.replicas, slices).map { ($0, $0, $1) }
        }
        let (prefix, tail) = config.placement.backends ?? (ReferenceBackend(), ReferenceBackend())
        return [(prefix, tail, batchSize)]
    }

    /// Throws the preflight's named error when a replica's slice of a mini-batch does not fit its memory.
    static func preflight(_ replicas: [PlannedReplica], graph: NetworkGraph, halfPrecisionPrefix: Bool) throws {
        for r in replicas where r.batch > 0 {
            try MemoryPreflight.check(graph: graph, batchSize: r.batch, work: .training, prefix: r.prefix, tail: r.tail,
                                      halfPrecisionPrefix: halfPrecisionPrefix)
        }
    }

    /// The memory the replicas plan to hold, per memory: each one's training footprint for its slice
    /// (`MemoryPreflight.footprint`: activations, gradients, optimizer state, and the host's copy of the
    /// batch and state).
    static func plannedMemory(_ replicas: [PlannedReplica], graph: NetworkGraph,
                              halfPrecisionPrefix: Bool) throws -> [DeviceMemoryLedger.Memory: UInt64] {
        var need: [DeviceMemoryLedger.Memory: UInt64] = [:]
        for r in replicas where r.batch > 0 {
            let f = try MemoryPreflight.footprint(graph: graph, batch: r.batch, work: .training, prefix: r.prefix, tail: r.tail,
                                                  halfPrecisionPrefix: halfPrecisionPrefix)
            // The host part already counts what host-memory backends hold.
            need[DeviceMemoryLedger.host, default: 0] += f.host
            for (backend, bytes) in [(r.prefix, f.prefix), (r.tail, f.tail)] {
                if case .device = backend.memory { need[DeviceMemoryLedger.memory(of: backend), default: 0] += bytes }
            }
        }
        return need
    }
}
