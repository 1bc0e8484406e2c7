import UpdraftCore

/// The layout layers: ones that re-label a tensor's shape (reshapeStatic, reshape, flattenTo2D,
/// squeeze, expandDims, copy) and ones that move data along axes of the logical N-D shape
/// (transpose, permute, softmaxND, concatND, constantPad). Field numbers from coremltools' NeuralNetwork.proto.
public enum LayoutLayerParams: Hashable, Sendable {
    /// ReshapeStaticLayerParams.targetShape (1): the output's N-D shape.
    case reshapeStatic(targetShape: [Int])
    /// ReshapeLayerParams (rank-5 semantics): targetShape (1) of 3 `[C, H, W]` or 4 `[Seq, C, H, W]`
    /// values, mode (2) CHANNEL_FIRST = 0 / CHANNEL_LAST = 1.
    case reshape(targetShape: [Int], mode: Int32)
    /// RankPreservingReshapeLayerParams.targetShape (1): one value per axis, 0 keeps the input's, one -1 is inferred.
    case rankPreservingReshape(targetShape: [Int])
    /// ReshapeLikeLayerParams (no fields): input 0 takes the shape of input 1.
    case reshapeLike
    /// FlattenTo2DLayerParams.axis (1).
    case flattenTo2D(axis: Int)
    /// SqueezeLayerParams: axes (1), squeezeAll (2).
    case squeeze(axes: [Int], squeezeAll: Bool)
    /// ExpandDimsLayerParams.axes (1), positions in the output.
    case expandDims(axes: [Int])
    /// CopyLayerParams (no fields).
    case copy
    /// TransposeLayerParams.axes (1): output axis i is input axis axes[i].
    case transpose(axes: [Int])
    /// PermuteLayerParams.axis (1): a permutation of the rank-5 `[Seq, B, C, H, W]` axes (B stays).
    case permute(axes: [Int])
    /// SoftmaxNDLayerParams.axis (1).
    case softmaxND(axis: Int)
    /// ConcatNDLayerParams: axis (1), interleave (2).
    case concatND(axis: Int, interleave: Bool)
    /// ConstantPaddingLayerParams: value (1); padAmounts (2), a before and an after amount per axis,
    /// pair i for axis i (fewer pairs than axes pad the last axes); padToGivenOutputSizeMode (3): the
    /// non-zero amount of each pair is the axis's output size instead, padded on that side.
    case constantPad(value: Float, padAmounts: [Int], padToGivenOutputSizeMode: Bool)

    /// The NeuralNetworkLayer types read as layout layers.
    static let layerTypes: [NeuralNetworkLayerType] = [
        .reshape, .permute, .copy, .softmaxND, .concatND, .transpose, .squeeze, .expandDims, .flattenTo2D,
        .reshapeLike, .reshapeStatic, .rankPreservingReshape, .constantPad,
    ]

    /// The NeuralNetworkLayer type of this layout layer (e.g. transpose, reshapeStatic).
    public var layerType: NeuralNetworkLayerType {
        switch self {
        case .reshape: return .reshape
        case .permute: return .permute
        case .copy: return .copy
        case .softmaxND: return .softmaxND
        case .concatND: return .concatND
        case .transpose: return .transpose
        case .squeeze: return .squeeze
        case .expandDims: return .expandDims
        case .flattenTo2D: return .flattenTo2D
        case .reshapeStatic: return .reshapeStatic
        case .reshapeLike: return .reshapeLike
        case .rankPreservingReshape: return .rankPreservingReshape
        case .constantPad: return .constantPad
        }
    }

    /// The NeuralNetworkLayer oneof field number of this layout layer (e.g. transpose 985, reshapeStatic 1140).
    public var typeField: Int { layerType.rawValue }

