import Dispatch
import Foundation
import UpdraftCore

/// Prepares the examples of upcoming mini-batches ahead of the trainer: one producer thread takes
/// the batches in order and loads each batch's examples in parallel (decoding, resizing and
/// augmenting images on every core), while the trainer runs the batch before. At most `depth`
/// prepared batches wait at any time, so host memory is O(mini-batch x depth) whatever the data
/// set's size.
///
/// Loading is deterministic (an example depends only on its index and the epoch), so what the
/// trainer gets is the same as loading in its own thread; a batch asked for out of order, or an
/// example not prepared (see `needed`), is simply loaded by the caller (`example(_:in:)`).
///
/// With a `PixelLoader` (image data, `PixelBatchProvider`), a batch's examples are written as 8-bit
/// samples into the rows of one staging buffer from a pool reused batch after batch, instead of
/// becoming float tensors: no per-image arrays on the way to the device.
public final class BatchPrefetcher: @unchecked Sendable {
    /// Loads one example by index (decoding and augmenting as the epoch needs); called on worker threads, so it must be thread-safe.
    public typealias Load = (Int) throws -> TrainingExample

    private let batches: [[Int]]
    private let depth: Int
    private let load: Load
    private let pixels: PixelLoader?
    /// Cleared by `stop()`, so nothing it captures (the feature cache) outlives the epoch.
    private var needed: ((Int) -> Bool)?
    private var producing = true
    private let condition = NSCondition()
    private var ready: [Int: PreparedBatch] = [:]
    private var next = 0
    private var taken = 0
    private var stopped = false
    private var heldExamples = 0
    /// The most prepared examples held at once (waiting, or being prepared), for tests and reports.
    public private(set) var peakHeldExamples = 0

    /// - Parameters:
    ///   - batches: the epoch's mini-batches, as example indices, in the order they will be taken.
    ///   - depth: prepared batches allowed to wait (at least 1).
    ///   - needed: whether an example must be loaded (the feature cache answers no for what it holds).
    ///   - load: loads one example; called on worker threads, so it must be thread-safe.
    public convenience init(batches: [[Int]], depth: Int = 2, needed: @escaping (Int) -> Bool = { _ in true }, load: @escaping Load) {
        self.init(batches: batches, depth: depth, needed: needed, load: load, pixels: nil)
    }

    /// As the public initializer; with `pixels`, examples are prepared as staging rows (see above).
    package init(batches: [[Int]], depth: Int = 2, needed: @escaping (Int) -> Bool = { _ in true }, load: @escaping Load,
         pixels: PixelLoader?) {
        self.batches = batches
        self.depth = max(1, depth)
        self.needed = needed
        self.load = load
        self.pixels = pixels
        let thread = Thread { [self] in produce() }
        thread.name = "updraft-prefetch"
        thread.start()
    }

    deinit { stop() }

    /// Stops preparing and waits for the producer thread to finish (at most the batch it is on);
    /// batches not yet taken are dropped. Afterwards no thread holds anything of this prefetcher's.
    public func stop() {
        condition.lock()
        stopped = true
        ready.removeAll()
        heldExamples = 0
        condition.broadcast()
        while producing { condition.wait() }
        needed = nil
        condition.unlock()
    }

    /// The prepared examples of batch `b` (waiting for them if need be). Each batch is taken once, in
    /// order; any other request gets nothing prepared.
    public func take(_ b: Int) -> PreparedBatch {
        condition.lock()
        defer { condition.unlock() }
        let nothing = PreparedBatch(examples: [:], load: load, pixels: nil, loader: pixels)
        guard b >= taken, b < batches.count else { return nothing }
        while ready[b] == nil && !stopped { condition.wait() }
        let prepared = ready.removeValue(forKey: b) ?? nothing
        // Batches skipped over are dropped (the trainer moved past them).
        for k in ready.keys where k < b { heldExamples -= ready.removeValue(forKey: k)?.preparedCount ?? 0 }
        heldExamples -= prepared.preparedCount
        taken = b + 1
        condition.broadcast()
        return prepared
    }

