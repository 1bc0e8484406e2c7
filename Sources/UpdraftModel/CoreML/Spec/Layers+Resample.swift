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

// MARK: - Shape rule (what the graph makes of these layers)

/// Shape inference of the resampling layers (Layers+Resample.swift): the Core ML parameters become a
/// `ResampleOp` (Ops/Resample.swift), whose geometry gives the output shape. Errors name the layer,
/// its type, the field and the way out. cropResize reads two inputs, the image and its boxes (one box
/// per example, the values read when the layer runs; see `CropResizeSpec`).
extension ShapeInference {
    static func resampleLayer(_ params: ResampleLayerParams, _ layer: LayerSpec, inputShapes: [Shape], logical: [LogicalShape])
        throws -> (op: LayerOp, output: Shape, logical: LogicalShape?) {
        func fail(_ message: String, hint: String? = nil, kind: UpdraftError.Kind = .invalidModel) -> UpdraftError {
            UpdraftError(kind, "layer '\(layer.name)' (\(layer.typeName)): \(message)", hint: hint)
        }
        let inputCount: Int = { if case .cropResize = params { return 2 } else { return 1 } }()
        guard inputShapes.count == inputCount else { throw fail("has \(inputShapes.count) inputs; expected \(inputCount)") }
        let input = inputShapes[0]
        var outputLogical: LogicalShape? = nil
        func samplingMode(_ method: Int32) throws -> SamplingMode {
            guard let mode = SamplingMode(rawValue: Int(method)) else {
                throw fail("samplingMethod \(method) is not one of SamplingMode's (0 STRICT_ALIGN_ENDPOINTS_MODE … 3 ROI_ALIGN_MODE)")
            }
            return mode
        }
        let op: ResampleOp
        switch params {
        case let .upsample(u):
            let mode: UpsampleSpec.Mode
            switch u.mode {
            case 0: mode = .nearest
            case 1:
                guard let linear = LinearUpsampleMode(rawValue: Int(u.linearUpsampleMode)) else {
                    throw fail("linearUpsampleMode \(u.linearUpsampleMode) is not DEFAULT (0), ALIGN_CORNERS_TRUE (1) or ALIGN_CORNERS_FALSE (2)")
                }
                mode = .bilinear(linear)
            default: throw fail("mode \(u.mode) is not NN (0) or BILINEAR (1)")
            }
            let fractional = u.fractionalScalingFactor
            // Whole fractional factors (2.0) upsample as whole factors, in every mode.
            if !fractional.isEmpty, !(u.scalingFactor.isEmpty && fractional.count == 2 && fractional.allSatisfy { $0 >= 1 && $0 == $0.rounded() }) {
                guard u.scalingFactor.isEmpty else {
                    throw fail("sets both scalingFactor \(u.scalingFactor) and fractionalScalingFactor \(fractional); Core ML takes one of them")
                }
                guard fractional.count == 2 else { throw fail("fractionalScalingFactor lists \(fractional.count) values; expected 2 (height, width)") }
                guard case let .bilinear(linear) = mode, linear != .default else {
                    throw fail("fractionalScalingFactor \(fractional) is not supported with \(u.mode == 0 ? "mode NN" : "linearUpsampleMode DEFAULT"); Core ML upsamples by fractional factors only with BILINEAR on the ALIGN_CORNERS_TRUE or ALIGN_CORNERS_FALSE grid",
                               hint: "set linearUpsampleMode ALIGN_CORNERS_TRUE or ALIGN_CORNERS_FALSE (coremltools' add_upsample does for fractional factors)",
                               kind: .unsupported)
                }
                op = .fractionalUpsample(FractionalUpsampleSpec(scaleH: fractional[0], scaleW: fractional[1], mode: linear))
            } else {
                let factors = u.scalingFactor.isEmpty ? (fractional.isEmpty ? [1, 1] : fractional.map { Int($0) }) : u.scalingFactor
                guard factors.count == 2 else { throw fail("scalingFactor lists \(factors.count) values; expected 2 (height, width)") }
                op = .upsample(UpsampleSpec(scaleH: factors[0], scaleW: factors[1], mode: mode))
            }
        case let .resizeBilinear(p):
            let size = p.targetSize.isEmpty ? [1, 1] : p.targetSize
            guard size.count == 2 else { throw fail("targetSize lists \(size.count) values; expected 2 (height, width)") }
            op = .resizeBilinear(ResizeSpec(height: size[0], width: size[1], mode: try samplingMode(p.samplingMethod ?? 0)))
        case let .cropResize(p):
            let size = p.targetSize.isEmpty ? [1, 1] : p.targetSize
            guard size.count == 2 else { throw fail("targetSize lists \(size.count) values; expected 2 (height, width)") }
            guard let coordinates = BoxCoordinates(rawValue: Int(p.boxMode ?? 0)) else {
                throw fail("boxMode \(p.boxMode ?? 0) is not one of BoxCoordinatesMode's (0 CORNERS_HEIGHT_FIRST … 3 CENTER_SIZE_WIDTH_FIRST)")
            }
            let (image, boxes) = (logical[0], logical[1])
            guard image.exampleDims.count <= 3 else {
                throw fail("its image '\(layer.inputs[0])' is \(image); cropResize reads [1, Batch, C, H, W]")
            }
            let boxDims = boxes.dims
            if boxDims.count == 5, boxDims[0] > 1 {
                throw fail("reads \(boxDims[0]) boxes ('\(layer.inputs[1])' is \(boxes)); Updraft runs one box per example, as the crops of several would be a batch inside each example",
                           hint: "use one cropResize layer per box (boxes [1, 1, 4, 1, 1]) and concatenate their outputs", kind: .unsupported)
            }
            guard [4, 5].contains(boxes.count), boxDims.filter({ $0 != 1 }).count == 1 else {
                throw fail("its boxes '\(layer.inputs[1])' are \(boxes); cropResize reads one box of 4 values, or 5 with the batch index first ([1, 1, 4, 1, 1] or [1, 1, 5, 1, 1])")
            }
            op = .cropResize(CropResizeSpec(height: size[0], width: size[1], mode: try samplingMode(p.samplingMethod ?? 0),
                                            coordinates: coordinates, normalized: p.normalizedCoordinates,
                                            spatialScale: p.spatialScale, boxLength: boxes.count))
            outputLogical = LogicalShape([1, 1, input.c, size[0], size[1]], batchAxis: 1)
        }
        do {
            let g = try SpatialOp.resampling(op).geometry(input: input)
            return (.spatial(.resampling(op)), g.outputShape, outputLogical)
        } catch let e as UpdraftError {
            throw fail("\(e.message) (input '\(layer.inputs[0])' has shape \(input))", hint: e.hint)
        }
    }
}

extension ResampleLayerParams: LayerShapeRule {
    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer {
        let r = try ShapeInference.resampleLayer(self, c.layer, inputShapes: c.inputShapes, logical: c.logical)
        return InferredLayer(op: r.op, output: r.output, outputLogical: r.logical)
    }
}