    /// Reads the parameter message of layer type `type` (one of `layerTypes`).
    init(reading p: ProtoReader, type: NeuralNetworkLayerType) throws {
        func ints(_ n: Int, _ name: String) throws -> [Int] { try p.varints(n, name).map { Int(truncatingIfNeeded: Int64(bitPattern: $0)) } }
        func int(_ n: Int, _ name: String) throws -> Int { Int(truncatingIfNeeded: try p.int64(n, name) ?? 0) }
        switch type {
        case .reshape: self = .reshape(targetShape: try ints(1, "targetShape"), mode: try p.int32(2, "mode") ?? 0)
        case .permute: self = .permute(axes: try ints(1, "axis"))
        case .copy: self = .copy
        case .softmaxND: self = .softmaxND(axis: try int(1, "axis"))
        case .concatND: self = .concatND(axis: try int(1, "axis"), interleave: try p.bool(2, "interleave") ?? false)
        case .transpose: self = .transpose(axes: try ints(1, "axes"))
        case .squeeze: self = .squeeze(axes: try ints(1, "axes"), squeezeAll: try p.bool(2, "squeezeAll") ?? false)
        case .expandDims: self = .expandDims(axes: try ints(1, "axes"))
        case .flattenTo2D: self = .flattenTo2D(axis: try int(1, "axis"))
        case .reshapeLike: self = .reshapeLike
        case .rankPreservingReshape: self = .rankPreservingReshape(targetShape: try ints(1, "targetShape"))
        case .constantPad:
            self = .constantPad(value: try p.float(1, "value") ?? 0, padAmounts: try p.sizes(2, "padAmounts"),
                                padToGivenOutputSizeMode: try p.bool(3, "padToGivenOutputSizeMode") ?? false)
        default: self = .reshapeStatic(targetShape: try ints(1, "targetShape"))
        }
    }

    /// The parameter message, for typed-spec models (ModelBuilder).
    func encoded() -> ProtoMessage {
        var w = MessageWriter()
        switch self {
        case let .reshapeStatic(t), let .rankPreservingReshape(t): w.int64s(1, t.map(Int64.init))
        case .reshapeLike: break
        case let .reshape(t, mode): w.int64s(1, t.map(Int64.init)); w.int32(2, mode)
        case let .flattenTo2D(axis): w.int64(1, Int64(axis))
        case let .squeeze(axes, all): w.int64s(1, axes.map(Int64.init)); w.bool(2, all)
        case let .expandDims(axes): w.int64s(1, axes.map(Int64.init))
        case .copy: break
        case let .transpose(axes), let .permute(axes): w.sizes(1, axes)
        case let .softmaxND(axis): w.int64(1, Int64(axis))
        case let .concatND(axis, interleave): w.int64(1, Int64(axis)); w.bool(2, interleave)
        case let .constantPad(value, amounts, toSize): w.float(1, value); w.sizes(2, amounts); w.bool(3, toSize)
        }
        return w.message
    }
}

// MARK: - Shape rule (what the graph makes of these layers)

