import UpdraftCore

/// Shape inference of the resampling layers (Layers+Resample.swift): the Core ML parameters become a
/// `ResampleOp` (Ops/Resample.swift), whose geometry gives the output shape. Errors name the layer,
/// its type, the field and the way out.
extension ShapeInference {
    static func resampleLayer(_ params: ResampleLayerParams, _ layer: LayerSpec, inputShapes: [Shape], logical: [LogicalShape])
        throws -> (op: LayerOp, output: Shape, logical: LogicalShape?) {
        func fail(_ message: String, hint: String? = nil, kind: UpdraftError.Kind = .invalidModel) -> UpdraftError {
            UpdraftError(kind, "layer '\(layer.name)' (\(layer.typeName)): \(message)", hint: hint)
        }
        guard inputShapes.count == 1 else { throw fail("has \(inputShapes.count) inputs; expected 1") }
        let input = inputShapes[0]
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
        }
        do {
            let g = try SpatialOp.resampling(op).geometry(input: input)
            return (.spatial(.resampling(op)), g.outputShape, nil)
        } catch let e as UpdraftError {
            throw fail("\(e.message) (input '\(layer.inputs[0])' has shape \(input))", hint: e.hint)
        }
    }
}
