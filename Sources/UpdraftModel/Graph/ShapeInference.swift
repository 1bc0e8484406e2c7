import UpdraftCore

/// Turning one layer of the spec into a `GraphLayer`: the op, its weights, and its output shape,
/// using the op specs' own geometry rules (Ops/). Errors name the layer, its type and the shapes.
enum ShapeInference {
    /// `inputLogicalShapes`: the inputs' logical shapes (LogicalShape); left empty, they are read off `inputShapes`.
    static func layer(_ layer: LayerSpec, index: Int, inputShapes: [Shape], inputLogicalShapes: [LogicalShape] = []) throws -> GraphLayer {
        let logical = inputLogicalShapes.count == inputShapes.count ? inputLogicalShapes : inputShapes.map(LogicalShape.init(canonical:))
        let c = ShapeRuleContext(layer: layer, inputShapes: inputShapes, logical: logical)
        let r = try layer.params.shapeRule?.inferred(c) ?? otherLayer(c)
        // Every shape that leaves here is positive and of sane size.
        _ = try LayerShapes.checkedShape(r.output.dims, "layer '\(layer.name)' (\(layer.typeName)) output")
        let outLogical = r.outputLogical ?? LogicalShape.output(canonical: r.output, like: logical.first ?? LogicalShape(canonical: r.output))
        return GraphLayer(name: layer.name, modelIndex: index, op: r.op, inputs: layer.inputs, output: layer.outputs[0],
                          inputShapes: inputShapes, outputShape: r.output, inputLogicalShapes: logical, outputLogicalShape: outLogical,
                          isUpdatable: layer.isUpdatable, weights: r.weights, bias: r.bias)
    }

    /// The shape rules of the layer types without a parameter message of their own (`LayerParams.shapeRule`
    /// is nil): clip, concat, softmax, flatten, add / multiply, l2normalize and the *Broadcastable
    /// types (the last two through their families' rules in Layers+Spatial.swift / Layers+Broadcast.swift).
    private static func otherLayer(_ c: ShapeRuleContext) throws -> InferredLayer {
        let layer = c.layer, inputShapes = c.inputShapes, logical = c.logical, input = c.input
        /// Set by ops that define their output's logical shape; others derive it (LogicalShape.output(canonical:like:)).
        var outputLogical: LogicalShape? = nil
        func fail(_ message: String, hint: String? = nil, kind: UpdraftError.Kind = .invalidModel) -> UpdraftError {
            c.fail(message, hint: hint, kind: kind)
        }
        func expectInputs(_ range: ClosedRange<Int>) throws { try c.expectInputs(range) }

        var op: LayerOp
        var weights: Tensor? = nil
        var output: Shape

        // add / multiply with one input (the constant alpha) or two of different shapes.
        let broadcasts = inputShapes.count == 1 || (inputShapes.count == 2 && inputShapes[0] != inputShapes[1])
        switch layer.params {
        case let .clip(minVal, maxVal):
            try expectInputs(1...1)
            op = .activation(try c.elementwiseFunction(.clip(min: minVal, max: maxVal)))
            output = input

        case let .concat(sequenceConcat):
            try expectInputs(1...Int.max)
            if sequenceConcat { throw fail("sequence concatenation is not supported", kind: .unsupported) }
            var channels = 0
            for (blob, s) in zip(layer.inputs, inputShapes) {
                guard s.h == input.h, s.w == input.w else {
                    throw fail("inputs must share height and width, but '\(layer.inputs[0])' is \(input) and '\(blob)' is \(s)")
                }
                channels += s.c
            }
            output = try LayerShapes.checkedShape([1, channels, input.h, input.w], "layer '\(layer.name)' output")
            op = .concat

        case .softmax:
            try expectInputs(1...1)
            op = .softmax
            output = input
            // Core ML's softmax is over axis -3; on more than 3 per-example axes that is not the folded C.
            if logical[0].exampleDims.count > 3 { (op, output, outputLogical) = try layout(.softmaxND(axis: -3), layer: layer, inputShapes: inputShapes, logical: logical) }

        case let .flatten(mode):
            try expectInputs(1...1)
            switch mode {
            case 0: break
            case 1:
                guard input.h == 1, input.w == 1 else {
                    throw fail("CHANNEL_LAST flatten of a spatial input \(input) is not supported", kind: .unsupported)
                }
            default: throw fail("flatten mode \(mode) is not CHANNEL_FIRST (0) or CHANNEL_LAST (1)")
            }
            op = .flatten
            output = Shape([1, input.itemCount, 1, 1])

        case .add where broadcasts, .multiply where broadcasts:
            (op, output, weights, outputLogical) = try broadcastLayer(layer, inputShapes: inputShapes, logical: logical)

        case .add, .multiply:
            let isAdd: Bool
            if case .add = layer.params { isAdd = true } else { isAdd = false }
            guard inputShapes.count >= 2 else {
                throw fail("with one input it \(isAdd ? "adds" : "multiplies by") the constant alpha, which is not supported",
                           kind: .unsupported)
            }
            for (blob, s) in zip(layer.inputs, inputShapes) where s != input {
                throw fail("inputs must have the same shape (no broadcasting), but '\(layer.inputs[0])' is \(input) and '\(blob)' is \(s)",
                           kind: .unsupported)
            }
            op = isAdd ? .add : .multiply
            output = input

        case .l2normalize:
            (op, output) = try spatialLayer(layer, inputShapes: inputShapes)

        case .mvn:
            (op, output) = try meanVarianceNormalizeLayer(layer, inputShapes: inputShapes)

        case .broadcastable:
            (op, output, weights, outputLogical) = try broadcastLayer(layer, inputShapes: inputShapes, logical: logical)

        case let .unsupported(field, name):
            throw UpdraftError(.unsupported,
                "layer '\(layer.name)' is a \(name) layer (NeuralNetworkLayer field \(field)), which Updraft cannot run",
                hint: "Updraft runs convolution, innerProduct, pooling, activation, clip, unary, concat, softmax, flatten, batchnorm, add, multiply, padding, \(ResampleLayerParams.typeNames), lrn, l2normalize, the *Broadcastable arithmetic, loadConstant(ND), reduce, the ND reduce layers (\(ReduceMode.allCases.map(\.rawValue).joined(separator: "/"))), the layout layers and \(LayerParams.familyTypeNames.joined(separator: ", "))")

        case .convolution, .innerProduct, .pooling, .activation, .unary, .batchnorm, .resampling, .layout, .padding, .lrn,
             .loadConstant, .reduce, .reduceND, .family:
            throw fail("has a shape rule of its own (LayerParams.shapeRule)")  // not reached: `layer` asks it first
        }
        return InferredLayer(op: op, output: output, weights: weights, outputLogical: outputLogical)
    }
}
