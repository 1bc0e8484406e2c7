import UpdraftCore

/// A blob's shape as the model's layers see it (N-D, any rank), next to the executor's 4-D
/// canonical `[1, C, H, W]` (`GraphLayer.outputShape`, `NetworkGraph.blobShapes`).
///
/// Memory is row-major and contiguous per example either way; the logical shape only says how the
/// model numbers the axes, which is what axis ops (softmaxND, concatND, transpose, reduce,
/// broadcasting) need. Shapes are recorded with batch 1, as the model describes them:
/// - `[1, K]`, `[1, C, H, W]`, `[1, C, D, H, W]` (converted PyTorch/TensorFlow models): the leading 1 is the batch
///   (`batchAxis == 0`); the executor runs N examples there.
/// - `[C, H, W]`, `[K]` (older converters, image-style multi-arrays): no batch axis; the batch is
///   implicit and outermost (`batchAxis == nil`).
/// - `[1, 1, C, H, W]` (rank-5 `[Seq, Batch, C, H, W]` of the old layers): `batchAxis == 1`, Seq == 1.
/// Dimensions before the batch axis are always 1. The per-example dimensions (`exampleDims`, those
/// after the batch axis) map to the canonical shape left-aligned into C, H, W with trailing 1s; a
/// fourth and later per-example dimension folds into W.
public struct LogicalShape: Hashable, Sendable, CustomStringConvertible {
    /// The dimensions as the model's layers see them, with batch 1.
    public var dims: [Int]
    /// Which of `dims` is the batch (of size 1 here), or nil when the model's view has none.
    public var batchAxis: Int?

    /// A shape of `dims` (batch 1) with the batch at `batchAxis`, or none; not checked.
    public init(_ dims: [Int], batchAxis: Int?) {
        self.dims = dims
        self.batchAxis = batchAxis
    }

    /// The logical shape of a blob known only by its canonical shape `[1, C, H, W]`: `[1, C, H, W]` with the batch at 0.
    public init(canonical: Shape) {
        self.init([1] + Array(canonical.dims.dropFirst()), batchAxis: 0)
    }

    /// Number of dimensions as the model numbers them.
    public var rank: Int { dims.count }
    /// Elements per example (the batch axis is 1).
    public var count: Int { dims.reduce(1, *) }

    /// The dimensions after the batch axis (every dimension when there is none): one example.
    public var exampleDims: [Int] { batchAxis.map { Array(dims[($0 + 1)...]) } ?? dims }

    /// The executor's `[1, C, H, W]` for this shape (see the type's notes).
    public var canonical: Shape {
        var e = exampleDims
        if e.count > 3 { e = [e[0], e[1], e[2...].reduce(1, *)] }
        while e.count < 3 { e.append(1) }
        return Shape([1] + e)
    }

    /// The dimensions with the batch axis marked, e.g. "[1(batch), 3, 224, 224]".
    public var description: String {
        "[" + dims.enumerated().map { i, d in i == batchAxis ? "\(d)(batch)" : "\(d)" }.joined(separator: ", ") + "]"
    }

    /// An axis as the model gives it (negative counts from the end), checked against the rank.
    /// `what` names the layer and parameter for the error.
    public func axis(_ a: Int, rank r: Int? = nil, _ what: @autoclosure () -> String) throws -> Int {
        let r = r ?? rank
        let resolved = a < 0 ? a + r : a
        guard resolved >= 0, resolved < r else {
            throw UpdraftError(.invalidModel, "\(what()): axis \(a) is outside \(-r)...\(r - 1) for a rank-\(r) tensor \(self)")
        }
        return resolved
    }

    /// The same shape, the dimensions replaced by `target` (same element count): the batch axis stays
    /// at 0 when this shape has one and `target` keeps a leading 1 (rank 2 or more); otherwise the
    /// result has none (the batch stays implicit, outermost).
    public func reshaped(to target: [Int]) -> LogicalShape {
        LogicalShape(target, batchAxis: batchAxis != nil && target.count >= 2 && target[0] == 1 ? 0 : nil)
    }

    /// The logical shape of an op's output known by its canonical shape, for ops that keep the
    /// layout of their input's axes (convolution, pooling, inner product, concat, ...): the
    /// input's dimensions up to its batch axis, then as many per-example dimensions as the input
    /// had (at most 3) taken from `canonical`'s C, H, W, keeping any that are not 1.
    public static func output(canonical: Shape, like input: LogicalShape) -> LogicalShape {
        if input.canonical == canonical { return input }
        let prefix = input.batchAxis.map { Array(input.dims[...$0]) } ?? []
        var e = [canonical.c, canonical.h, canonical.w]
        let keep = max(min(input.exampleDims.count, 3), 1)
        while e.count > keep, e.last == 1 { e.removeLast() }
        return LogicalShape(prefix + e, batchAxis: input.batchAxis)
    }

    /// The logical shape of a model input: image `[1, C, H, W]`, or a multi-array's declared shape
    /// (see the type's notes for which leading 1 is the batch). Throws for shapes whose batch would not
    /// be 1 or outermost, naming `what`.
    static func input(multiArray d: [Int], _ what: String) throws -> LogicalShape {
        let accepted = "Updraft reads [N], [1, N], [C, H, W], [1, C, H, W], [1, C, D, H, W] and [1, 1, C, H, W]"
        switch d.count {
        case 1: return LogicalShape(d, batchAxis: nil)
        case 2 where d[0] == 1: return LogicalShape(d, batchAxis: 0)
        case 3: return LogicalShape(d, batchAxis: nil)
        case 4 where d[0] == 1: return LogicalShape(d, batchAxis: 0)
        case 5 where d[0] == 1 && d[1] == 1: return LogicalShape(d, batchAxis: 1)
        case 5 where d[0] == 1: return LogicalShape(d, batchAxis: 0)
        case 2, 4, 5:
            throw UpdraftError(.unsupported,
                "\(what) is a multi-array of shape \(d) whose first dimension (the batch) is \(d[0]), not 1",
                hint: "export the model with batch 1 (for example torch.jit.trace with an input of batch 1); Updraft trains on mini-batches of the size you choose. \(accepted)")
        default:
            throw UpdraftError(.unsupported, "\(what) is a multi-array of rank \(d.count) (shape \(d))", hint: accepted)
        }
    }
}

public extension NetworkGraph {
    /// A blob's logical (N-D) shape; the input's included. Nil for a blob the graph does not have.
    func logicalShape(of blob: String) -> LogicalShape? {
        if let s = blobLogicalShapes[blob] { return s }
        return blobShapes[blob].map(LogicalShape.init(canonical:))
    }
}
