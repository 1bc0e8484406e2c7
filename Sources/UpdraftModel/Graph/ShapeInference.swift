import UpdraftCore

/// Turning one layer of the spec into a `GraphLayer`: the op, its weights, and its output shape,
/// using the op specs' own geometry rules (Ops/). Errors name the layer, its type and the shapes.
enum ShapeInference {
    /// `inputLogicalShapes`: the inputs' logical shapes (LogicalShape); left empty, they are read off `inputShapes`.
    static func layer(_ layer: LayerSpec, index: Int, inputShapes: [Shape], inputLogicalShapes: [LogicalShape] = []) throws -> GraphLayer {
        let logical = inputLogicalShapes.count == inputShapes.count ? inputLogicalShapes : inputShapes.map(LogicalShape.init(canonical:))
        /// Set by ops that define their output's logical shape; others derive it (LogicalShape.output(canonical:like:)).
        var outputLogical: LogicalShape? = nil
        let input = inputShapes.first ?? Shape([1, 0, 0, 0])
        func fail(_ message: String, hint: String? = nil, kind: UpdraftError.Kind = .invalidModel) -> UpdraftError {
            UpdraftError(kind, "layer '\(layer.name)' (\(layer.typeName)): \(message)", hint: hint)
        }
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
        func checkPadding(_ amounts: [Int]) throws {
            for v in amounts where v < 0 || v > LayerShapes.maxDimension {
                throw fail("padding \(amounts) is outside 0...\(LayerShapes.maxDimension)")
            }
        }

        var op: LayerOp
        var weights: Tensor? = nil
        var bias: Tensor? = nil
        var output: Shape

        // add / multiply with one input (the constant alpha) or two of different shapes.
        let broadcasts = inputShapes.count == 1 || (inputShapes.count == 2 && inputShapes[0] != inputShapes[1])
        switch layer.params {
        case let .convolution(c):
            try expectInputs(1...1)
            if c.isDeconvolution {
                throw fail("deconvolution is not supported", kind: .unsupported)
            }
            let (kh, kw) = try size(c.kernelSize, "kernelSize")
            let (sh, sw) = try size(c.stride, "stride")
            let (dh, dw) = try size(c.dilation, "dilationFactor")
            if case let .valid(t, b, l, r) = c.padding { try checkPadding([t, b, l, r]) }
            let wShape = try LayerShapes.weightShape(layer)
            guard c.groups >= 1, c.groups <= LayerShapes.maxDimension else { throw fail("nGroups \(c.groups) is out of range") }
            let (inChannels, overflow) = c.kernelChannels.multipliedReportingOverflow(by: c.groups)
            guard !overflow, inChannels <= LayerShapes.maxDimension else { throw fail("kernelChannels x nGroups is out of range") }
            guard inChannels == input.c else {
                throw fail("expects \(inChannels) input channels (kernelChannels \(c.kernelChannels) x nGroups \(c.groups)) but its input '\(layer.inputs[0])' has shape \(input)")
            }
            let spec = ConvolutionSpec(inputChannels: inChannels, outputChannels: c.outputChannels, kernelH: kh, kernelW: kw,
                                       strideH: sh, strideW: sw, dilationH: dh, dilationW: dw, groups: c.groups,
                                       padding: c.padding, hasBias: c.hasBias)
            let g = try geometry { try spec.geometry(input: input) }
            output = g.outputShape
            op = .convolution(spec)
            weights = try LayerShapes.tensor(c.weights, shape: wShape, layer: layer, what: "weights")
            if c.hasBias {
                guard let b = c.bias else { throw fail("hasBias is set but the layer has no bias values") }
                bias = try LayerShapes.tensor(b, shape: [c.outputChannels], layer: layer, what: "bias")
            }

        case let .innerProduct(p):
            try expectInputs(1...1)
            if p.int8DynamicQuantize { throw fail("int8DynamicQuantize is not supported", kind: .unsupported) }
            let wShape = try LayerShapes.weightShape(layer)
            guard input.itemCount == p.inputChannels else {
                throw fail("expects \(p.inputChannels) inputs per example but its input '\(layer.inputs[0])' has shape \(input) (\(input.itemCount) values)")
            }
            _ = try geometry { try p.spec.geometry(input: input) }
            output = Shape([1, p.outputChannels, 1, 1])
            op = .innerProduct(p.spec)
            weights = try LayerShapes.tensor(p.weights, shape: wShape, layer: layer, what: "weights")
            if p.hasBias {
                guard let b = p.bias else { throw fail("hasBias is set but the layer has no bias values") }
                bias = try LayerShapes.tensor(b, shape: [p.outputChannels], layer: layer, what: "bias")
            }

        case let .pooling(p):
            try expectInputs(1...1)
            let kind: PoolingKind
            switch p.type {
            case 0: kind = .max
            case 1: kind = .average
            default: throw fail("\(p.typeName) pooling is not supported; Updraft runs MAX and AVERAGE", kind: .unsupported)
            }
            let (kh, kw) = try size(p.kernelSize, "kernelSize")
            let (sh, sw) = try size(p.stride, "stride")
            switch p.padding {
            case let .valid(t, b, l, r): try checkPadding([t, b, l, r])
            case let .includeLastPixel(h, w): try checkPadding([h, w])
            case .same: break
            }
            let spec = PoolingSpec(kind: kind, kernelH: kh, kernelW: kw, strideH: sh, strideW: sw, padding: p.padding,
                                   excludePadding: p.excludePadding, global: p.global)
            let g = try geometry { try spec.geometry(input: input) }
            output = g.outputShape
            op = .pooling(spec)

        case let .activation(a):
            try expectInputs(1...1)
            guard let activation = a.activation else {
                throw fail("activation \(a.typeName) (ActivationParams field \(a.typeField)) is not supported",
                           hint: "Updraft runs every ActivationParams case with float32 or float16 constants", kind: .unsupported)
            }
            op = .activation(try elementwiseFunction(activation))
            output = input

        case let .clip(minVal, maxVal):
            try expectInputs(1...1)
            op = .activation(try elementwiseFunction(.clip(min: minVal, max: maxVal)))
            output = input

        case let .unary(u):
            try expectInputs(1...1)
            guard let f = u.function else {
                throw fail("unary function type \(u.type) is not one of NeuralNetwork.proto's (0 SQRT … 7 THRESHOLD)",
                           hint: "use SQRT, RSQRT, INVERSE, POWER, EXP, LOG, ABS or THRESHOLD", kind: .unsupported)
            }
            op = .activation(try elementwiseFunction(.unary(f)))
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

        case let .batchnorm(b) where b.computeMeanVar:
            (op, output) = try instanceNormalizationLayer(layer, b, inputShapes: inputShapes)

        case let .batchnorm(b):
            try expectInputs(1...1)
            guard b.channels == input.c else {
                throw fail("has \(b.channels) channels but its input '\(layer.inputs[0])' has shape \(input)")
            }
            let channelShape = try LayerShapes.checkedShape([b.channels], "layer '\(layer.name)' channels")
            let gamma = try LayerShapes.tensor(b.gamma, shape: channelShape, layer: layer, what: "gamma")
            let beta = try LayerShapes.tensor(b.beta, shape: channelShape, layer: layer, what: "beta")
            let mean = try LayerShapes.tensor(b.mean, shape: channelShape, layer: layer, what: "mean")
            let variance = try LayerShapes.tensor(b.variance, shape: channelShape, layer: layer, what: "variance")
            var scale = [Float](), shift = [Float]()
            for c in 0..<b.channels {
                let denominator = Double(variance.data[c]) + Double(b.epsilon)
                guard denominator > 0, denominator.isFinite else {
                    throw fail("variance + epsilon of channel \(c) is \(denominator); it must be positive")
                }
                let s = Double(gamma.data[c]) / denominator.squareRoot()
                scale.append(Float(s))
                shift.append(Float(Double(beta.data[c]) - Double(mean.data[c]) * s))
            }
            op = .batchnorm(scale: scale, shift: shift)
            output = input

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

        case .padding, .lrn, .l2normalize:
            (op, output) = try spatialLayer(layer, inputShapes: inputShapes)
        case let .resampling(r): (op, output, outputLogical) = try resampleLayer(r, layer, inputShapes: inputShapes, logical: logical)

        case .broadcastable, .loadConstant, .reduce, .reduceND:
            (op, output, weights, outputLogical) = try broadcastLayer(layer, inputShapes: inputShapes, logical: logical)
        case let .layout(l): (op, output, outputLogical) = try layout(l, layer: layer, inputShapes: inputShapes, logical: logical)

        case let .unsupported(field, name):
            throw UpdraftError(.unsupported,
                "layer '\(layer.name)' is a \(name) layer (NeuralNetworkLayer field \(field)), which Updraft cannot run",
                hint: "Updraft runs convolution, innerProduct, pooling, activation, clip, unary, concat, softmax, flatten, batchnorm, add, multiply, padding, \(ResampleLayerParams.typeNames), lrn, l2normalize, the *Broadcastable arithmetic, loadConstant(ND), reduce, the ND reduce layers (\(ReduceMode.allCases.map(\.rawValue).joined(separator: "/"))) and the layout layers")
        }

        // Every shape that leaves here is positive and of sane size.
        _ = try LayerShapes.checkedShape(output.dims, "layer '\(layer.name)' (\(layer.typeName)) output")
        let outLogical = outputLogical ?? LogicalShape.output(canonical: output, like: logical.first ?? LogicalShape(canonical: output))
        return GraphLayer(name: layer.name, modelIndex: index, op: op, inputs: layer.inputs, output: layer.outputs[0],
                          inputShapes: inputShapes, outputShape: output, inputLogicalShapes: logical, outputLogicalShape: outLogical,
                          isUpdatable: layer.isUpdatable, weights: weights, bias: bias)
    }
}
