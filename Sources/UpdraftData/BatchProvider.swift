import UpdraftCore

/// One training example: the model's input and what it should produce.
public struct TrainingExample: Equatable, Sendable {
    /// The training target, as Core ML's training inputs carry it.
    public enum Target: Equatable, Sendable {
        /// For a classifier: the index of the class in the model's class labels.
        case classIndex(Int)
        /// For a regressor (or a loss on a multi-array): the values the output should take.
        case values(Tensor)
    }

    /// One example's input, without a batch dimension (images are `[C, H, W]`).
    public var input: Tensor
    /// What the model should produce for `input`: a class index or target values.
    public var target: Target

    /// An example pairing `input` with `target`.
    public init(input: Tensor, target: Target) {
        self.input = input
        self.target = target
    }
}

/// Training data, one example at a time, like Core ML's `MLBatchProvider`: the trainer does the
/// batching and shuffling. `example(at:)` may decode or augment, so it can throw.
public protocol BatchProvider {
    var count: Int { get }
    func example(at index: Int) throws -> TrainingExample
    /// The target alone (the trainer's feature cache needs it without decoding the input).
    func target(at index: Int) throws -> TrainingExample.Target
}

extension BatchProvider {
    /// Default: the target of `example(at:)` (decodes the input too; providers that can should do better).
    public func target(at index: Int) throws -> TrainingExample.Target { try example(at: index).target }
}

/// A batch of examples stacked for a trainer.
public struct TrainingBatch: Equatable, Sendable {
    /// The inputs stacked along a new first dimension: `[N] + input shape` (images: `[N, C, H, W]`).
    public var inputs: Tensor
    /// Each example's target, in batch order.
    public var targets: [TrainingExample.Target]

    /// The targets as class indices, or nil if any target is not a class index.
    public var classIndices: [Int]? {
        var indices: [Int] = []
        indices.reserveCapacity(targets.count)
        for target in targets {
            guard case .classIndex(let index) = target else { return nil }
            indices.append(index)
        }
        return indices
    }
}

extension BatchProvider {
    /// Throws unless `index` is in `0..<count`.
    public func checkIndex(_ index: Int) throws {
        guard index >= 0 && index < count else {
            throw UpdraftError(.invalidArgument, "example index \(index) is out of range 0..<\(count)")
        }
    }

    /// The examples at `indices`, their inputs stacked into one tensor.
    /// - Throws: what `example(at:)` throws, or `.data` when the inputs' shapes differ.
    public func batch<Indices: Collection>(at indices: Indices) throws -> TrainingBatch where Indices.Element == Int {
        guard !indices.isEmpty else {
            throw UpdraftError(.invalidArgument, "a batch needs at least one example")
        }
        var data: [Float] = []
        var targets: [TrainingExample.Target] = []
        targets.reserveCapacity(indices.count)
        var itemShape: Shape?
        for index in indices {
            let example = try example(at: index)
            if let itemShape, itemShape != example.input.shape {
                throw UpdraftError(.data, "example \(index) has input shape \(example.input.shape), the batch has \(itemShape)",
                                   hint: "every example must have the same input shape")
            }
            if itemShape == nil {
                itemShape = example.input.shape
                data.reserveCapacity(example.input.count * indices.count)
            }
            data += example.input.data
            targets.append(example.target)
        }
        let shape = Shape([indices.count] + (itemShape?.dims ?? []))
        return TrainingBatch(inputs: Tensor(shape: shape, data: data), targets: targets)
    }
}

/// Examples held in memory, checked to share one input shape.
public struct ArrayBatchProvider: BatchProvider, Equatable, Sendable {
    /// The examples, in index order, all with the same input shape.
    public private(set) var examples: [TrainingExample]

    /// - Throws: `.data` when the inputs' shapes differ, naming the first example that differs.
    public init(examples: [TrainingExample]) throws {
        if let first = examples.first,
           let odd = examples.firstIndex(where: { $0.input.shape != first.input.shape }) {
            throw UpdraftError(.data, "example \(odd) has input shape \(examples[odd].input.shape), example 0 has \(first.input.shape)",
                               hint: "every example must have the same input shape")
        }
        self.examples = examples
    }

    /// Pairs inputs with targets.
    /// - Throws: `.invalidArgument` when the counts differ, `.data` when the input shapes differ.
    public init(inputs: [Tensor], targets: [TrainingExample.Target]) throws {
        guard inputs.count == targets.count else {
            throw UpdraftError(.invalidArgument, "\(inputs.count) inputs but \(targets.count) targets",
                               hint: "give one target per input")
        }
        try self.init(examples: zip(inputs, targets).map { TrainingExample(input: $0, target: $1) })
    }

    /// As `BatchProvider.count`: the number of examples held.
    public var count: Int { examples.count }

    /// As `BatchProvider.example(at:)`; throws `.invalidArgument` for an index out of range.
    public func example(at index: Int) throws -> TrainingExample {
        try checkIndex(index)
        return examples[index]
    }
}
