import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftPlacement
import UpdraftData

/// Data-parallel training: every replica (one executor per device) holds the same parameters and
/// optimizer state; each mini-batch is cut into slices, one per replica; each replica computes the
/// gradient of its slice's mean loss; the host combines them into the whole batch's gradient and
/// every replica applies that same update.
///
/// The losses are means over each slice, so the slice of n_i examples out of N weighs n_i / N:
///
///     grad(mean loss over N) = sum_i (n_i / N) grad(mean loss over slice i)
///     loss = sum_i (n_i / N) loss_i,  correct = sum_i correct_i
///
/// which holds for cross-entropy and mean squared error alike (both divide by the examples they
/// see). The result equals one device's up to float rounding.
public struct DataParallelism {
    /// The devices, one replica each, the first being the primary (it answers for weights and
    /// validation).
    public var replicas: [Backend]
    /// Relative share of each mini-batch per replica (e.g. measured throughputs); nil: equal.
    public var shares: [Double]?

    /// Replicas on `replicas`, the first the primary, with mini-batches split by `shares` (nil: equally).
    public init(replicas: [Backend], shares: [Double]? = nil) {
        self.replicas = replicas; self.shares = shares
    }

    /// Slice sizes for a batch of `count` examples split by `shares` (`DataParallelMode.sliceSizes`).
    public static func sliceSizes(count: Int, shares: [Double]) -> [Int] { DataParallelMode.sliceSizes(count: count, shares: shares) }

    /// Consecutive ranges of `0..<count` with the given sizes.
    static func ranges(_ sizes: [Int]) -> [Range<Int>] {
        var start = 0
        return sizes.map { n in defer { start += n }; return start..<start + n }
    }

    /// sum_i weights[i] * gradients[i], tensor by tensor, accumulated in Double.
    public static func combine(_ gradients: [[[Float]]], weights: [Double]) throws -> [[Float]] {
        guard let first = gradients.first, gradients.count == weights.count else {
            throw UpdraftError(.invalidArgument, "\(gradients.count) gradient sets for \(weights.count) weights")
        }
        return try first.indices.map { t in
            let n = first[t].count
            var sum = [Double](repeating: 0, count: n)
            for (g, w) in zip(gradients, weights) where w != 0 {
                guard g.count == first.count, g[t].count == n else {
                    throw UpdraftError(.invalidArgument, "replicas disagree on the shape of gradient tensor \(t)")
                }
                g[t].withUnsafeBufferPointer { src in
                    sum.withUnsafeMutableBufferPointer { dst in
                        for k in 0..<n { dst[k] += w * Double(src[k]) }
                    }
                }
            }
            return sum.map { Float($0) }
        }
    }

    /// The whole batch's result from the slices': loss weighted by slice size, counts summed.
    static func combine(_ results: [Executor.BatchResult]) -> Executor.BatchResult {
        let count = results.reduce(0) { $0 + $1.count }
        let loss = results.reduce(0.0) { $0 + $1.loss * Double($1.count) } / Double(max(1, count))
        return Executor.BatchResult(loss: loss, correct: results.reduce(0) { $0 + $1.correct }, count: count)
    }

    /// Runs `body(i)` for every i in 0..<count, at the same time on Dispatch's pool (one replica per
    /// worker) unless `together` is false, and returns each outcome. One item runs on the calling thread.
    static func concurrently<T>(_ count: Int, together: Bool = true, _ body: (Int) throws -> T) -> [Result<T, Error>] {
        if count == 1 || !together { return (0..<count).map { i in Result { try body(i) } } }
        let box = ResultBox<T>(count)
        forkJoin(iterations: count) { i in
            let r = Result { try body(i) }
            box.set(i, r)
        }
        return box.results.enumerated().map { $1 ?? .failure(UpdraftError(.device, "replica \($0) did not run")) }
    }

    private final class ResultBox<T> {
        private let lock = NSLock()
        var results: [Result<T, Error>?]
        init(_ n: Int) { results = Array(repeating: nil, count: n) }
        func set(_ i: Int, _ r: Result<T, Error>) { lock.lock(); results[i] = r; lock.unlock() }
    }
}
