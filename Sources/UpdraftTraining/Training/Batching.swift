import UpdraftCore
import UpdraftData

/// Which examples make up each mini-batch of an epoch.
///
/// Like Core ML: every epoch visits every example once, in an order shuffled from (seed, epoch) when
/// shuffling is on, and the last mini-batch is filled up by wrapping round to the start of that
/// order. With `shortLastBatch` the last batch keeps only the examples that remain.
public struct EpochPlan: Sendable {
    /// The epoch's mini-batches in training order, each a list of example indices; every batch has `batchSize` examples unless `shortLastBatch` left the last one short.
    public let batches: [[Int]]

    /// The mini-batches of `epoch` (0-based) over `exampleCount` examples, shuffled from `(seed, epoch)` when `shuffle` is on; the last batch wraps round to the start of the order unless `shortLastBatch`.
    public init(exampleCount: Int, batchSize: Int, epoch: Int, shuffle: Bool, seed: UInt64, shortLastBatch: Bool = false) {
        var order = Array(0..<exampleCount)
        if shuffle {
            var rng = SplitMix64(seed: seed ^ (0xD1B5_4A32_D192_ED03 &* UInt64(epoch + 1)))
            // Fisher-Yates with our own generator so the order is the same on every platform.
            if order.count > 1 {
                for i in stride(from: order.count - 1, to: 0, by: -1) {
                    let j = Int(rng.next() % UInt64(i + 1))
                    order.swapAt(i, j)
                }
            }
        }
        var batches: [[Int]] = []
        var start = 0
        while start < order.count {
            var batch = Array(order[start..<min(start + batchSize, order.count)])
            if batch.count < batchSize && !shortLastBatch {
                var k = 0
                while batch.count < batchSize { batch.append(order[k % order.count]); k += 1 }
            }
            batches.append(batch)
            start += batchSize
        }
        self.batches = batches
    }
}
