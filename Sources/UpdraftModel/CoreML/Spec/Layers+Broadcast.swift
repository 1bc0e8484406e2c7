import UpdraftCore

/// The parameter messages of the broadcasting and reducing layers: add/subtract/multiply/divideBroadcastable,
/// loadConstant and loadConstantND, reduce, the ND reduce layers and argMax / argMin (layer type numbers in
/// CoreMLTypes.swift; the reduce modes in Ops/Reduce.swift).
extension BinaryOp {
    /// The *BroadcastableLayerParams layer type of NeuralNetworkLayer.
    public var broadcastableLayerType: NeuralNetworkLayerType {
        switch self {
        case .add: return .addBroadcastable
        case .subtract: return .subtractBroadcastable
        case .multiply: return .multiplyBroadcastable
        case .divide: return .divideBroadcastable
        }
    }

    /// The *BroadcastableLayerParams field of NeuralNetworkLayer.
    public var broadcastableLayerField: Int { broadcastableLayerType.rawValue }
}

/// LoadConstantLayerParams (rank 5 [1, 1, C, H, W]; `shape` [C, H, W]) and LoadConstantNDLayerParams
/// (any rank): shape (1), data (2).
public struct LoadConstantLayerParams: Hashable, Sendable {
    /// shape (1): the constant's dimensions, `[C, H, W]` for loadConstant, any rank for loadConstantND.
    public var shape: [Int]
    /// data (2): the constant's values, row-major, one per element of `shape`.
    public var data: WeightParams
    /// loadConstantND (1070) rather than loadConstant (290).
    public var isND: Bool
    /// A constant of `shape` holding `data`, as loadConstantND when `isND`.
    public init(shape: [Int], data: WeightParams, isND: Bool) { self.shape = shape; self.data = data; self.isND = isND }
}

/// ReduceLayerParams: mode (1; SUM 0, AVG 1, PROD 2, LOGSUM 3, SUMSQUARE 4, L1 5, L2 6, MAX 7, MIN 8,
/// ARGMAX 9), epsilon (2), axis (3; CHW 0, HW 1, C 2, H 3, W 4).
public struct ReduceLayerParams: Hashable, Sendable {
    /// mode (1): the ReduceOperation code (SUM 0 … ARGMAX 9; see `modeName`).
    public var mode: Int32
    /// epsilon (2) as stored: the small constant Core ML adds for numerical stability in the log-based modes.
    public var epsilon: Float
    /// axis (3): the rank-5 axes reduced, CHW 0, HW 1, C 2, H 3, W 4.
    public var axis: Int32
    /// A reduce layer as stored; epsilon defaults to 0 (Core ML's default).
    public init(mode: Int32, epsilon: Float = 0, axis: Int32) { self.mode = mode; self.epsilon = epsilon; self.axis = axis }

    /// The ReduceOperation name (`SUM`, `AVG`, …, `ARGMAX`), or "mode N" for an unknown code.
    public var modeName: String {
        let names = ["SUM", "AVG", "PROD", "LOGSUM", "SUMSQUARE", "L1", "L2", "MAX", "MIN", "ARGMAX"]
        return mode >= 0 && Int(mode) < names.count ? names[Int(mode)] : "mode \(mode)"
    }
}

/// The ND reduce layers' parameters: ReduceSum/Mean/Max/...LayerParams (axes (1), keepDims (2),
/// reduceAll (3)), and ArgMax/ArgMinLayerParams (axis (1), removeDim (2)), read into the same fields.
public struct ReduceNDLayerParams: Hashable, Sendable {
    /// Which reduction: the table of modes in Ops/Reduce.swift (raw value: the NeuralNetworkLayer field name).
    public typealias Kind = ReduceMode
    /// The reduction.
    public var kind: Kind
    /// axes (1): the axes of the logical N-D shape to reduce (negative counts from the end); ignored with
    /// `reduceAll`. argMax / argMin: the one axis.
    public var axes: [Int]
    /// keepDims (2): keep reduced axes as size 1 instead of removing them (argMax / argMin: not removeDim).
    public var keepDims: Bool
    /// reduceAll (3): reduce over every axis (never for argMax / argMin).
    public var reduceAll: Bool
    /// A reduction of `kind` over `axes` (or all axes).
    public init(kind: Kind, axes: [Int], keepDims: Bool, reduceAll: Bool = false) {
        self.kind = kind; self.axes = axes; self.keepDims = keepDims; self.reduceAll = reduceAll
    }
}

