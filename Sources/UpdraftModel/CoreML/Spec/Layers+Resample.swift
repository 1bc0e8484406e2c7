import UpdraftCore

/// The resampling layers' parameter messages (NeuralNetwork.proto field numbers in comments), read
/// and written: one case per Core ML layer type, each with its decoder and encoder side by side.
/// Adding a resampling layer type: a case here, its entry in `layerTypes`, `layerType`, the reader
/// and the encoder; `LayerTable.swift` and `ShapeInference`'s dispatch read them from here.
public enum ResampleLayerParams: Hashable, Sendable {
    /// UpsampleLayerParams (field 210).
    case upsample(UpsampleLayerParams)
    /// ResizeBilinearLayerParams (field 211).
    case resizeBilinear(ResizeBilinearLayerParams)
    /// CropResizeLayerParams (field 212).
    case cropResize(CropResizeLayerParams)

    /// The NeuralNetworkLayer types read as resampling layers.
    static let layerTypes: [NeuralNetworkLayerType] = [.upsample, .resizeBilinear, .cropResize]

    /// Their proto names, as the "Updraft runs …" hint lists them.
    static var typeNames: String { layerTypes.map { NeuralNetworkLayerType.name(ofField: $0.rawValue) }.joined(separator: ", ") }

    /// The NeuralNetworkLayer type of this layer.
    public var layerType: NeuralNetworkLayerType {
        switch self {
        case .upsample: return .upsample
        case .resizeBilinear: return .resizeBilinear
        case .cropResize: return .cropResize
        }
    }

    /// Reads the parameter message of layer type `type` (one of `layerTypes`).
    init(reading r: ProtoReader, type: NeuralNetworkLayerType) throws {
        switch type {
        case .resizeBilinear: self = .resizeBilinear(try ResizeBilinearLayerParams(reading: r))
        case .cropResize: self = .cropResize(try CropResizeLayerParams(reading: r))
        default: self = .upsample(try UpsampleLayerParams(reading: r))
        }
    }

    func encoded(into w: inout MessageWriter) {
        switch self {
        case let .upsample(u): u.encoded(into: &w)
        case let .resizeBilinear(p): p.encoded(into: &w)
        case let .cropResize(p): p.encoded(into: &w)
        }
    }
}

extension LayerParams {
    /// UpsampleLayerParams (field 210): nearest-neighbour or bilinear upsampling by per-axis scale factors.
    public static func upsample(_ params: UpsampleLayerParams) -> LayerParams { .resampling(.upsample(params)) }
}

/// UpsampleLayerParams.
public struct UpsampleLayerParams: Hashable, Sendable {
    /// scalingFactor (1), [H, W]; empty reads as [1, 1].
    public var scalingFactor: [Int]
    /// fractionalScalingFactor (7), [H, W].
    public var fractionalScalingFactor: [Float]
    /// mode (5): NN = 0, BILINEAR = 1.
    public var mode: Int32
    /// linearUpsampleMode (6): DEFAULT = 0, ALIGN_CORNERS_TRUE = 1, ALIGN_CORNERS_FALSE = 2.
    public var linearUpsampleMode: Int32

    /// An upsample layer; `mode` NN 0 or BILINEAR 1, fractional factors and linear mode default to none/DEFAULT.
    public init(scalingFactor: [Int], fractionalScalingFactor: [Float] = [], mode: Int32, linearUpsampleMode: Int32 = 0) {
        self.scalingFactor = scalingFactor; self.fractionalScalingFactor = fractionalScalingFactor
        self.mode = mode; self.linearUpsampleMode = linearUpsampleMode
    }
}

extension UpsampleLayerParams {
    init(reading r: ProtoReader) throws {
        scalingFactor = try r.sizes(1, "scalingFactor")
        fractionalScalingFactor = try r.floats(7, "fractionalScalingFactor")
        mode = try r.int32(5, "mode") ?? 0
        linearUpsampleMode = try r.int32(6, "linearUpsampleMode") ?? 0
    }

    func encoded(into w: inout MessageWriter) {
        w.sizes(1, scalingFactor)
        w.int32(5, mode)
        w.int32(6, linearUpsampleMode)
        w.floats(7, fractionalScalingFactor)
    }
}

/// ResizeBilinearLayerParams.
public struct ResizeBilinearLayerParams: Hashable, Sendable {
    /// targetSize (1), [H_out, W_out]; empty reads as [1, 1].
    public var targetSize: [Int]
    /// mode (2): SamplingMode.samplingMethod (1), STRICT_ALIGN_ENDPOINTS_MODE 0 … ROI_ALIGN_MODE 3;
    /// nil when the file has no SamplingMode message (read as 0).
    public var samplingMethod: Int32?

    /// A resizeBilinear layer to `targetSize` with SamplingMode `samplingMethod` (nil: no mode message).
    public init(targetSize: [Int], samplingMethod: Int32?) { self.targetSize = targetSize; self.samplingMethod = samplingMethod }
}

extension ResizeBilinearLayerParams {
    init(reading r: ProtoReader) throws {
        targetSize = try r.sizes(1, "targetSize")
        samplingMethod = try r.message(2, "mode").map { try $0.int32(1, "samplingMethod") ?? 0 }
    }

    func encoded(into w: inout MessageWriter) {
        w.sizes(1, targetSize)
        if let method = samplingMethod { w.message(2) { $0.int32(1, method) } }
    }
}

/// CropResizeLayerParams.
public struct CropResizeLayerParams: Hashable, Sendable {
    /// targetSize (1), [H_out, W_out]; empty reads as [1, 1].
    public var targetSize: [Int]
    /// normalizedCoordinates (2): boxes in [0, 1], scaled by (H_in - 1) and (W_in - 1).
    public var normalizedCoordinates: Bool
    /// mode (3): SamplingMode.samplingMethod (1); nil when the file has no SamplingMode message (read as 0).
    public var samplingMethod: Int32?
    /// boxIndicesMode (4): BoxCoordinatesMode.boxMode (1), CORNERS_HEIGHT_FIRST 0 … CENTER_SIZE_WIDTH_FIRST 3;
    /// nil when the file has no BoxCoordinatesMode message (read as 0).
    public var boxMode: Int32?
    /// spatialScale (5): multiplies the box coordinates.
    public var spatialScale: Float

    public init(targetSize: [Int], normalizedCoordinates: Bool = false, samplingMethod: Int32?, boxMode: Int32?, spatialScale: Float) {
        self.targetSize = targetSize; self.normalizedCoordinates = normalizedCoordinates
        self.samplingMethod = samplingMethod; self.boxMode = boxMode; self.spatialScale = spatialScale
    }
}

extension CropResizeLayerParams {
    init(reading r: ProtoReader) throws {
        targetSize = try r.sizes(1, "targetSize")
        normalizedCoordinates = try r.bool(2, "normalizedCoordinates") ?? false
        samplingMethod = try r.message(3, "mode").map { try $0.int32(1, "samplingMethod") ?? 0 }
        boxMode = try r.message(4, "boxIndicesMode").map { try $0.int32(1, "boxMode") ?? 0 }
        spatialScale = try r.float(5, "spatialScale") ?? 0
    }

    func encoded(into w: inout MessageWriter) {
        w.sizes(1, targetSize)
        w.bool(2, normalizedCoordinates)
        if let method = samplingMethod { w.message(3) { $0.int32(1, method) } }
        if let mode = boxMode { w.message(4) { $0.int32(1, mode) } }
        w.float(5, spatialScale)
    }
}
