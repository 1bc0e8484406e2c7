import UpdraftCore

/// Shape inference of the spatial layers: padding, LRN, L2 normalize, and batchnorm that
/// computes its statistics per instance. Errors name the layer, its type, the field and the way out.
extension ShapeInference {
    static func spatialLayer(_ layer: LayerSpec, inputShapes: [Shape]) throws -> (op: LayerOp, output: Shape) {
        func fail(_ message: String, hint: String? = nil, kind: UpdraftError.Kind = .invalidModel) -> UpdraftError {
            UpdraftError(kind, "layer '\(layer.name)' (\(layer.typeName)): \(message)", hint: hint)
        }
        guard inputShapes.count == 1 else { throw fail("has \(inputShapes.count) inputs; expected 1") }
        let input = inputShapes[0]
        let op: SpatialOp
        switch layer.params {
        case let .padding(p):
            guard let mode = p.mode else {
                throw fail("sets no padding type", hint: "set one of constant, reflection or replication in PaddingLayerParams")
            }
            op = .padding(PaddingSpec(mode: mode, top: p.top, bottom: p.bottom, left: p.left, right: p.right))
        case let .lrn(l):
            op = .lrn(LRNSpec(alpha: l.alpha, beta: l.beta, k: l.k == 0 ? 1 : l.k, localSize: l.localSize))
        case let .l2normalize(epsilon):
            op = .l2Normalize(epsilon: epsilon == 0 ? 1e-6 : epsilon)
        default:
            throw fail("is not a spatial layer")
        }
        do {
            let g = try op.geometry(input: input)
            return (.spatial(op), g.outputShape)
        } catch let e as UpdraftError {
            throw fail("\(e.message) (input '\(layer.inputs[0])' has shape \(input))", hint: e.hint)
        }
    }

    /// Batchnorm with computeMeanVar: per-instance statistics (instanceNormalization) run as instance
    /// normalization with gamma and beta frozen; batch statistics are refused.
    static func instanceNormalizationLayer(_ layer: LayerSpec, _ b: BatchnormLayerParams,
                                           inputShapes: [Shape]) throws -> (op: LayerOp, output: Shape) {
        func fail(_ message: String, hint: String? = nil, kind: UpdraftError.Kind = .invalidModel) -> UpdraftError {
            UpdraftError(kind, "layer '\(layer.name)' (batchnorm): \(message)", hint: hint)
        }
        guard inputShapes.count == 1 else { throw fail("has \(inputShapes.count) inputs; expected 1") }
        let input = inputShapes[0]
        guard b.instanceNormalization else {
            throw fail("computeMeanVar without instanceNormalization (statistics of the whole batch at prediction time) is not supported",
                       hint: "Updraft runs batchnorm frozen (computeMeanVar false) or as instance normalization (both flags set)",
                       kind: .unsupported)
        }
        guard b.channels == input.c else {
            throw fail("has \(b.channels) channels but its input '\(layer.inputs[0])' has shape \(input)")
        }
        let channelShape = try LayerShapes.checkedShape([b.channels], "layer '\(layer.name)' channels")
        let gamma = try LayerShapes.tensor(b.gamma, shape: channelShape, layer: layer, what: "gamma")
        let beta = try LayerShapes.tensor(b.beta, shape: channelShape, layer: layer, what: "beta")
        // Core ML reads an epsilon of 0 as 1e-5.
        let epsilon = b.epsilon == 0 ? 1e-5 : b.epsilon
        let op = SpatialOp.instanceNormalization(epsilon: epsilon)
        do { _ = try op.geometry(input: input) } catch let e as UpdraftError {
            throw fail("\(e.message) (input '\(layer.inputs[0])' has shape \(input))", hint: e.hint)
        }
        return (.instanceNormalization(epsilon: epsilon, scale: gamma.data, shift: beta.data), input)
    }
}