/// Shape inference of the layout layers on the logical N-D shape (LogicalShape): the op, the
/// canonical 4-D output and the output's logical shape. Errors name the layer, its type, the
/// parameter and the shapes.
extension ShapeInference {
    static func layout(_ params: LayoutLayerParams, layer: LayerSpec, inputShapes: [Shape],
                       logical: [LogicalShape]) throws -> (LayerOp, Shape, LogicalShape?) {
        func fail(_ message: String, hint: String? = nil, kind: UpdraftError.Kind = .invalidModel) -> UpdraftError {
            UpdraftError(kind, "layer '\(layer.name)' (\(layer.typeName)): \(message)", hint: hint)
        }
        guard let x = logical.first else { throw fail("has no input") }
        switch params {
        case .concatND: break
        case .reshapeLike: guard logical.count == 2 else { throw fail("has \(logical.count) inputs; expected 2 (the tensor, and the tensor whose shape it takes)") }
        case .constantPad where logical.count == 2:
            throw fail("takes its padAmounts from the second input '\(layer.inputs[1])'; Updraft runs constantPad with padAmounts in the layer's parameters",
                       hint: "convert with the padding known when the model is built", kind: .unsupported)
        default: guard logical.count == 1 else { throw fail("has \(logical.count) inputs; expected 1") }
        }
        let kind = layer.typeName
        /// An alias op's result: the same values under `out`, checked for size and element count.
        func alias(_ out: LogicalShape) throws -> (LayerOp, Shape, LogicalShape?) {
            _ = try LayerShapes.checkedShape(out.dims, "layer '\(layer.name)' (\(kind)) output")
            guard out.count == x.count else {
                throw fail("output shape \(out.dims) holds \(out.count) values but the input '\(layer.inputs[0])' of shape \(x.dims) holds \(x.count)")
            }
            let canonical = try LayerShapes.checkedShape(out.canonical.dims, "layer '\(layer.name)' (\(kind)) output")
            return (.layout(.alias(kind: kind)), canonical, out)
        }

        /// One example's (outer, axis, inner) around logical axis `a`; the batch axis and the size-1
        /// axes before it cannot be the axis (each example is computed on its own).
        func split(_ s: LogicalShape, axis a: Int, what: String) throws -> (Int, Int, Int) {
            if let b = s.batchAxis, a <= b {
                throw fail("\(what) axis \(a) of \(s) mixes examples: axis \(b) is the batch, and axes up to it hold one example each",
                           hint: "use an axis after the batch axis \(b)", kind: .unsupported)
            }
            let e = s.batchAxis.map { a - $0 - 1 } ?? a
            let ex = s.exampleDims
            return (ex[..<e].reduce(1, *), ex[e], ex[(e + 1)...].reduce(1, *))
        }
        /// A transpose of `s` by `perm`: an alias when no value moves, else the permuted copy of one example.
        func permuted(_ s: LogicalShape, _ perm: [Int]) throws -> (LayerOp, Shape, LogicalShape?) {
            let dims = perm.map { s.dims[$0] }
            var batch: Int? = nil
            if let b = s.batchAxis {
                let nb = perm.firstIndex(of: b)!
                if let moved = dims[..<nb].firstIndex(where: { $0 != 1 }) {
                    throw fail("axes \(perm) put axis \(perm[moved]) (size \(dims[moved])) before the batch axis \(b) of \(s); Updraft keeps the batch outermost",
                               kind: .unsupported)
                }
                batch = nb
            }
            let out = LogicalShape(dims, batchAxis: batch)
            let canonical = try LayerShapes.checkedShape(out.canonical.dims, "layer '\(layer.name)' (\(kind)) output")
            // One example: the input axes after the batch axis; the permutation among them.
            let first = s.batchAxis.map { $0 + 1 } ?? 0
            let exampleAxes = Array(first..<s.rank)
            let order = perm.filter { $0 >= first }
            let g = TransposeGeometry(batch: 1, dims: exampleAxes.map { s.dims[$0] }, perm: order.map { $0 - first })
            let simple = g.simplified
            if simple.isIdentity { return (.layout(.alias(kind: kind)), canonical, out) }
            guard simple.dims.count <= TransposeGeometry.maxRank else {
                throw fail("moves \(simple.dims.count) separate axes of \(s); Updraft's transpose takes \(TransposeGeometry.maxRank)",
                           kind: .unsupported)
            }
            return (.layout(.transpose(g, kind: kind)), canonical, out)
        }

        /// `target` with one -1 inferred from the input's element count (and, for rankPreservingReshape, 0s kept).
        func resolved(_ target: [Int], zeroKeeps: Bool) throws -> [Int] {
            guard !target.isEmpty else { throw fail("targetShape is empty") }
            var dims = target
            if zeroKeeps {
                guard target.count == x.rank else {
                    throw fail("targetShape \(target) has \(target.count) values but input '\(layer.inputs[0])' has rank \(x.rank) (shape \(x.dims))")
                }
                for i in dims.indices where dims[i] == 0 { dims[i] = x.dims[i] }
            }
            let target = dims
            let unknown = target.indices.filter { target[$0] == -1 }
            guard unknown.count <= 1 else { throw fail("targetShape \(target) has more than one -1") }
            for d in target where d == 0 || d < -1 {
                throw fail("targetShape \(target) has dimension \(d); dimensions must be positive (or one -1, inferred)")
            }
            if let u = unknown.first {
                let known = target.filter { $0 > 0 }.reduce(1) { $0.multipliedReportingOverflow(by: $1).partialValue }
                guard known > 0, x.count % known == 0 else {
                    throw fail("targetShape \(target) cannot hold the \(x.count) values of input '\(layer.inputs[0])' (shape \(x.dims))")
                }
                dims[u] = x.count / known
            }
            return dims
        }

        switch params {
        case let .reshapeStatic(target):
            return try alias(x.reshaped(to: try resolved(target, zeroKeeps: false)))

        case let .rankPreservingReshape(target):
            return try alias(x.reshaped(to: try resolved(target, zeroKeeps: true)))

        case .reshapeLike:
            return try alias(logical[1])

        case let .reshape(target, mode):
            guard target.count == 3 || target.count == 4 else {
                throw fail("targetShape \(target) has \(target.count) values; expected 3 ([C, H, W]) or 4 ([Seq, C, H, W])")
            }
            if target.count == 4, target[0] != 1 {
                throw fail("targetShape \(target) sets the sequence length to \(target[0]); Updraft runs sequence length 1",
                           kind: .unsupported)
            }
            let chw = Array(target.suffix(3))
            for d in chw where d < 1 { throw fail("targetShape \(target) has dimension \(d); dimensions must be positive") }
            let e = x.canonical
            switch mode {
            case 0: break
            case 1:
                // CHANNEL_LAST reads (H, W, C) order; it is the same as CHANNEL_FIRST when one side of each is 1.
                guard e.h * e.w == 1 || e.c == 1, chw[1] * chw[2] == 1 || chw[0] == 1 else {
                    throw fail("CHANNEL_LAST reshape of \(x.dims) to \(target) rearranges the data, which is not supported",
                               hint: "use CHANNEL_FIRST (mode 0), or a transpose followed by reshapeStatic", kind: .unsupported)
                }
            default: throw fail("mode \(mode) is not CHANNEL_FIRST (0) or CHANNEL_LAST (1)")
            }
            let prefix = x.batchAxis.map { Array(x.dims[...$0]) } ?? []
            return try alias(LogicalShape(prefix + chw, batchAxis: x.batchAxis))

        case let .flattenTo2D(axis):
            // A negative axis counts from the end (-1: the last axis); a positive one may be the rank itself.
            let a = axis < 0 ? axis + x.rank : axis
            guard a >= 0, a <= x.rank else {
                throw fail("axis \(axis) is outside \(-x.rank)...\(x.rank) for input '\(layer.inputs[0])' of shape \(x.dims)")
            }
            return try alias(x.reshaped(to: [x.dims[..<a].reduce(1, *), x.dims[a...].reduce(1, *)]))

        case let .squeeze(axes, squeezeAll):
            var remove: Set<Int> = []
            if squeezeAll {
                remove = Set(x.dims.indices.filter { x.dims[$0] == 1 })
            } else {
                guard !axes.isEmpty else { throw fail("lists no axes and squeezeAll is false", hint: "set axes, or squeezeAll") }
                for a in axes {
                    let r = try x.axis(a, "layer '\(layer.name)' (\(kind)) axes \(axes)")
                    guard x.dims[r] == 1 else {
                        throw fail("axis \(a) of input '\(layer.inputs[0])' (shape \(x.dims)) has size \(x.dims[r]); only axes of size 1 can be squeezed")
                    }
                    guard remove.insert(r).inserted else { throw fail("axes \(axes) name axis \(r) twice") }
                }
            }
            var dims: [Int] = [], batch: Int? = nil
            for (i, d) in x.dims.enumerated() where !remove.contains(i) {
                if i == x.batchAxis { batch = dims.count }
                dims.append(d)
            }
            if dims.isEmpty { dims = [1] }  // Core ML keeps at least rank 1
            return try alias(LogicalShape(dims, batchAxis: batch))

        case let .expandDims(axes):
            guard !axes.isEmpty else { throw fail("lists no axes") }
            let rank = x.rank + axes.count
            var inserted: Set<Int> = []
            for a in axes {
                let r = try x.axis(a, rank: rank, "layer '\(layer.name)' (\(kind)) axes \(axes) (output rank \(rank))")
                guard inserted.insert(r).inserted else { throw fail("axes \(axes) name output axis \(r) twice") }
            }
            var dims: [Int] = [], batch: Int? = nil, next = 0
            for i in 0..<rank {
                if inserted.contains(i) { dims.append(1); continue }
                if next == x.batchAxis { batch = i }
                dims.append(x.dims[next])
                next += 1
            }
            return try alias(LogicalShape(dims, batchAxis: batch))

        case .copy:
            return try alias(x)

        case let .transpose(axes):
            guard axes.count == x.rank, Set(axes) == Set(0..<x.rank) else {
                throw fail("axes \(axes) are not a permutation of the \(x.rank) axes of input '\(layer.inputs[0])' (shape \(x.dims))")
            }
            return try permuted(x, axes)

        case let .permute(axes):
            // Rank-5 [Seq, B, C, H, W]; axes index [Seq, C, H, W] (B stays at 1).
            let order = axes.isEmpty ? [0, 1, 2, 3] : axes
            guard order.count == 4, Set(order) == Set(0..<4) else {
                throw fail("axis \(axes) is not a permutation of [0, 1, 2, 3] (Seq, C, H, W)")
            }
            let e = x.canonical
            let view = LogicalShape([1, 1, e.c, e.h, e.w], batchAxis: 1)
            let perm5 = [order[0], 1, order[1], order[2], order[3]].enumerated().map { i, v in i == 1 ? 1 : (v == 0 ? 0 : v + 1) }
            let (op, _, out5) = try permuted(view, perm5)
            // Back to the input's own prefix (up to its batch axis) with the permuted [C, H, W].
            let prefix = x.batchAxis.map { Array(x.dims[...$0]) } ?? []
            let out = LogicalShape(prefix + Array(out5!.dims.suffix(3)), batchAxis: x.batchAxis)
            return (op, try LayerShapes.checkedShape(out.canonical.dims, "layer '\(layer.name)' (\(kind)) output"), out)

        case let .softmaxND(axis):
            let a = try x.axis(axis, "layer '\(layer.name)' (\(kind)) axis")
            let (outer, length, inner) = try split(x, axis: a, what: "a softmax over")
            // Over the first axis of an example it is the channel softmax (and can feed the fused cross-entropy loss).
            if outer == 1, x.batchAxis.map({ a > $0 }) ?? true {
                return (.softmax, x.canonical, x)
            }
            return (.layout(.softmaxND(outer: outer, axis: length, inner: inner)), x.canonical, x)

        case let .constantPad(value, amounts, toSize):
            // Pair p of padAmounts pads axis rank - pairs + p (every axis when there are rank pairs).
            guard !amounts.isEmpty, amounts.count % 2 == 0 else {
                throw fail("padAmounts \(amounts) has \(amounts.count) values; expected a before and an after amount per padded axis")
            }
            let pairs = amounts.count / 2
            guard pairs <= x.rank else {
                throw fail("padAmounts \(amounts) has \(pairs) pairs but input '\(layer.inputs[0])' has rank \(x.rank) (shape \(x.dims))")
            }
            var before = [Int](repeating: 0, count: x.rank), after = before
            for p in 0..<pairs {
                let a = x.rank - pairs + p
                var (b, e) = (amounts[2 * p], amounts[2 * p + 1])
                if toSize {
                    guard b == 0 || e == 0 else {
                        throw fail("padToGivenOutputSizeMode is set and both padAmounts of axis \(a) (\(b), \(e)) are non-zero; only one may be (the axis's output size, padded on that side)")
                    }
                    (b, e) = (max(0, b - x.dims[a]), max(0, e - x.dims[a]))
                }
                before[a] = b; after[a] = e
            }
            if let batch = x.batchAxis, let a = (0...batch).first(where: { before[$0] + after[$0] > 0 }) {
                throw fail("pads axis \(a) of \(x), which is the batch axis \(batch) or before it; each example is padded on its own",
                           hint: "pad only the axes after the batch axis", kind: .unsupported)
            }
            let dims = x.dims.indices.map { x.dims[$0] + before[$0] + after[$0] }
            if dims == x.dims { return try alias(x) }
            let out = LogicalShape(dims, batchAxis: x.batchAxis)
            _ = try LayerShapes.checkedShape(dims, "layer '\(layer.name)' (\(kind)) output")
            let first = x.batchAxis.map { $0 + 1 } ?? 0
            return (.layout(.constantPad(dims: x.exampleDims, before: Array(before[first...]), after: Array(after[first...]), value: value)),
                    try LayerShapes.checkedShape(out.canonical.dims, "layer '\(layer.name)' (\(kind)) output"), out)

        case let .concatND(axis, interleave):
            if interleave, let (blob, s) = zip(layer.inputs, logical).first(where: { $0.1 != x }) {
                throw fail("interleave needs inputs of one shape, but '\(layer.inputs[0])' is \(x) and '\(blob)' is \(s)")
            }
            let a = try x.axis(axis, "layer '\(layer.name)' (\(kind)) axis")
            var channels: [Int] = []
            for (blob, s) in zip(layer.inputs, logical) {
                guard s.rank == x.rank, s.batchAxis == x.batchAxis,
                      s.dims.indices.allSatisfy({ $0 == a || s.dims[$0] == x.dims[$0] }) else {
                    throw fail("inputs must match except along axis \(axis), but '\(layer.inputs[0])' is \(x) and '\(blob)' is \(s)")
                }
                channels.append(s.dims[a])
            }
            let (outer, _, inner) = try split(x, axis: a, what: "a concatenation along")
            var dims = x.dims
            dims[a] = channels.reduce(0, +)
            let out = LogicalShape(dims, batchAxis: x.batchAxis)
            _ = try LayerShapes.checkedShape(dims, "layer '\(layer.name)' (\(kind)) output")
            return (.layout(.concatND(outer: outer, channels: channels, inner: inner, interleave: interleave)),
                    try LayerShapes.checkedShape(out.canonical.dims, "layer '\(layer.name)' (\(kind)) output"), out)
        }
    }
}

extension LayoutLayerParams: LayerShapeRule {
    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer {
        let (op, output, logical) = try ShapeInference.layout(self, layer: c.layer, inputShapes: c.inputShapes, logical: c.logical)
        return InferredLayer(op: op, output: output, outputLogical: logical)
    }
}
