/// Layout ops on the logical N-D shape (LogicalShape). Blob memory is row-major and contiguous per
/// example, so an op that only re-labels the shape is free: the executor gives its output the
/// input's buffer (and its input gradient the output gradient's buffer). The others work on one
/// example's dimensions, the batch outermost:
/// - transpose / permute: a permuted copy (Backend.transpose); backward is the inverse permutation.
/// - softmaxND: softmax over one axis, i.e. over the middle of (outer, axis, inner): the softmax
///   kernels with SoftmaxGeometry(batch: N * outer, channels: axis, spatial: inner).
/// - concatND: the concat kernels with batch N * outer, channels = each input's axis size, spatial inner.
public enum LayoutOp: Hashable, Sendable {
    /// reshapeStatic, reshape, flattenTo2D, squeeze, expandDims, copy: the same values under another
    /// shape. `kind` is the layer type's name.
    case alias(kind: String)
    /// transpose (N-D) and permute (rank 5), for one example (batch 1); `kind` is the layer type's name.
    case transpose(TransposeGeometry, kind: String)
    /// Softmax over the middle of one example's (outer, axis, inner).
    case softmaxND(outer: Int, axis: Int, inner: Int)
    /// Concatenation of (outer, channels[i], inner) inputs along the middle, per example.
    case concatND(outer: Int, channels: [Int], inner: Int)

    /// The layer type's name for an alias or transpose (e.g. "reshapeStatic", "permute"), else "softmaxND" or "concatND".
    public var name: String {
        switch self {
        case let .alias(kind): return kind
        case let .transpose(_, kind): return kind
        case .softmaxND: return "softmaxND"
        case .concatND: return "concatND"
        }
    }

    /// True when the output is the input's memory under another shape.
    public var isAlias: Bool {
        if case .alias = self { return true }
        return false
    }

    /// The softmax geometry of a batch of `batch` examples (softmaxND).
    public func softmaxGeometry(batch: Int) -> SoftmaxGeometry? {
        guard case let .softmaxND(outer, axis, inner) = self else { return nil }
        return SoftmaxGeometry(batch: batch * outer, channels: axis, spatial: inner)
    }

    /// Work of the forward pass over `count` output values (the whole batch).
    public func forwardCost(count: Int) -> OpCost {
        switch self {
        case .alias: return .zero
        case .transpose, .concatND: return OpCost(flops: 0, bytes: f32Bytes(count, count))
        case .softmaxND: return OpCost(flops: Double(4 * count), bytes: f32Bytes(count, count))
        }
    }

    /// Work of the input-gradient pass over `count` output values.
    public func backwardCost(count: Int) -> OpCost {
        switch self {
        case .alias: return .zero
        case .transpose, .concatND: return OpCost(flops: 0, bytes: f32Bytes(count, count))
        case .softmaxND: return OpCost(flops: Double(4 * count), bytes: f32Bytes(count, count, count))
        }
    }
}

/// A permuted copy of `batch` examples, each a row-major tensor of `dims`: output axis i is input
/// axis `perm[i]`, so the output has dimensions `dims[perm[i]]`. The batch stays outermost.
/// `simplified` drops axes of size 1 and merges axes that stay next to each other in order, so the
/// kernels see the smallest rank that describes the same copy.
public struct TransposeGeometry: Hashable, Sendable {
    /// Number of examples, each permuted independently.
    public var batch: Int
    /// One example's input dimensions, row-major (the batch not included).
    public var dims: [Int]
    /// Output axis i is input axis `perm[i]`; a permutation of `dims.indices`.
    public var perm: [Int]

    /// The most axes the kernels take per example (after `simplified`).
    public static let maxRank = 6

    /// A transpose of `batch` examples of `dims` by `perm`; unchecked until `validate(_:)`.
    public init(batch: Int, dims: [Int], perm: [Int]) {
        self.batch = batch; self.dims = dims; self.perm = perm
    }

    /// Values of one example.
    public var exampleCount: Int { dims.reduce(1, *) }
    /// Values in the whole batch (input and output alike).
    public var count: Int { batch * exampleCount }
    /// One example's output dimensions, `dims[perm[i]]` for each output axis i.
    public var outputDims: [Int] { perm.map { dims[$0] } }
    /// True when the copy keeps every value in place.
    public var isIdentity: Bool { perm == Array(perm.indices) }

    /// The same permutation for a batch of `n` examples.
    public func withBatch(_ n: Int) -> TransposeGeometry { TransposeGeometry(batch: n, dims: dims, perm: perm) }

    /// The copy that undoes this one (the backward pass): it reads the output's dimensions.
    public var inverse: TransposeGeometry {
        var inv = [Int](repeating: 0, count: perm.count)
        for (i, p) in perm.enumerated() { inv[p] = i }
        return TransposeGeometry(batch: batch, dims: outputDims, perm: inv)
    }

    /// Row-major strides of the input, one per input axis.
    public var inputStrides: [Int] {
        var s = [Int](repeating: 1, count: dims.count)
        var acc = 1
        for i in stride(from: dims.count - 1, through: 0, by: -1) { s[i] = acc; acc *= dims[i] }
        return s
    }

    /// The same copy with size-1 axes dropped and runs of consecutive axes merged.
    public var simplified: TransposeGeometry {
        let kept = dims.indices.filter { dims[$0] != 1 }
        var position: [Int: Int] = [:]                        // input axis -> index among kept
        for (k, i) in kept.enumerated() { position[i] = k }
        let order = perm.compactMap { position[$0] }          // output order over kept input axes
        let keptDims = kept.map { dims[$0] }
        // Merge output-adjacent axes that are also input-adjacent, in order.
        var groups: [[Int]] = []
        for a in order {
            if var last = groups.last, last.last! + 1 == a {
                last.append(a); groups[groups.count - 1] = last
            } else {
                groups.append([a])
            }
        }
        let byInput = groups.sorted { $0[0] < $1[0] }
        let newDims = byInput.map { g in g.reduce(1) { $0 * keptDims[$1] } }
        let newPerm = groups.map { g in byInput.firstIndex { $0[0] == g[0] }! }
        return TransposeGeometry(batch: batch, dims: newDims.isEmpty ? [1] : newDims, perm: newPerm.isEmpty ? [0] : newPerm)
    }

    /// Checks that `perm` is a permutation of the axes and the sizes are positive.
    public func validate(_ what: String) throws {
        guard perm.count == dims.count, Set(perm) == Set(dims.indices) else {
            throw UpdraftError(.invalidArgument, "\(what): \(perm) is not a permutation of the \(dims.count) axes of \(dims)")
        }
        guard batch >= 0, dims.allSatisfy({ $0 >= 1 }) else {
            throw UpdraftError(.invalidArgument, "\(what): batch \(batch) and dimensions \(dims) must be positive")
        }
    }

    /// No arithmetic; every value read once and written once.
    public var cost: OpCost { OpCost(flops: 0, bytes: f32Bytes(count, count)) }
}
