// The resampling ops' rows (Ops/Resample.swift), merged into the spatial lists and so into
// `.gradientCheck`, `.quick` and `.full`; their problem and comparison are the spatial ones.
import UpdraftCore

extension OpCase {
    static func upsample(_ mode: UpsampleSpec.Mode, _ input: Shape, _ scaleH: Int, _ scaleW: Int) -> OpCase {
        OpCase(.spatial(.upsample(UpsampleSpec(scaleH: scaleH, scaleW: scaleW, mode: mode)), input: input))
    }
    static func upsample(_ mode: LinearUpsampleMode, _ input: Shape, _ scaleH: Float, _ scaleW: Float) -> OpCase {
        OpCase(.spatial(.resampling(.fractionalUpsample(FractionalUpsampleSpec(scaleH: scaleH, scaleW: scaleW, mode: mode))), input: input))
    }
    static func resize(_ mode: SamplingMode, _ input: Shape, _ height: Int, _ width: Int) -> OpCase {
        OpCase(.spatial(.resampling(.resizeBilinear(ResizeSpec(height: height, width: width, mode: mode))), input: input))
    }
    /// A cropResize of `input` with one box per example (`boxes`, repeated to the batch when shorter).
    static func crop(_ mode: SamplingMode, _ coordinates: BoxCoordinates, _ input: Shape, _ height: Int, _ width: Int,
                     normalized: Bool = false, scale: Float = 1, boxes: [[Float]]) -> OpCase {
        let perExample = (0..<input.n).map { boxes[$0 % boxes.count] }
        let spec = CropResizeSpec(height: height, width: width, mode: mode, coordinates: coordinates, normalized: normalized,
                                  spatialScale: scale, boxLength: perExample[0].count, boxes: perExample)
        return OpCase(.spatial(.resampling(.cropResize(spec)), input: input))
    }
}

extension Array where Element == OpCase {
    /// Small shapes: nearest and the three bilinear grids (one on a size-1 axis); fractional factors
    /// up and down on both grids Core ML takes them on; resizeBilinear in every SamplingMode, up, down
    /// and to one sample (ALIGN_ENDPOINTS_MODE's middle); cropResize in every SamplingMode and box
    /// layout, a box per example, normalized, scaled, indexed (5 values), reversed and partly outside.
    static var resampleGradientCheck: [OpCase] {
        [
            .upsample(.nearest, [3, 2, 3, 4], 2, 3),
            .upsample(.bilinear(.default), [1, 2, 3, 4], 2, 2),
            .upsample(.bilinear(.alignCornersTrue), [1, 2, 3, 5], 2, 3),
            .upsample(.bilinear(.alignCornersFalse), [3, 1, 4, 3], 3, 2),
            .upsample(.bilinear(.alignCornersFalse), [1, 1, 1, 3], 2, 2),
            .upsample(.alignCornersFalse, [1, 2, 3, 2], 1.5, 2.6),
            .upsample(.alignCornersTrue, [3, 1, 4, 3], 0.75, 1.7),
            .upsample(.alignCornersTrue, [1, 2, 1, 4], 2.5, 1.25),
            .resize(.strictAlignEndpoints, [3, 2, 4, 3], 5, 2),
            .resize(.alignEndpoints, [1, 2, 3, 5], 1, 7),
            .resize(.upsample, [1, 3, 4, 4], 7, 3),
            .resize(.roiAlign, [3, 1, 5, 2], 3, 4),
            .resize(.roiAlign, [1, 2, 1, 3], 2, 1),
            .crop(.strictAlignEndpoints, .cornersHeightFirst, [3, 2, 5, 6], 3, 4,
                  boxes: [[0.5, 1, 3.5, 4.25], [1, 0, 4, 5], [3, 4.5, 1, 0.5]]),
            .crop(.alignEndpoints, .cornersWidthFirst, [1, 2, 4, 5], 1, 3, normalized: true, boxes: [[0, 0.2, 0.1, 0.9, 0.8]]),
            .crop(.upsample, .centerSizeHeightFirst, [3, 1, 6, 5], 4, 3, scale: 0.5,
                  boxes: [[4, 4, 6, 4], [6, 2, 4, 6], [2, 6, 8, 2]]),
            .crop(.roiAlign, .centerSizeWidthFirst, [1, 2, 5, 7], 2, 2, boxes: [[3, 2, 4, 2]]),
            .crop(.strictAlignEndpoints, .cornersHeightFirst, [1, 1, 4, 4], 3, 3, boxes: [[-1, 2, 2, 6]]),
        ]
    }

    static var resampleQuick: [OpCase] {
        [
            .upsample(.bilinear(.alignCornersFalse), [3, 3, 5, 6], 2, 2),
            .upsample(.alignCornersFalse, [3, 3, 5, 6], 1.5, 1.3),
            .resize(.roiAlign, [3, 3, 5, 6], 8, 4),
            .crop(.alignEndpoints, .cornersHeightFirst, [3, 3, 7, 6], 4, 5, boxes: [[1, 0.5, 5, 4.5], [0, 1, 6, 5], [2.5, 2, 3, 3]]),
        ]
    }

    /// Awkward sizes (1, 7, 31, 32, 33, 63, 65), batch 1 and 3, every grid.
    static var resampleFull: [OpCase] {
        [
            .upsample(.nearest, [3, 33, 7, 7], 2, 2),
            .upsample(.nearest, [1, 7, 31, 33], 3, 1),
            .upsample(.bilinear(.default), [1, 31, 15, 17], 2, 2),
            .upsample(.bilinear(.alignCornersTrue), [3, 7, 33, 31], 2, 2),
            .upsample(.bilinear(.alignCornersFalse), [1, 7, 32, 33], 2, 3),
            .upsample(.bilinear(.alignCornersFalse), [1, 3, 1, 1], 4, 4),
            .upsample(.alignCornersFalse, [1, 7, 31, 33], 2.3, 1.7),
            .upsample(.alignCornersTrue, [3, 5, 33, 32], 0.5, 1.5),
            .upsample(.alignCornersTrue, [1, 3, 1, 1], 3.5, 1.5),
            .resize(.strictAlignEndpoints, [3, 7, 31, 33], 65, 7),
            .resize(.alignEndpoints, [1, 33, 7, 32], 1, 63),
            .resize(.upsample, [1, 7, 33, 31], 32, 65),
            .resize(.roiAlign, [3, 5, 63, 65], 7, 7),
            .resize(.roiAlign, [1, 3, 1, 1], 3, 2),
            .crop(.strictAlignEndpoints, .cornersWidthFirst, [3, 7, 33, 31], 7, 65, normalized: true,
                  boxes: [[0, 0.1, 0.2, 0.9, 0.7], [0, 0, 0, 1, 1], [0, 0.9, 0.5, 0.1, 0.25]]),
            .crop(.alignEndpoints, .centerSizeHeightFirst, [1, 33, 32, 33], 1, 32, boxes: [[15.5, 16, 31, 20]]),
            .crop(.upsample, .cornersHeightFirst, [3, 5, 65, 63], 31, 33, scale: 0.25,
                  boxes: [[10, 20, 200, 240], [0, 0, 256, 248], [100, 4, 40, 200]]),
            .crop(.roiAlign, .centerSizeWidthFirst, [1, 7, 63, 65], 7, 7, scale: 0.0625, boxes: [[512, 480, 640, 448]]),
        ]
    }
}
