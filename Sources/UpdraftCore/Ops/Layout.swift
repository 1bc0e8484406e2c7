/// Layout ops on the logical N-D shape (LogicalShape). Blob memory is row-major and contiguous per
/// example, so an op that only re-labels the shape is free: the executor gives its output the
/// input's buffer (and its input gradient the output gradient's buffer). The others work on one
/// example's dimensions, the batch outermost:
/// - transpose / permute, concatND (interleaved or not) and constantPad move values without
///   arithmetic: each is a list of strided copies (`execution(batch:)`: input i into its view of the
///   output, `StridedCopy`), and its backward is the same copies reversed (input i's gradient is its
///   view of the output gradient).
///   A new op that only moves values is one more case here with its copies, shape rule and
///   reference; the backends run any strided copy (Backend.stridedCopy).
/// - softmaxND: softmax over one axis, i.e. over the middle of (outer, axis, inner): the softmax
///   kernels with SoftmaxGeometry(batch: N * outer, channels: axis, spatial: inner).
public enum LayoutOp: Hashable, Sendable {
    /// reshapeStatic, reshape, flattenTo2D, squeeze, expandDims, copy: the same values under another
    /// shape. `kind` is the layer type's name.
    case alias(kind: String)
    /// transpose (N-D) and permute (rank 5), for one example (batch 1); `kind` is the layer type's name.
    case transpose(TransposeGeometry, kind: String)
    /// Softmax over the middle of one example's (outer, axis, inner).
    case softmaxND(outer: Int, axis: Int, inner: Int)
    /// Concatenation of (outer, channels[i], inner) inputs along the middle, per example; with
    /// `interleave` (every channels[i] the same C) the K inputs alternate: output c * K + k is input k's c.
    case concatND(outer: Int, channels: [Int], inner: Int, interleave: Bool = false)
    /// One example's `dims` padded with `before[k]` values before and `after[k]` after on axis k, each `value`.
    case constantPad(dims: [Int], before: [Int], after: [Int], value: Float)

