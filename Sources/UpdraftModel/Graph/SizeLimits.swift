import UpdraftCore

/// Bounds on the sizes that come from outside: a model file's fields and a command line's numbers.
///
/// Every per-example shape is already bounded when the graph is built (dimensions up to
/// `LayerShapes.maxDimension`, tensors up to `LayerShapes.maxElements`). What is left unbounded is the
/// mini-batch size, which multiplies every activation: a batch of 2^62 turns each `Shape.count`,
/// byte count and FLOP count into an overflow. `checkBatchSize` admits a batch size only when every
/// tensor of that batch, and the sum over all of them, stays far inside `Int` (`maxBatchElements`), so
/// the arithmetic downstream (counts times 4 bytes, times gradient and optimizer copies, summed over
/// layers) cannot overflow. The scheduler, the executor, training, evaluation and the validator all
/// run this one check, so a model the validator accepts plans and trains without trapping.
public enum SizeLimits {
    /// Most float32 values one mini-batch may hold across all its activations: 2^46 (256 TiB), far
    /// past any machine's memory, and small enough that bytes x gradient copies x optimizer state
    /// summed over every layer fits in 63 bits.
    public static let maxBatchElements = 1 << 46

    /// Values per example summed over the network input and every layer's output (what one example
    /// adds to a mini-batch's activations). Saturates at `Int.max`.
    public static func elementsPerExample(_ graph: NetworkGraph) -> Int {
        var total = graph.input.shape.itemCount
        for l in graph.layers {
            let (sum, overflow) = total.addingReportingOverflow(l.outputShape.itemCount)
            if overflow { return Int.max }
            total = sum
        }
        return max(1, total)
    }

    /// The largest mini-batch size `checkBatchSize` admits for `graph` (0 when even one example is too many).
    public static func largestBatchSize(_ graph: NetworkGraph) -> Int {
        maxBatchElements / elementsPerExample(graph)
    }

    /// Throws unless `batchSize` is at least 1 and a mini-batch of it stays within `maxBatchElements`.
    /// - Parameter source: where the number came from, for the message: "--batch-size", "the
    ///   model's default miniBatchSize", "miniBatchSize".
    public static func checkBatchSize(_ batchSize: Int, graph: NetworkGraph, source: String) throws {
        guard batchSize >= 1 else {
            throw UpdraftError(.invalidArgument, "\(source) is \(batchSize); a mini-batch needs at least 1 example",
                               hint: source.hasPrefix("--") ? "pass a positive \(source)"
                                   : "pass --batch-size N, or set the model's miniBatchSize to a positive value")
        }
        let largest = largestBatchSize(graph)
        guard largest >= 1 else {
            throw UpdraftError(.invalidModel,
                "the network's activations for one example add up to \(elementsPerExample(graph)) values, more than \(maxBatchElements)",
                hint: "the model file is corrupt or describes an impossible network")
        }
        guard batchSize <= largest else {
            throw UpdraftError(.invalidArgument,
                "\(source) \(batchSize) is too large: one mini-batch of it would hold more than \(maxBatchElements) values (the largest this model allows is \(largest))",
                hint: source.hasPrefix("--") ? "pass a smaller \(source)" : "pass --batch-size N with a smaller N")
        }
    }
}