extension ReduceMode {
    /// The NeuralNetworkLayer layer type of the ND layer.
    public var layerType: NeuralNetworkLayerType { NeuralNetworkLayerType(rawValue: layerField)! }
    /// The NeuralNetworkLayer oneof field number (reduceSum 1270, reduceMean 1280, reduceMax 1260, ...).
    public var field: Int { layerField }
}

extension LoadConstantLayerParams {
    init(reading r: ProtoReader, isND: Bool) throws {
        shape = try r.sizes(1, "shape")
        data = try r.message(2, "data").map(WeightParams.init(reading:)) ?? .empty
        self.isND = isND
    }

    func encoded(into w: inout MessageWriter) {
        w.sizes(1, shape)
        w.message(2, data.encoded())
    }
}

extension ReduceLayerParams {
    init(reading r: ProtoReader) throws {
        mode = try r.int32(1, "mode") ?? 0
        epsilon = try r.float(2, "epsilon") ?? 0
        axis = try r.int32(3, "axis") ?? 0
    }

    func encoded(into w: inout MessageWriter) {
        w.int32(1, mode)
        w.float(2, epsilon)
        w.int32(3, axis)
    }
}

extension ReduceNDLayerParams {
    init(reading r: ProtoReader, kind: Kind) throws {
        self.kind = kind
        if kind.isArgument {
            axes = [Int(try r.int64(1, "axis") ?? 0)]
            keepDims = !(try r.bool(2, "removeDim") ?? false)
            reduceAll = false
            return
        }
        axes = try r.varints(1, "axes").map { Int(Int64(bitPattern: $0)) }
        keepDims = try r.bool(2, "keepDims") ?? false
        reduceAll = try r.bool(3, "reduceAll") ?? false
    }

    func encoded(into w: inout MessageWriter) {
        if kind.isArgument {
            w.int64(1, Int64(axes.first ?? 0))
            w.bool(2, !keepDims)
            return
        }
        w.int64s(1, axes.map(Int64.init))
        w.bool(2, keepDims)
        w.bool(3, reduceAll)
    }
}

// MARK: - Shape rule (what the graph makes of these layers)

