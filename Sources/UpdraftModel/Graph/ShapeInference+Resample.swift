import UpdraftCore

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
