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