/// Shape inference of the broadcasting and reducing layers: add / multiply with one input (the
/// constant alpha) or two of different shapes, the *Broadcastable layers, loadConstant(ND), reduce, the
/// ND reduce layers and argMax / argMin (the modes in Ops/Reduce.swift).
///
/// Broadcasting and axes work on the blobs' logical (N-D) shapes, as the model describes them
/// (`LogicalShape`): numpy's rules align dimensions on the right, axes count on the model's rank, and
/// the batch axis is neither reduced nor broadcast. Each example's memory is its dimensions after the
/// batch axis, which is what the ops run on (the batch prepended).
extension ShapeInference {
    static func broadcastLayer(_ layer: LayerSpec, inputShapes: [Shape], logical: [LogicalShape]) throws
        -> (op: LayerOp, output: Shape, weights: Tensor?, logical: LogicalShape?) {
        func fail(_ message: String, hint: String? = nil, kind: UpdraftError.Kind = .invalidModel) -> UpdraftError {
            UpdraftError(kind, "layer '\(layer.name)' (\(layer.typeName)): \(message)", hint: hint)
        }
        func expectInputs(_ n: Int) throws {
            guard inputShapes.count == n else { throw fail("has \(inputShapes.count) inputs; expected \(n)") }
        }
        func binary(_ op: BinaryOp) throws -> (LayerOp, Shape, Tensor?, LogicalShape?) {
            try expectInputs(2)
            let (a, b) = (logical[0], logical[1])
            // numpy on the model's dimensions (aligned on the right); the batch (1 here) broadcasts like
            // any 1, and each example's memory is its dimensions after the batch axis.
            let full: BroadcastGeometry
            do {
                full = try BroadcastGeometry(op: op, a: a.dims, b: b.dims)
            } catch let e as UpdraftError {
                throw fail("inputs '\(layer.inputs[0])' \(a) and '\(layer.inputs[1])' \(b): \(e.message)",
                           hint: "broadcasting needs each pair of dimensions, aligned on the right, equal or one of them 1")
            }
            let longer = a.rank >= b.rank ? a : b
            let outLogical = LogicalShape(full.outputDims, batchAxis: longer.batchAxis)
            let rank = max(a.exampleDims.count, b.exampleDims.count, outLogical.exampleDims.count, 1)
            guard rank + 1 <= BroadcastGeometry.maxRank else {
                throw fail("broadcasting \(a) and \(b) has \(rank) dimensions per example; Updraft runs up to \(BroadcastGeometry.maxRank - 1)",
                           kind: .unsupported)
            }
            func padded(_ d: [Int]) -> [Int] { [Int](repeating: 1, count: rank - d.count) + d }
            let (ea, eb, eo) = (padded(a.exampleDims), padded(b.exampleDims), padded(outLogical.exampleDims))
            guard let g = try? BroadcastGeometry(op: op, a: [1] + ea, b: [1] + eb), g.outputDims == [1] + eo else {
                throw fail("inputs '\(layer.inputs[0])' \(a) and '\(layer.inputs[1])' \(b) broadcast across the batch axis, which Updraft does not run",
                           kind: .unsupported)
            }
            return (.broadcast(op, a: ea, b: eb), outLogical.canonical, nil, outLogical)
        }

        switch layer.params {
        case let .add(alpha) where inputShapes.count == 1:  // y = x + alpha
            return (.activation(.linear(alpha: 1, beta: alpha)), inputShapes[0], nil, nil)
        case let .multiply(alpha) where inputShapes.count == 1:  // y = alpha x
            return (.activation(.linear(alpha: alpha, beta: 0)), inputShapes[0], nil, nil)
        case .add: return try binary(.add)
        case .multiply: return try binary(.multiply)
        case let .broadcastable(op): return try binary(op)

        case let .loadConstant(c):
            try expectInputs(0)
            // The same values for every example: loadConstant's [C, H, W] is [1, 1, C, H, W] (batch at 1);
            // a loadConstantND shape keeps its dimensions, a leading 1 read as the batch.
            let dims = c.isND ? c.shape : [1, 1] + c.shape
            if !c.isND, c.shape.count != 3 { throw fail("shape \(c.shape) must list 3 values [C, H, W]") }
            guard !dims.isEmpty, dims.count <= 5 else {
                throw fail("a constant of shape \(c.shape) is not supported", hint: "Updraft runs constants of rank 1 to 5", kind: .unsupported)
            }
            let logicalShape = LogicalShape(dims, batchAxis: c.isND ? (dims.count >= 2 && dims[0] == 1 ? 0 : nil) : 1)
            let shape = try LayerShapes.checkedShape(logicalShape.canonical.dims, "layer '\(layer.name)' constant")
            let tensor = try LayerShapes.tensor(c.data, shape: shape, layer: layer, what: "data")
            return (.constant, shape, tensor, logicalShape)

        case let .reduce(r):
            try expectInputs(1)
            guard let mode = ReduceMode.reduceLayer(mode: r.mode) else {
                let names = ReduceMode.allCases.compactMap { m in m.reduceLayerMode.map { ReduceLayerParams(mode: $0, axis: 0).modeName } }
                let list = names.count > 1 ? names.dropLast().joined(separator: ", ") + " and " + names.last! : names.joined()
                throw fail("\(r.modeName) reduction is not supported", hint: "Updraft runs \(list) reductions",
                           kind: .unsupported)
            }
            let axes: [Int]
            switch r.axis {
            case 0: axes = [-3, -2, -1]
            case 1: axes = [-2, -1]
            case 2: axes = [-3]
            case 3: axes = [-2]
            case 4: axes = [-1]
            default: throw fail("axis \(r.axis) is not CHW (0), HW (1), C (2), H (3) or W (4)")
            }
            guard logical[0].rank >= -axes[0] else {
                throw fail("reducing axes \(axes) needs an input of rank \(-axes[0]) or more; '\(layer.inputs[0])' is \(logical[0])")
            }
            if mode.kind.isIndex, axes.count > 1 {
                throw fail("\(r.modeName) over several axes is not defined", hint: "Core ML's ARGMAX reduces one axis: C, H or W")
            }
            // epsilon: what LOGSUM adds to the sum inside its log.
            return try reduction(layer, logical[0], axes: axes, all: false, mode: mode, offset: Double(r.epsilon), keepDims: true, fail)

        case let .reduceND(r):
            try expectInputs(1)
            guard r.reduceAll || !r.axes.isEmpty else { throw fail("lists no axes and reduceAll is not set") }
            return try reduction(layer, logical[0], axes: r.axes, all: r.reduceAll, mode: r.kind, offset: 0, keepDims: r.keepDims, fail)

        default:
            throw fail("is not a broadcasting or reducing layer")
        }
    }

