import Foundation
import UpdraftCore
import UpdraftModel

/// Where a k-NN update's examples come from: how many there are, and for a range of them the
/// vectors to store (`[n, D]`, D the k-NN's dimension) and each one's label — a label value of the
/// k-NN's type (string or int64), not an index. A bare k-NN reads them from multi-array data
/// (`LabelledArrays`, or any `BatchProvider` through `BatchProviderExampleSource`); a pipeline's
/// k-NN from the embedding its earlier models compute.
public protocol KNearestNeighborsExampleSource {
    /// How many examples there are.
    var count: Int { get }
    /// The labels of the examples `range`, in order, without computing their vectors.
    func labels(in range: Range<Int>) throws -> ClassLabels
    /// The vectors `[range.count, D]` of the examples `range` and their labels, in order.
    func examples(in range: Range<Int>) throws -> (vectors: Tensor, labels: ClassLabels)
}

/// Any `BatchProvider` as examples for a k-NN: each example's input flattened into a vector, its
/// class index (`.classIndex`) read as the label at that index of `labels`.
public struct BatchProviderExampleSource: KNearestNeighborsExampleSource {
    /// The examples.
    public let data: BatchProvider
    /// The labels the examples' class indices point into.
    public let labels: ClassLabels

    /// A source over `data`, whose class indices point into `labels`.
    public init(data: BatchProvider, labels: ClassLabels) { self.data = data; self.labels = labels }

    public var count: Int { data.count }

    public func labels(in range: Range<Int>) throws -> ClassLabels {
        let indices = try range.map { i -> Int in
            guard case let .classIndex(c) = try data.target(at: i), c >= 0, c < labels.count else {
                throw UpdraftError(.data, "example \(i) has no class index among the \(labels.count) labels a k-NN update can give it",
                                   hint: "give each example a label (labels.txt) or a class index into the model's labels (targets.npy)")
            }
            return c
        }
        return labels.picking(indices)
    }

    public func examples(in range: Range<Int>) throws -> (vectors: Tensor, labels: ClassLabels) {
        let batch = try data.batch(at: range)
        let n = range.count
        return (batch.inputs.reshaped(Shape([n, batch.inputs.count / max(n, 1)])), try labels(in: range))
    }
}
