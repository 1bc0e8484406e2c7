import UpdraftCore

/// A Core ML layer type's shape rule: from the layer and its inputs' shapes to the graph's op, the
/// output shape and the weights the op carries, every size checked. A layer type's parameters conform
/// in the file that also holds their decoder and encoder (`CoreML/Spec/Layers+Convolution.swift`, …),
/// so its Core ML fields and what the graph makes of them sit together; `LayerParams.shapeRule`
/// (LayerTable.swift) is the table `ShapeInference.layer` reads.
protocol LayerShapeRule {
    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer
}

/// What a shape rule gives the graph builder.
struct InferredLayer {
    var op: LayerOp
    var output: Shape
    var weights: Tensor? = nil
    var bias: Tensor? = nil
    /// Set by ops that define their output's logical shape; others derive it (`LogicalShape.output(canonical:like:)`).
    var outputLogical: LogicalShape? = nil
}

/// The layer a shape rule is inferring, and the checks rules share; every error names the layer and its type.
struct ShapeRuleContext {
    let layer: LayerSpec
    let inputShapes: [Shape]
    /// The inputs' logical (N-D) shapes.
    let logical: [LogicalShape]

    /// The first input's shape (an empty one for a layer without inputs).
    var input: Shape { inputShapes.first ?? Shape([1, 0, 0, 0]) }

    /// An error about this layer: "layer 'name' (type): message".
    func fail(_ message: String, hint: String? = nil, kind: UpdraftError.Kind = .invalidModel) -> UpdraftError {
        UpdraftError(kind, "layer '\(layer.name)' (\(layer.typeName)): \(message)", hint: hint)
    }

    /// Throws unless the layer has a number of inputs in `range`.
    func expectInputs(_ range: ClosedRange<Int>) throws {
        guard range.contains(inputShapes.count) else {
            let expected = range.lowerBound == range.upperBound ? "\(range.lowerBound)" : "at least \(range.lowerBound)"
            throw fail("has \(inputShapes.count) inputs; expected \(expected)")
        }
    }

    /// Runs an op spec's geometry, restating its error with the layer's name and input shape.
    func geometry<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as UpdraftError {
            throw fail("\(e.message) (input shape \(inputShapes[0]))", hint: e.hint)
        }
    }

    /// A (height, width) pair from a two-value list field, each in 0...maxDimension.
    func size(_ values: [Int], _ what: String) throws -> (Int, Int) {
        guard values.count == 2 else { throw fail("\(what) lists \(values.count) values; expected 2 (height, width)") }
        for v in values where v < 0 || v > LayerShapes.maxDimension {
            throw fail("\(what) \(values) is outside 0...\(LayerShapes.maxDimension)")
        }
        return (values[0], values[1])
    }

    /// An element-wise function checked against the input's channels (per-channel constants).
    func elementwiseFunction(_ a: Activation) throws -> Activation {
        do { try a.validate(channels: input.c) } catch let e as UpdraftError {
            throw fail("\(e.message) (input shape \(input))", hint: e.hint)
        }
        return a
    }

    /// Throws unless every padding amount is in 0...maxDimension.
    func checkPadding(_ amounts: [Int]) throws {
        for v in amounts where v < 0 || v > LayerShapes.maxDimension {
            throw fail("padding \(amounts) is outside 0...\(LayerShapes.maxDimension)")
        }
    }

    /// The values of a WeightParams as a tensor of `shape` (see `LayerShapes.tensor`).
    func tensor(_ w: WeightParams, shape: Shape, what: String) throws -> Tensor {
        try LayerShapes.tensor(w, shape: shape, layer: layer, what: what)
    }

    /// A weighted layer's weights as a tensor of `shape` (its `weightShape`), and its bias when it has one.
    func weightsAndBias(_ p: WeightedLayerParams, shape: Shape) throws -> (weights: Tensor, bias: Tensor?) {
        let weights = try tensor(p.weights, shape: shape, what: "weights")
        guard p.hasBias else { return (weights, nil) }
        guard let b = p.bias else { throw fail("hasBias is set but the layer has no bias values") }
        return (weights, try tensor(b, shape: [p.outputChannels], what: "bias"))
    }
}
