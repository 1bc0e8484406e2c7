import UpdraftCore

/// The parameter messages of the spatial layers (NeuralNetwork.proto field numbers in comments):
/// padding (200), lrn (180) and l2normalize (170), read and written (upsample: Layers+Resample.swift).
/// PaddingLayerParams. `mode` is nil when the file sets no PaddingType.
public struct PaddingLayerParams: Hashable, Sendable {
    /// constant (1) with value (1), reflection (2), replication (3).
    public var mode: PaddingMode?
    /// paddingAmounts (10): BorderAmounts, [height, width] edge sizes.
    public var top: Int, bottom: Int, left: Int, right: Int

    /// A padding layer with `mode` (nil: none stored) and the four edge sizes in pixels.
    public init(mode: PaddingMode?, top: Int, bottom: Int, left: Int, right: Int) {
        self.mode = mode; self.top = top; self.bottom = bottom; self.left = left; self.right = right
    }
}

/// LRNLayerParams: alpha (1), beta (2), localSize (3), k (4; 0 reads as Core ML's default 1).
public struct LRNLayerParams: Hashable, Sendable {
    /// alpha (1), beta (2) and k (4) of y = x / (k + alpha / localSize * sum of x² over the window)^beta, as stored.
    public var alpha: Float, beta: Float, k: Float
    /// localSize (3): number of neighbouring channels in the normalization window.
    public var localSize: Int
    /// An LRN layer with the given parameters, as stored (k 0 means Core ML's 1).
    public init(alpha: Float, beta: Float, localSize: Int, k: Float) {
        self.alpha = alpha; self.beta = beta; self.localSize = localSize; self.k = k
    }
}

extension PaddingLayerParams {
    init(reading r: ProtoReader) throws {
        mode = nil
        if let f = r.lastOf([1, 2, 3]) {
            switch f.number {
            case 1: mode = .constant(try r.child(f, named: "constant").float(1, "value") ?? 0)
            case 2: mode = .reflection
            default: mode = .replication
            }
        }
        let b = try borderAmounts(try r.message(10, "paddingAmounts"))
        (top, bottom, left, right) = (b.top, b.bottom, b.left, b.right)
    }

    func encoded(into w: inout MessageWriter) {
        switch mode {
        case let .constant(v)?: w.message(1) { m in m.float(1, v) }
        case .reflection?: w.message(2, ProtoMessage())
        case .replication?: w.message(3, ProtoMessage())
        case nil: break
        }
        w.message(10, borderAmounts(top: top, bottom: bottom, left: left, right: right))
    }
}

extension LRNLayerParams {
    init(reading r: ProtoReader) throws {
        alpha = try r.float(1, "alpha") ?? 0
        beta = try r.float(2, "beta") ?? 0
        localSize = try r.size(3, "localSize") ?? 0
        k = try r.float(4, "k") ?? 0
    }

    func encoded(into w: inout MessageWriter) {
        w.float(1, alpha)
        w.float(2, beta)
        w.size(3, localSize)
        w.float(4, k)
    }
}

// MARK: - Shape rule (what the graph makes of these layers)

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
    /// mvn: y = (x - mean) / sqrt(var + epsilon), mean and variance over each image's channel (H, W): the
    /// form coremltools' converters emit (a layer norm over the last axis, reshaped so that it is H, W),
    /// and instance normalization with scale 1 and shift 0, which is how it runs. Across the channels,
    /// or without dividing by the deviation, it is refused by name.
    static func meanVarianceNormalizeLayer(_ layer: LayerSpec, inputShapes: [Shape]) throws -> (op: LayerOp, output: Shape) {
        func fail(_ message: String, hint: String? = nil, kind: UpdraftError.Kind = .invalidModel) -> UpdraftError {
            UpdraftError(kind, "layer '\(layer.name)' (mvn): \(message)", hint: hint)
        }
        guard case let .mvn(acrossChannels, normalizeVariance, epsilon) = layer.params else { throw fail("is not an mvn layer") }
        guard inputShapes.count == 1 else { throw fail("has \(inputShapes.count) inputs; expected 1") }
        guard !acrossChannels, normalizeVariance else {
            throw fail(acrossChannels ? "acrossChannels (statistics over C, H and W together) is not supported"
                                      : "normalizeVariance false (the mean subtracted, the variance left) is not supported",
                       hint: "Updraft runs mvn per channel with the variance normalized, the form coremltools' layer_norm conversion emits",
                       kind: .unsupported)
        }
        let input = inputShapes[0]
        let op = SpatialOp.instanceNormalization(epsilon: epsilon)
        do { _ = try op.geometry(input: input) } catch let e as UpdraftError {
            throw fail("\(e.message) (input '\(layer.inputs[0])' has shape \(input))", hint: e.hint)
        }
        let channels = input.c
        return (.instanceNormalization(epsilon: epsilon, scale: [Float](repeating: 1, count: channels),
                                       shift: [Float](repeating: 0, count: channels)), input)
    }

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

/// Padding and LRN read their parameters in `ShapeInference.spatialLayer` (l2normalize, which has only
/// its epsilon, is `ShapeInference.layer`'s case).
extension PaddingLayerParams: LayerShapeRule {
    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer {
        let r = try ShapeInference.spatialLayer(c.layer, inputShapes: c.inputShapes)
        return InferredLayer(op: r.op, output: r.output)
    }
}

extension LRNLayerParams: LayerShapeRule {
    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer {
        let r = try ShapeInference.spatialLayer(c.layer, inputShapes: c.inputShapes)
        return InferredLayer(op: r.op, output: r.output)
    }
}
