import Dispatch
import Foundation

/// Prepares the examples of upcoming mini-batches ahead of the trainer: one producer thread takes
/// the batches in order and loads each batch's examples in parallel (decoding, resizing and
/// augmenting images on every core), while the trainer runs the batch before. At most `depth`
/// prepared batches wait at any time, so host memory is O(mini-batch x depth) whatever the data
/// set's size.
///
/// Loading is deterministic (an example depends only on its index and the epoch), so what the
/// trainer gets is the same as loading in its own thread; a batch asked for out of order, or an
/// example not prepared (see `needed`), is simply loaded by the caller (`example(_:in:)`).
public final class BatchPrefetcher: @unchecked Sendable {
    /// Loads one example by index (decoding and augmenting as the epoch needs); called on worker threads, so it must be thread-safe.
    public typealias Load = (Int) throws -> TrainingExample

    private let batches: [[Int]]
    private let depth: Int
    private let load: Load
    /// Cleared by `stop()`, so nothing it captures (the feature cache) outlives the epoch.
    private var needed: ((Int) -> Bool)?
    private var producing = true
    private let condition = NSCondition()
    private var ready: [Int: [Int: Result<TrainingExample, Error>]] = [:]
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
    public init(batches: [[Int]], depth: Int = 2, needed: @escaping (Int) -> Bool = { _ in true }, load: @escaping Load) {
        self.batches = batches
        self.depth = max(1, depth)
        self.needed = needed
        self.load = load
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
        guard b >= taken, b < batches.count else { return PreparedBatch(examples: [:], load: load) }
        while ready[b] == nil && !stopped { condition.wait() }
        let examples = ready.removeValue(forKey: b) ?? [:]
        // Batches skipped over are dropped (the trainer moved past them).
        for k in ready.keys where k < b { heldExamples -= ready.removeValue(forKey: k)?.count ?? 0 }
        heldExamples -= examples.count
        taken = b + 1
        condition.broadcast()
        return PreparedBatch(examples: examples, load: load)
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
            var results = [Result<TrainingExample, Error>?](repeating: nil, count: indices.count)
            condition.lock()
            heldExamples += indices.count
            peakHeldExamples = max(peakHeldExamples, heldExamples)
            condition.unlock()
            results.withUnsafeMutableBufferPointer { out in
                let out = out  // each iteration writes only its own entry
                forkJoin(iterations: indices.count) { k in
                    out[k] = Result { try load(indices[k]) }
                }
            }
            var prepared: [Int: Result<TrainingExample, Error>] = [:]
            for (k, i) in indices.enumerated() { prepared[i] = results[k] }

            condition.lock()
            if stopped || b < taken {
                if !stopped { heldExamples -= indices.count }
            } else {
                ready[b] = prepared
            }
            next = b + 1
            condition.broadcast()
            condition.unlock()
        }
    }
}

/// One mini-batch's prepared examples; the rest are loaded on demand.
public struct PreparedBatch {
    let examples: [Int: Result<TrainingExample, Error>]
    let load: BatchPrefetcher.Load

    /// Example `index`: as prepared, or loaded now.
    public func example(_ index: Int) throws -> TrainingExample {
        if let prepared = examples[index] { return try prepared.get() }
        return try load(index)
    }

    /// How many examples were prepared ahead.
    public var preparedCount: Int { examples.count }
}
