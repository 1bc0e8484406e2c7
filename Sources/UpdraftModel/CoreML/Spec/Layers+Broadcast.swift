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