    /// The layer type's name for an alias or transpose (e.g. "reshapeStatic", "permute"), else "softmaxND", "concatND", "constantPad".
    public var name: String {
        switch self {
        case let .alias(kind): return kind
        case let .transpose(_, kind): return kind
        case .softmaxND: return "softmaxND"
        case .concatND: return "concatND"
        case .constantPad: return "constantPad"
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

    /// Values in each input and in the output for a batch of `batch` examples; nil for an alias (its
    /// op carries no shape: the values are the input's under another shape).
    public func counts(batch: Int) -> (inputs: [Int], output: Int)? {
        switch self {
        case .alias: return nil
        case let .transpose(g, _): return ([batch * g.exampleCount], batch * g.exampleCount)
        case let .softmaxND(outer, axis, inner): return ([batch * outer * axis * inner], batch * outer * axis * inner)
        case let .concatND(outer, channels, inner, _):
            return (channels.map { batch * outer * $0 * inner }, batch * outer * channels.reduce(0, +) * inner)
        case let .constantPad(dims, before, after, _):
            return ([batch * dims.reduce(1, *)], batch * dims.indices.map { dims[$0] + before[$0] + after[$0] }.reduce(1, *))
        }
    }

    /// How a backend runs the op for a batch of `batch` examples: the input itself, the softmax
    /// kernels, or strided copies (Backend.layoutForward / layoutBackward).
    public func execution(batch: Int) -> LayoutExecution {
        switch self {
        case .alias: return .alias
        case .softmaxND: return .softmax(softmaxGeometry(batch: batch)!)
        case let .transpose(g, _): return .copies(LayoutCopies(parts: [g.withBatch(batch).stridedCopy]))
        case let .concatND(outer, channels, inner, true):
            // Input k: [N * outer, C, inner] into channels k, K + k, 2K + k, … of [N * outer, K * C, inner].
            let k = channels.count, total = channels.reduce(0, +)
            return .copies(LayoutCopies(parts: channels.indices.map { i in
                StridedCopy(dims: [batch * outer, channels[i], inner], source: .contiguous([batch * outer, channels[i], inner]),
                            destination: .init(offset: i * inner, strides: [total * inner, k * inner, 1]))
            }))
        case let .concatND(outer, channels, inner, false):
            // Input i: [N * outer, channels[i], inner] into channels offset[i]..< of [N * outer, total, inner].
            let total = channels.reduce(0, +)
            var first = 0
            return .copies(LayoutCopies(parts: channels.map { c in
                defer { first += c }
                return StridedCopy(dims: [batch * outer, c, inner], source: .contiguous([batch * outer, c, inner]),
                                   destination: .init(offset: first * inner, strides: [total * inner, inner, 1]))
            }))
        case let .constantPad(dims, before, after, value):
            // The input into the output's interior: the output's strides, offset by `before`; the border is `value`.
            let out = StridedCopy.View.contiguous([batch] + dims.indices.map { dims[$0] + before[$0] + after[$0] })
            let offset = zip(before, out.strides.dropFirst()).reduce(0) { $0 + $1.0 * $1.1 }
            return .copies(LayoutCopies(parts: [StridedCopy(dims: [batch] + dims, source: .contiguous([batch] + dims),
                                                            destination: .init(offset: offset, strides: out.strides))],
                                        fill: value))
        }
    }

    /// Work of the forward pass over `count` output values (the whole batch).
    public func forwardCost(count: Int) -> OpCost {
        switch self {
        case .alias: return .zero
        case .transpose, .concatND, .constantPad: return OpCost(flops: 0, bytes: f32Bytes(count, count))
        case .softmaxND: return OpCost(flops: Double(4 * count), bytes: f32Bytes(count, count))
        }
    }

    /// Work of the input-gradient pass over `count` output values.
    public func backwardCost(count: Int) -> OpCost {
        switch self {
        case .alias: return .zero
        case .transpose, .concatND, .constantPad: return OpCost(flops: 0, bytes: f32Bytes(count, count))
        case .softmaxND: return OpCost(flops: Double(4 * count), bytes: f32Bytes(count, count, count))
        }
    }
}

/// How a layout op runs on a backend (`LayoutOp.execution(batch:)`).
public enum LayoutExecution: Hashable, Sendable {
    /// The output is the input (a copy when a caller wants its own buffer); the gradient passes unchanged.
    case alias
    /// Softmax over the middle axis of (outer, axis, inner), the batch folded into outer.
    case softmax(SoftmaxGeometry)
    /// Strided copies from the inputs into the output; backward, each reversed.
    case copies(LayoutCopies)
}

/// The strided copies of a layout op that moves values. Forward: the output is filled with `fill`
/// when the copies leave some of it unwritten (nil: they cover it), then part i copies input i (a
/// contiguous tensor) into its view of the output. Backward: input i's gradient is `parts[i].reversed`,
/// its view of the output gradient copied out (every gradient value is written, none added).
public struct LayoutCopies: Hashable, Sendable {
    /// One copy per input, in the layer's input order.
    public var parts: [StridedCopy]
    /// The value of the output elements no part writes; nil when the parts write every one.
    public var fill: Float?

    public init(parts: [StridedCopy], fill: Float? = nil) { self.parts = parts; self.fill = fill }
}

/// A box of `dims` copied from one strided view of a buffer into another: for every index
/// (i_0, ..., i_{R-1}) with 0 <= i_k < dims[k],
///
///     destination[destination.offset + sum_k i_k * destination.strides[k]]
///         = source[source.offset + sum_k i_k * source.strides[k]]
///
/// Elements of the destination outside its view keep their values; the destination view must not
/// reach an element twice (the parallel backends write each element from one place). The layout
/// ops that move values are instances (`LayoutOp.execution`): transpose (the source view permuted),
/// concatND (each input into its slice of the output along the axis; interleaved, into every K-th
/// slice), constantPad (the input into the output's interior, the border filled first), and their
/// backward passes (`reversed`). `simplified` gives the backends the fewest axes for the same copy.
public struct StridedCopy: Hashable, Sendable {
    /// Where the box lies in a buffer: the element of index 0 and the step of each axis.
    public struct View: Hashable, Sendable {
        /// The buffer element of index (0, ..., 0).
        public var offset: Int
        /// The buffer step of each axis of the box.
        public var strides: [Int]

        public init(offset: Int = 0, strides: [Int]) { self.offset = offset; self.strides = strides }

        /// A contiguous row-major tensor of `dims` starting at `offset`.
        public static func contiguous(_ dims: [Int], offset: Int = 0) -> View {
            var s = [Int](repeating: 1, count: dims.count)
            var acc = 1
            for k in stride(from: dims.count - 1, through: 0, by: -1) { s[k] = acc; acc *= dims[k] }
            return View(offset: offset, strides: s)
        }

        /// The fewest buffer elements the view reaches within over `dims` (0 for an empty box).
        public func extent(_ dims: [Int]) -> Int {
            guard !dims.contains(0) else { return 0 }
            return offset + zip(dims, strides).reduce(0) { $0 + ($1.0 - 1) * $1.1 } + 1
        }
    }

    /// The box's size along each axis.
    public var dims: [Int]
    /// Where the values are read.
    public var source: View
    /// Where they are written.
    public var destination: View

    /// The most axes the OpenCL kernel takes after `simplified` (a transpose's six and the batch).
    public static let maxRank = TransposeGeometry.maxRank + 1

    /// A copy of the box `dims` between two views; unchecked until `validate(_:)`.
    public init(dims: [Int], source: View, destination: View) {
        self.dims = dims; self.source = source; self.destination = destination
    }

    /// Values copied.
    public var count: Int { dims.reduce(1, *) }
    /// The fewest source elements the copy reads within.
    public var sourceExtent: Int { source.extent(dims) }
    /// The fewest destination elements the copy writes within.
    public var destinationExtent: Int { destination.extent(dims) }

    /// The copy back, from the destination's view into the source's (a layout op's backward pass).
    public var reversed: StridedCopy { StridedCopy(dims: dims, source: destination, destination: source) }

    /// The same copy on the fewest axes: size-1 axes dropped, the axes put in the destination's
    /// order (largest stride first, so the walk writes the destination in order), and an axis merged
    /// with the next when both views step over that next axis contiguously. At least one axis.
    public var simplified: StridedCopy {
        let kept = dims.indices.filter { dims[$0] != 1 }.sorted {
            (destination.strides[$0], source.strides[$0]) > (destination.strides[$1], source.strides[$1])
        }
        var d: [Int] = [], s: [Int] = [], t: [Int] = []
        for k in kept {
            let size = dims[k], ss = source.strides[k], ts = destination.strides[k]
            if let last = d.indices.last, s[last] == ss * size, t[last] == ts * size {
                d[last] *= size; s[last] = ss; t[last] = ts
            } else {
                d.append(size); s.append(ss); t.append(ts)
            }
        }
        if d.isEmpty { d = [1]; s = [1]; t = [1] }
        return StridedCopy(dims: d, source: View(offset: source.offset, strides: s),
                           destination: View(offset: destination.offset, strides: t))
    }

    /// Checks that the sizes, offsets and strides are at least 0 and every view has a stride per axis.
    public func validate(_ what: String) throws {
        guard source.strides.count == dims.count, destination.strides.count == dims.count else {
            throw UpdraftError(.invalidArgument, "\(what): \(dims.count) axes \(dims) but \(source.strides.count) source and \(destination.strides.count) destination strides")
        }
        guard dims.allSatisfy({ $0 >= 0 }), source.offset >= 0, destination.offset >= 0,
              (source.strides + destination.strides).allSatisfy({ $0 >= 0 }) else {
            throw UpdraftError(.invalidArgument, "\(what): sizes \(dims), offsets \(source.offset)/\(destination.offset) and strides \(source.strides)/\(destination.strides) must be at least 0")
        }
    }

    /// No arithmetic; every copied value read once and written once.
    public var cost: OpCost { OpCost(flops: 0, bytes: f32Bytes(count, count)) }
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

    /// The permuted copy as a strided copy of the whole batch: the output's axes in order (the batch
    /// first), each read with the stride of its input axis.
    public var stridedCopy: StridedCopy {
        let inStrides = inputStrides
        let outDims = [batch] + outputDims
        return StridedCopy(dims: outDims, source: .init(offset: 0, strides: [exampleCount] + perm.map { inStrides[$0] }),
                           destination: .contiguous(outDims))
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
