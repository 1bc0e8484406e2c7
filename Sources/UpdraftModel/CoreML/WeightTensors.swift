import UpdraftCore

/// Weight shapes and weight tensors of convolution and inner-product layers, with every size
/// checked before anything is allocated or multiplied (a corrupt file can claim any size).
package enum LayerShapes {
    /// Largest size accepted for one dimension (channels, kernel, image side).
    static let maxDimension = Shape.maxDimension
    /// Largest element count accepted for one tensor (8 GiB of float32).
    static let maxElements = 1 << 31

    /// A shape whose dimensions are all in 1...maxDimension and whose element count is at most
    /// maxElements, or an error naming `what`.
    static func checkedShape(_ dims: [Int], _ what: @autoclosure () -> String) throws -> Shape {
        var count = 1
        for d in dims {
            guard d >= 1, d <= maxDimension else {
                throw UpdraftError(.invalidModel,
                    "\(what()): dimension \(d) in \(dims) is outside 1...\(maxDimension)",
                    hint: "the model file is corrupt or describes an impossible layer")
            }
            let (product, overflow) = count.multipliedReportingOverflow(by: d)
            guard !overflow, product <= maxElements else {
                throw UpdraftError(.invalidModel, "\(what()): \(dims) has more than \(maxElements) elements",
                                   hint: "the model file is corrupt or describes an impossible layer")
            }
            count = product
        }
        return Shape(dims)
    }

    package static func outputChannels(_ layer: LayerSpec) -> Int { layer.params.weighted?.outputChannels ?? 0 }

    package static func hasBias(_ layer: LayerSpec) -> Bool { layer.params.weighted?.hasBias ?? false }

    /// Convolution `[C_out, kernelChannels, kH, kW]`, inner product `[C_out, C_in]` (`WeightedLayerParams.weightShape`).
    package static func weightShape(_ layer: LayerSpec) throws -> Shape {
        guard let weighted = layer.params.weighted else {
            throw UpdraftError(.invalidArgument, "layer '\(layer.name)' is a \(layer.typeName) layer and has no weights")
        }
        return try weighted.weightShape(layer: layer.name)
    }

    /// The values of a WeightParams as a tensor of `shape`: an error for the encodings Updraft does
    /// not read, for missing values and for a count that does not match the shape.
    static func tensor(_ w: WeightParams, shape: Shape, layer: LayerSpec, what: String) throws -> Tensor {
        switch w.encoding {
        case .float32, .float16, .empty: break
        case .quantized:
            throw UpdraftError(.unsupported,
                "layer '\(layer.name)' (\(layer.typeName)) stores its \(what) quantized (quantization with rawValue, \(w.storedByteCount) bytes), which is not supported: Updraft reads float32 and float16 weights only",
                hint: "export the model without weight quantization (float32)")
        case .raw:
            throw UpdraftError(.unsupported,
                "layer '\(layer.name)' (\(layer.typeName)) stores its \(what) as rawValue bytes (\(w.storedByteCount) bytes), which is not supported: Updraft reads float32 and float16 weights only",
                hint: "export the model with float32 weights (floatValue)")
        case .int8:
            throw UpdraftError(.unsupported,
                "layer '\(layer.name)' (\(layer.typeName)) stores its \(what) as int8RawValue (\(w.storedByteCount) bytes), which is not supported: Updraft reads float32 and float16 weights only",
                hint: "export the model with float32 weights (floatValue)")
        }
        guard !w.values.isEmpty else {
            throw UpdraftError(.invalidModel,
                "layer '\(layer.name)' (\(layer.typeName)) has no \(what) values; expected \(shape.count) for shape \(shape)",
                hint: "the model file is incomplete; re-export it with its \(what)")
        }
        guard w.values.count == shape.count else {
            throw UpdraftError(.invalidModel,
                "layer '\(layer.name)' (\(layer.typeName)) has \(w.values.count) \(what) values; expected \(shape.count) for shape \(shape)")
        }
        return Tensor(shape: shape, data: w.values)
    }
}