    private func produce() {
        defer {
            condition.lock()
            producing = false
            condition.broadcast()
            condition.unlock()
        }
        while true {
            condition.lock()
            while !stopped && next < batches.count && next - taken >= depth { condition.wait() }
            if stopped || next >= batches.count { condition.unlock(); return }
            let b = next
            let needed = self.needed ?? { _ in true }
            condition.unlock()

            var seen = Set<Int>()
            let indices = batches[b].filter { seen.insert($0).inserted && needed($0) }
            condition.lock()
            heldExamples += indices.count
            peakHeldExamples = max(peakHeldExamples, heldExamples)
            condition.unlock()
            let prepared = pixels.map { prepare(indices, with: $0) } ?? prepare(indices)

            condition.lock()
            if stopped || b < taken {
                if !stopped { heldExamples -= prepared.preparedCount }
            } else {
                ready[b] = prepared
            }
            next = b + 1
            condition.broadcast()
            condition.unlock()
        }
    }
}

extension BatchPrefetcher {
    /// The examples at `indices` loaded as tensors, in parallel.
    private func prepare(_ indices: [Int]) -> PreparedBatch {
        var results = [Result<TrainingExample, Error>?](repeating: nil, count: indices.count)
        results.withUnsafeMutableBufferPointer { out in
            let out = out  // each iteration writes only its own entry
            forkJoin(iterations: indices.count) { k in
                out[k] = Result { try load(indices[k]) }
            }
        }
        var prepared: [Int: Result<TrainingExample, Error>] = [:]
        for (k, i) in indices.enumerated() { prepared[i] = results[k] }
        return PreparedBatch(examples: prepared, load: load, pixels: nil, loader: pixels)
    }

    /// The examples at `indices` written, in parallel, into rows 0, 1, … of one leased staging buffer.
    private func prepare(_ indices: [Int], with loader: PixelLoader) -> PreparedBatch {
        let lease = loader.pool.lease(rows: indices.count)
        var failures = [Error?](repeating: nil, count: indices.count)
        failures.withUnsafeMutableBufferPointer { out in
            let out = out  // each iteration writes only its own entry (and its own staging row)
            forkJoin(iterations: indices.count) { k in
                do { try loader.write(indices[k], lease.staging.row(k)) } catch { out[k] = error }
            }
        }
        var rows: [Int: Result<Int, Error>] = [:]
        for (k, i) in indices.enumerated() { rows[i] = failures[k].map { .failure($0) } ?? .success(k) }
        return PreparedBatch(examples: [:], load: load, pixels: PreparedPixels(lease: lease, rows: rows), loader: loader)
    }
}

/// A batch's examples written into staging rows: each prepared index's row, or why it failed.
struct PreparedPixels {
    let lease: PixelLease
    let rows: [Int: Result<Int, Error>]
}

/// One mini-batch's prepared examples; the rest are loaded on demand.
public struct PreparedBatch {
    let examples: [Int: Result<TrainingExample, Error>]
    let load: BatchPrefetcher.Load
    let pixels: PreparedPixels?
    let loader: PixelLoader?

    /// Example `index`: as prepared, or loaded now.
    public func example(_ index: Int) throws -> TrainingExample {
        if let prepared = examples[index] { return try prepared.get() }
        return try load(index)
    }

    /// How many examples were prepared ahead.
    public var preparedCount: Int { pixels?.rows.count ?? examples.count }

    /// The examples at `indices` (distinct) as consecutive staging rows, in order: the prepared rows
    /// themselves when they already lie so (a whole batch, or a replica's slice of it), else rows
    /// gathered into another staging buffer from the pool, loading any not prepared.
    /// - Throws: the error of an example that failed to load.
    package func pixelRows(_ indices: [Int]) throws -> PixelRows {
        guard let loader else { throw UpdraftError(.invalidArgument, "this batch was not prepared for pixel upload") }
        if let pixels, let first = indices.first, case .success(let start)? = pixels.rows[first] {
            var consecutive = true
            for (k, i) in indices.enumerated() {
                guard case .success(let r)? = pixels.rows[i], r == start + k else { consecutive = false; break }
            }
            if consecutive { return PixelRows(lease: pixels.lease, rows: start..<start + indices.count) }
        }
        let lease = loader.pool.lease(rows: indices.count)
        for (k, i) in indices.enumerated() {
            let out = lease.staging.row(k)
            switch pixels?.rows[i] {
            case .success(let r)?: out.baseAddress!.update(from: pixels!.lease.staging.row(r).baseAddress!, count: out.count)
            case .failure(let error)?: throw error
            case nil: try loader.write(i, out)
            }
        }
        return PixelRows(lease: lease, rows: 0..<indices.count)
    }
}