    /// A reduction over `axes` of the model's dimensions (negative from the end), or over every
    /// dimension of an example (`all`). The batch axis is refused; dimensions before it are 1.
    private static func reduction(_ layer: LayerSpec, _ input: LogicalShape, axes: [Int], all: Bool, mode: ReduceMode,
                                  offset: Double, keepDims: Bool, _ fail: (String, String?, UpdraftError.Kind) -> UpdraftError) throws
        -> (op: LayerOp, output: Shape, weights: Tensor?, logical: LogicalShape?) {
        let first = input.batchAxis.map { $0 + 1 } ?? 0  // the first per-example dimension
        var reduced = Set<Int>()
        if all {
            reduced = Set(first..<input.rank)
        } else {
            for a in axes {
                let resolved = a < 0 ? a + input.rank : a
                guard resolved >= 0, resolved < input.rank else {
                    throw fail("axis \(a) is outside \(-input.rank)...\(input.rank - 1) for the rank-\(input.rank) input \(input)", nil, .invalidModel)
                }
                if resolved == input.batchAxis {
                    throw fail("reducing over axis \(a) (the batch of \(input)) is not supported", "reduce over the per-example axes", .unsupported)
                }
                guard reduced.insert(resolved).inserted else { throw fail("axis \(a) is listed twice", nil, .invalidModel) }
            }
        }
        let example = input.exampleDims
        var out = example
        for d in reduced where d >= first { out[d - first] = 1 }
        if mode.kind.needsElements, reduced.contains(where: { $0 >= first && example[$0 - first] == 0 }) {
            throw fail("a \(mode.kind.rawValue) over an empty axis of \(input) has no value", nil, .invalidModel)
        }
        guard example.count + 1 <= BroadcastGeometry.maxRank else {
            throw fail("a rank-\(input.rank) reduction is not supported", nil, .unsupported)
        }
        // The output as the model sees it: reduced dimensions kept as 1 or dropped.
        var dims: [Int] = [], batchAxis: Int? = nil
        for (d, size) in input.dims.enumerated() {
            if d == input.batchAxis { batchAxis = dims.count }
            if reduced.contains(d) {
                if keepDims { dims.append(1) }
            } else {
                dims.append(d >= first ? out[d - first] : size)
            }
        }
        if dims.isEmpty { dims = [1] }
        let outLogical = LogicalShape(dims, batchAxis: batchAxis)
        let spec = ReductionSpec(mode: mode, input: example.isEmpty ? [1] : example, output: out.isEmpty ? [1] : out, offset: offset)
        return (.reduce(spec),
                outLogical.canonical, nil, outLogical)
    }
}

extension LayerParams {
    /// Layers that produce a value without reading any blob (constants).
    var readsNoInput: Bool { if case .loadConstant = self { return true } else { return false } }
}

/// loadConstant(ND), reduce and the ND reduce layers read their parameters in
/// `ShapeInference.broadcastLayer` (the *Broadcastable types and add / multiply, which have no parameter
/// message of their own, are `ShapeInference.layer`'s cases).
extension LoadConstantLayerParams: LayerShapeRule {
    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer { try ShapeInference.broadcastRule(c) }
}

extension ReduceLayerParams: LayerShapeRule {
    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer { try ShapeInference.broadcastRule(c) }
}

extension ReduceNDLayerParams: LayerShapeRule {
    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer { try ShapeInference.broadcastRule(c) }
}

extension ShapeInference {
    /// `broadcastLayer` as a shape rule.
    static func broadcastRule(_ c: ShapeRuleContext) throws -> InferredLayer {
        let r = try broadcastLayer(c.layer, inputShapes: c.inputShapes, logical: c.logical)
        return InferredLayer(op: r.op, output: r.output, weights: r.weights, outputLogical: r.logical)
    }
}
