import Foundation
import UpdraftBackends
import UpdraftCore
import UpdraftData

/// Keeps the frozen prefix's outputs (the tail's inputs, one row per boundary blob) per example and
/// augmentation variant, so that epochs after the first run only the trainable tail.
///
/// Two tiers. The **device tier** lives on the backend that runs the tail, in arenas of rows that a
/// batch is gathered from with one `copyRows` per arena and blob: no host round trip. Past its budget
/// (half a GPU's memory by default) the **host tier** keeps rows as host arrays, uploaded row by row
/// when a batch needs them. Past both budgets, examples are simply recomputed. On a backend whose
/// buffers are host memory (the CPU backends, PoCL) the device tier *is* host memory, so both tiers
/// share the host budget.
///
/// The device tier belongs to one backend: `bind(to:)` drops it when training moves elsewhere (a
/// fallback after a device failure, or data-parallel replicas, which use the host tier only); its
/// examples are then recomputed once. Safe to use from several threads.
///
/// With `halfPrecision` both tiers keep rows as IEEE halves (`copyRows(..., toHalf:)`), half the
/// bytes, and batches get them back as floats: the tail still computes in fp32. A step that computes
/// an example's features reads them back rounded once the cache keeps them, so the tail sees the same
/// features for it in every epoch, the first included (an example past both budgets gets fresh fp32
/// features in every epoch).
final class FeatureCache {
    struct Key: Hashable {
        /// Which data set: training or validation.
        enum DataSet: Hashable { case training, validation }
        var set: DataSet
        var index: Int
        var variant: Int
    }

    /// Where an example's rows are.
    enum Location {
        /// Slot `slot` of `tier`'s arenas.
        case device(tier: DeviceTier, slot: Int)
        /// Host rows, one per boundary blob.
        case host([[Float]])
    }

    /// Boundary blobs and the floats per example of each.
    let blobs: [String]
    let rowLengths: [Int]
    /// Rows kept as halves (2 bytes a value) instead of floats.
    let halfPrecision: Bool
    var rowBytes: Int { rowLengths.reduce(0, +) * (halfPrecision ? 2 : 4) }
    let hostBudgetBytes: Int
    /// Nil: automatic (half of a GPU's memory; the host budget on host-memory backends). 0: no device tier.
    let deviceBudgetBytes: Int?
    /// How many distinct rows training and validation can ask for (sizes the first arena).
    let expectedEntries: Int

    private let lock = NSLock()
    private var host: [Key: [[Float]]] = [:]
    /// The host tier in half precision (instead of `host`).
    private var hostHalf: [Key: [[Float16]]] = [:]
    private(set) var hostBytes = 0
    private(set) var tier: DeviceTier?
    private(set) var hits = 0
    private(set) var misses = 0
    /// Device-tier entries lost because training moved to another backend.
    private(set) var dropped = 0
    /// Backends whose device tier failed: they get no other.
    private var refused = Set<ObjectIdentifier>()
    /// Told once per failed device tier (training passes its one-line warnings on).
    var warn: ((String) -> Void)?

    init(blobs: [String], rowLengths: [Int], hostBudgetBytes: Int, deviceBudgetBytes: Int?, expectedEntries: Int,
         halfPrecision: Bool = false) {
        self.blobs = blobs
        self.halfPrecision = halfPrecision
        self.rowLengths = rowLengths
        self.hostBudgetBytes = max(0, hostBudgetBytes)
        self.deviceBudgetBytes = deviceBudgetBytes.map { max(0, $0) }
        self.expectedEntries = max(1, expectedEntries)
    }

    /// Uses `backend`'s memory for the device tier from now on (nil: no device tier). A tier on
    /// another backend is dropped with its entries.
    func bind(to backend: Backend?) {
        lock.lock(); defer { lock.unlock() }
        if let t = tier, t.backend === backend { return }
        if let t = tier { dropped += t.slots.count; tier = nil }
        guard let backend, !refused.contains(ObjectIdentifier(backend)) else { return }
        let sharesHost = backend.memory == .host
        let budget: Int
        switch (deviceBudgetBytes, backend.memory) {
        case let (explicit?, _): budget = explicit
        case (nil, .host): budget = hostBudgetBytes
        case let (nil, .device(bytes, _)): budget = Int(clamping: bytes / 2)
        }
        guard budget >= rowBytes, rowBytes > 0 else { return }
        tier = DeviceTier(backend: backend, rowLengths: rowLengths, budgetBytes: budget, sharesHost: sharesHost,
                          expectedEntries: expectedEntries, halfPrecision: halfPrecision)
    }

    /// Where `key`'s rows are, or nil (counted as a miss, unless `counting` is off: a step reading
    /// back the rows it just stored is neither).
    func locate(_ key: Key, counting: Bool = true) -> Location? {
        lock.lock(); defer { lock.unlock() }
        let hit = counting ? 1 : 0
        if let t = tier, let slot = t.slots[key] { hits += hit; return .device(tier: t, slot: slot) }
        if let rows = host[key] { hits += hit; return .host(rows) }
        if let rows = hostHalf[key] { hits += hit; return .host(rows.map { $0.map(Float.init) }) }
        misses += hit
        return nil
    }

