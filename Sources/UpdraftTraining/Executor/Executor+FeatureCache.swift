import UpdraftCore
import UpdraftBackends
import UpdraftLayers
import UpdraftData

/// Steps and evaluations on the feature cache: the boundary blobs of a batch are gathered from the
/// cache's tiers into batch buffers on the tail backend, the prefix runs only for examples the cache
/// does not hold (and its rows are stored), then only the tail runs.
/// A batch as the feature cache sees it: each position's key, where the cache holds it, and the
/// inputs of the distinct examples it does not hold (loaded on the calling thread; the prefix runs
/// on whichever executor takes the slice).
struct CachedSlice {
    var keys: [FeatureCache.Key]
    var locations: [FeatureCache.Key: FeatureCache.Location]
    /// Distinct keys the cache does not hold, in first-seen order.
    var missing: [FeatureCache.Key]
    /// The missing examples, in `missing` order (stacked in the executor's staging when uploaded).
    var missingExamples: [TrainingExample]?
    /// The missing examples' images as 8-bit samples, in `missing` order (instead of `missingExamples`).
    var missingPixels: PixelRows?

    init(keys: [FeatureCache.Key], cache: FeatureCache, example: (FeatureCache.Key) throws -> TrainingExample) throws {
        self.init(keys: keys, cache: cache)
        if !missing.isEmpty {
            missingExamples = try missing.map(example)
        }
    }

    /// The missing examples as staging rows: `pixels` gets their example indices, in `missing` order.
    init(keys: [FeatureCache.Key], cache: FeatureCache, pixels: ([Int]) throws -> PixelRows) throws {
        self.init(keys: keys, cache: cache)
        if !missing.isEmpty { missingPixels = try pixels(missing.map(\.index)) }
    }

    private init(keys: [FeatureCache.Key], cache: FeatureCache) {
        self.keys = keys
        locations = [:]
        missing = []
        var seen = Set<FeatureCache.Key>()
        for key in keys where seen.insert(key).inserted {
            if let l = cache.locate(key) { locations[key] = l } else { missing.append(key) }
        }
    }
}

extension Executor {
    /// `computeGradients` on a batch through the feature cache: only the tail runs for cached examples.
    func computeGradients(cached slice: CachedSlice, targets: [TrainingExample.Target], cache: FeatureCache) throws -> BatchResult {
        try runBatch(targets: targets, layers: training.tail, gradients: true) { try stageBoundary(slice, cache: cache, ws: $0) }
    }

    /// Loss and correct count of a batch through the feature cache (validation).
    func evaluate(cached slice: CachedSlice, targets: [TrainingExample.Target], cache: FeatureCache) throws -> BatchResult {
        try runBatch(targets: targets, layers: training.tail, gradients: false) { try stageBoundary(slice, cache: cache, ws: $0) }
    }

    /// Sets the workspace's boundary blobs for the slice's batch on the tail backend: rows from the
    /// device tier by `copyRows`, rows from the host tier by ranged uploads, and rows of missing
    /// examples from a prefix run on just those (whose rows the cache then keeps).
    private func stageBoundary(_ slice: CachedSlice, cache: FeatureCache, ws: Workspace) throws {
        let backend = tailBackend
        let n = slice.keys.count
        let lengths = cache.rowLengths
        // The prefix first, on the missing examples only: its outputs leave its workspace (which may
        // be `ws` itself) before the batch buffers are staged.
        var computed: [DeviceBuffer] = []
        let pws = slice.missing.isEmpty ? ws : transientWorkspace(slice.missing.count)
        if slice.missingExamples != nil || slice.missingPixels != nil {
            if let examples = slice.missingExamples { try uploadInput(examples: examples, ws: pws) }
            if let pixels = slice.missingPixels { try uploadInput(pixels: pixels, ws: pws) }
            try forward(layers: training.prefix, ws: pws, keep: Set(cache.blobs))
            for blob in cache.blobs {
                _ = try value(blob, on: backend, ws: pws)  // on the tail's backend, moved there if the prefix ran elsewhere
                computed.append(try pws.takeValue(blob)!.buffer)
            }
            pws.clearValues()
            try cache.store(slice.missing, computed: computed, on: backend)
        }
        // In half precision, what the cache now keeps is read back from it, rounded as every later
        // epoch reads it: the tail sees one set of features per example, the first epoch included.
        var locations = slice.locations
        if cache.halfPrecision {
            for key in slice.missing { if let l = cache.locate(key, counting: false) { locations[key] = l } }
        }
        // Every position missing, in order and once each (a first epoch): the prefix's outputs are the batch.
        if !computed.isEmpty, slice.missing == slice.keys, locations.count == slice.locations.count {
            for (blob, buffer) in zip(cache.blobs, computed) { ws.setValue(blob, buffer, on: backend) }
            return
        }
        let batch = try zip(cache.blobs, lengths).map { _, len in try ws.acquire(n * len, on: backend) }
        var deviceRows: [ObjectIdentifier: (tier: DeviceTier, slots: [Int], positions: [Int])] = [:]
        var missingRows: [Int] = [], missingPositions: [Int] = []
        let missingRow = Dictionary(uniqueKeysWithValues: slice.missing.enumerated().map { ($1, $0) })
        for (position, key) in slice.keys.enumerated() {
            if let row = missingRow[key], locations[key] == nil {
                missingRows.append(row); missingPositions.append(position)
                continue
            }
            switch locations[key] {
            case let .device(tier, slot)?:
                guard tier.backend === backend else {
                    throw UpdraftError(.invalidArgument, "cached features of example \(key.index) are on \(tier.backend.name), not on \(backend.name)",
                                       hint: "this is a bug in Updraft's feature cache; --no-feature-cache avoids it")
                }
                deviceRows[ObjectIdentifier(tier), default: (tier, [], [])].slots.append(slot)
                deviceRows[ObjectIdentifier(tier)]!.positions.append(position)
            case let .host(rows)?:
                for (b, row) in rows.enumerated() { try backend.upload(row, to: batch[b], offset: position * lengths[b]) }
            case nil:
                throw UpdraftError(.invalidArgument, "cached features of example \(key.index) are missing",
                                   hint: "this is a bug in Updraft's feature cache; --no-feature-cache avoids it")
            }
        }
        for (_, group) in deviceRows { try group.tier.gather(slots: group.slots, positions: group.positions, into: batch) }
        if !missingRows.isEmpty {
            for (b, buffer) in computed.enumerated() {
                try backend.copyRows(buffer, rows: missingRows, to: batch[b], rows: missingPositions, rowLength: lengths[b])
            }
        }
        for (blob, buffer) in zip(cache.blobs, batch) { ws.setValue(blob, buffer, on: backend) }
        // The prefix's outputs are not part of the batch: back to the pool they came from.
        for buffer in computed { pws.release(buffer, from: backend) }
    }
}
