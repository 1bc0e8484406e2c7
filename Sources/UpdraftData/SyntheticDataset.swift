import UpdraftCore

/// Seeded random images with seeded random class labels, held in memory: a `BatchProvider` for
/// benchmarks and tests that need a data set of a given size without reading files.
///
/// Pixels are whole numbers in 0...255 (what an 8-bit image decodes to, before the model's own
/// scaling), so a model with an image scaler sees the same value range as with real images. Example
/// `i` depends only on `(seed, i)` and the shape, not on `count`: a larger set begins with the
/// examples of a smaller one made with the same seed.
public struct SyntheticImageDataset: BatchProvider, Sendable {
    /// One example's shape, `[C, H, W]`.
    public let itemShape: Shape
    /// Number of classes; every label is in `0..<classes`.
    public let classes: Int
    /// Seed the pixels and labels are drawn from (with each example's index).
    public let seed: UInt64
    private let inputs: [Tensor]
    private let labels: [Int]

    /// - Parameters:
    ///   - count: number of examples (0 or more).
    ///   - itemShape: one example's shape, e.g. `[3, 227, 227]`; every dimension at least 1.
    ///   - classes: labels are drawn uniformly from `0..<classes` (at least 1).
    /// - Throws: `.invalidArgument` for a negative count, an empty shape or dimension, or no classes.
    public init(count: Int, itemShape: Shape, classes: Int, seed: UInt64 = 0) throws {
        guard count >= 0 else {
            throw UpdraftError(.invalidArgument, "a synthetic data set needs a count of 0 or more, got \(count)")
        }
        guard itemShape.rank > 0, itemShape.dims.allSatisfy({ $0 >= 1 }) else {
            throw UpdraftError(.invalidArgument, "synthetic example shape \(itemShape) has an empty dimension",
                               hint: "give a shape such as [3, 227, 227]")
        }
        guard classes >= 1 else {
            throw UpdraftError(.invalidArgument, "a synthetic data set needs at least 1 class, got \(classes)")
        }
        self.itemShape = itemShape
        self.classes = classes
        self.seed = seed
        var inputs: [Tensor] = []
        var labels: [Int] = []
        inputs.reserveCapacity(count)
        labels.reserveCapacity(count)
        let n = itemShape.count
        for i in 0..<count {
            var rng = SplitMix64(seed: Self.exampleSeed(seed, i))
            labels.append(Int(rng.next() % UInt64(classes)))
            let pixels = [Float](unsafeUninitializedCapacity: n) { buffer, initialized in
                var k = 0
                // One 64-bit draw gives eight 8-bit pixels.
                while k < n {
                    var bits = rng.next()
                    for _ in 0..<min(8, n - k) {
                        buffer[k] = Float(bits & 0xFF)
                        bits >>= 8
                        k += 1
                    }
                }
                initialized = n
            }
            inputs.append(Tensor(shape: itemShape, data: pixels))
        }
        self.inputs = inputs
        self.labels = labels
    }

    /// The seed of example `index`: the data set's seed and the index mixed, so neighbouring
    /// examples (and neighbouring data-set seeds) give unrelated streams.
    static func exampleSeed(_ seed: UInt64, _ index: Int) -> UInt64 {
        var mix = SplitMix64(seed: seed ^ (UInt64(truncatingIfNeeded: index) &* 0x9E37_79B9_7F4A_7C15))
        return mix.next()
    }

    /// As `BatchProvider.count`: the number of examples made.
    public var count: Int { inputs.count }

    /// Bytes of pixel data held.
    public var byteCount: Int { inputs.count * itemShape.count * MemoryLayout<Float>.size }

    /// As `BatchProvider.example(at:)`: the in-memory image and its label. Throws `.invalidArgument` for an index out of range.
    public func example(at index: Int) throws -> TrainingExample {
        try checkIndex(index)
        return TrainingExample(input: inputs[index], target: .classIndex(labels[index]))
    }

    /// The label alone, without touching the image. Throws `.invalidArgument` for an index out of range.
    public func target(at index: Int) throws -> TrainingExample.Target {
        try checkIndex(index)
        return .classIndex(labels[index])
    }
}