    /// Whether `key`'s rows are kept (no hit or miss counted).
    func holds(_ key: Key) -> Bool {
        lock.lock(); defer { lock.unlock() }
        return tier?.slots[key] != nil || host[key] != nil || hostHalf[key] != nil
    }

    /// Keeps the rows of `keys` from `computed` (per blob, row k is `keys[k]`'s, on `backend`): in
    /// the device tier while it has room and lives on `backend`, else in the host tier while it has
    /// room. Keys already kept are skipped.
    func store(_ keys: [Key], computed: [DeviceBuffer], on backend: Backend) throws {
        var warning: String?
        lock.lock()
        defer {
            lock.unlock()
            if let warning { warn?(warning) }
        }
        var forTier: [(key: Key, row: Int)] = [], forHost: [(key: Key, row: Int)] = []
        var planned = Set<Key>()
        var hostRoom = hostBudgetBytes - hostBytes - (tier?.sharesHost == true ? tier!.bytes : 0)
        for (row, key) in keys.enumerated()
        where !planned.contains(key) && tier?.slots[key] == nil && host[key] == nil && hostHalf[key] == nil {
            planned.insert(key)
            if let t = tier, t.backend === backend, t.hasRoom(for: forTier.count + 1, hostRoom: hostRoom) {
                forTier.append((key, row))
            } else if hostRoom >= rowBytes {
                forHost.append((key, row))
                hostRoom -= rowBytes
            }
        }
        if let t = tier, !forTier.isEmpty {
            do {
                try t.store(forTier, from: computed)
            } catch {
                // The device could not take the rows (an arena that ran out of memory on first use,
                // say): the tier goes, and this backend keeps features in host memory from now on. A
                // device that is really lost fails its next op (the download below) like any other.
                dropped += t.slots.count
                tier = nil
                refused.insert(ObjectIdentifier(t.backend))
                warning = "the feature cache cannot keep more features on \(t.backend.name) (\(firstLine(of: error))); "
                    + "keeping them in host memory"
                for e in forTier where hostRoom >= rowBytes {
                    forHost.append(e)
                    hostRoom -= rowBytes
                }
            }
        }
        guard !forHost.isEmpty else { return }
        let values = try computed.map { try backend.download($0) }
        for (key, row) in forHost {
            let rows = zip(values, rowLengths).map { v, n in Array(v[row * n..<(row + 1) * n]) }
            if halfPrecision { hostHalf[key] = rows.map { $0.map { Float16($0) } } } else { host[key] = rows }
            hostBytes += rowBytes
        }
    }

    var statistics: FeatureCacheStatistics {
        lock.lock(); defer { lock.unlock() }
        return FeatureCacheStatistics(deviceEntries: tier?.slots.count ?? 0, deviceBytes: tier?.bytes ?? 0,
                                      hostEntries: host.count + hostHalf.count, hostBytes: hostBytes, hits: hits, misses: misses,
                                      dropped: dropped, deviceName: tier?.backend.name, halfPrecision: halfPrecision)
    }
}

/// What a feature cache holds: entries and bytes per tier, and how often lookups found what they asked for.
public struct FeatureCacheStatistics: Sendable, Equatable {
    /// Examples (and flip variants) in device memory, and the bytes of the arenas holding them.
    public var deviceEntries = 0, deviceBytes = 0
    /// Examples kept in host memory past the device tier, and their bytes.
    public var hostEntries = 0, hostBytes = 0
    /// Lookups that found an example, and those that had to run the frozen layers.
    public var hits = 0, misses = 0
    /// Device-tier entries lost when training moved to another device (recomputed once).
    public var dropped = 0
    /// The backend the device tier lives on, if any.
    public var deviceName: String?
    /// Whether rows are kept in half precision (`UpdateConfiguration.featureCache.halfPrecision`).
    public var halfPrecision = false
}

/// The device tier: arenas of rows on one backend, one buffer per boundary blob per arena. Arenas
/// are allocated as rows arrive, each as large as allowed (the rows expected, the budget, the
/// device's largest buffer; 256 MiB per buffer in host memory), halved when an allocation fails;
/// slots are handed out in order and never freed (the frozen prefix's outputs never change).
/// A batch gathers with one `copyRows` per arena it touches and blob.
final class DeviceTier {
    struct Arena {
        /// The arena's first slot, its slot count, and its buffer per blob.
        var first: Int
        var count: Int
        var buffers: [DeviceBuffer]
    }

    let backend: Backend
    let rowLengths: [Int]
    let rowBytes: Int
    let budgetBytes: Int
    /// Whether the arenas are host memory (they then count against the host budget too).
    let sharesHost: Bool
    /// Slots a new arena asks for.
    let slotsPerArena: Int
    private(set) var arenas: [Arena] = []
    private(set) var slots: [FeatureCache.Key: Int] = [:]
    /// Bytes allocated in arenas.
    private(set) var bytes = 0
    /// Set when no arena could be allocated: the tier keeps what it has and takes no more.
    private(set) var isFull = false
    /// Rows kept as halves: arena buffers hold two values per float.
    let halfPrecision: Bool

    static let hostArenaBufferLimit = 256 << 20

    init(backend: Backend, rowLengths: [Int], budgetBytes: Int, sharesHost: Bool, expectedEntries: Int,
         halfPrecision: Bool = false) {
        self.backend = backend
        self.rowLengths = rowLengths
        self.halfPrecision = halfPrecision
        self.rowBytes = max(1, rowLengths.reduce(0, +) * (halfPrecision ? 2 : 4))
        self.budgetBytes = budgetBytes
        self.sharesHost = sharesHost
        let longest = max(1, rowLengths.max() ?? 1) * (halfPrecision ? 2 : 4)
        let bufferLimit: Int
        switch backend.memory {
        case .host: bufferLimit = Self.hostArenaBufferLimit
        case let .device(_, largestBuffer): bufferLimit = Int(clamping: largestBuffer)
        }
        slotsPerArena = max(1, min(bufferLimit / longest, budgetBytes / rowBytes, expectedEntries))
    }

    private var capacity: Int { arenas.last.map { $0.first + $0.count } ?? 0 }

    /// Whether `extra` more rows fit: in arenas already allocated, or in new ones within the budgets.
    func hasRoom(for extra: Int, hostRoom: Int) -> Bool {
        let needed = slots.count + extra
        if needed <= capacity { return true }
        if isFull { return false }
        let more = (needed - capacity + slotsPerArena - 1) / slotsPerArena * slotsPerArena * rowBytes
        return bytes + more <= budgetBytes && (!sharesHost || more <= hostRoom)
    }

    /// Adds an arena of as many slots as allowed, halving on allocation failure; false when not even
    /// one slot can be had (the tier is then full).
    private func grow() -> Bool {
        var size = min(slotsPerArena, (budgetBytes - bytes) / rowBytes)
        while size >= 1 {
            // Half rows: two values per float of the buffer.
            if let buffers = try? rowLengths.map({ try backend.makeBuffer(count: halfPrecision ? (size * $0 + 1) / 2 : size * $0) }) {
                arenas.append(Arena(first: capacity, count: size, buffers: buffers))
                bytes += size * rowBytes
                return true
            }
            size /= 2
        }
        isFull = true
        return false
    }

    /// The arena holding `slot`.
    private func arena(of slot: Int) -> Int {
        var lo = 0, hi = arenas.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if arenas[mid].first <= slot { lo = mid } else { hi = mid - 1 }
        }
        return lo
    }

    /// Copies row `row` of each `computed` buffer into a new slot for each key, one `copyRows` per
    /// arena and blob. The keys become visible only once their rows are in place.
    func store(_ entries: [(key: FeatureCache.Key, row: Int)], from computed: [DeviceBuffer]) throws {
        var placed: [(key: FeatureCache.Key, row: Int, slot: Int)] = []
        for (i, e) in entries.enumerated() {
            let slot = slots.count + i
            while slot >= capacity, grow() {}
            guard slot < capacity else { break }
            placed.append((e.key, e.row, slot))
        }
        for (a, group) in Dictionary(grouping: placed, by: { arena(of: $0.slot) }) {
            let arena = arenas[a]
            for (b, buffer) in arena.buffers.enumerated() {
                if halfPrecision {
                    try backend.copyRows(computed[b], rows: group.map(\.row), to: buffer,
                                         rows: group.map { $0.slot - arena.first }, rowLength: rowLengths[b], toHalf: true)
                } else {
                    try backend.copyRows(computed[b], rows: group.map(\.row), to: buffer,
                                         rows: group.map { $0.slot - arena.first }, rowLength: rowLengths[b])
                }
            }
        }
        for p in placed { slots[p.key] = p.slot }
    }

    /// Gathers the rows of `slots` into rows `positions` of `batch` (one buffer per blob).
    func gather(slots wanted: [Int], positions: [Int], into batch: [DeviceBuffer]) throws {
        let pairs = zip(wanted, positions).map { (slot: $0, position: $1) }
        for (a, group) in Dictionary(grouping: pairs, by: { arena(of: $0.slot) }) {
            let arena = arenas[a]
            for (b, buffer) in arena.buffers.enumerated() {
                if halfPrecision {
                    try backend.copyRows(buffer, rows: group.map { $0.slot - arena.first }, to: batch[b],
                                         rows: group.map(\.position), rowLength: rowLengths[b], toHalf: false)
                } else {
                    try backend.copyRows(buffer, rows: group.map { $0.slot - arena.first }, to: batch[b],
                                         rows: group.map(\.position), rowLength: rowLengths[b])
                }
            }
        }
    }
}
