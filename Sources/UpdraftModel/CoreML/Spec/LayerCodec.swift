import UpdraftCore

/// Reading and writing NeuralNetworkLayer messages and the parameter messages of the layer types
/// Updraft runs: each type's decoder and encoder side by side (field numbers inside a parameter
/// message as in NeuralNetwork.proto). Which layer type holds which parameters is `LayerTable.swift`.
extension LayerSpec {
    init(reading base: ProtoReader, index: Int) throws {
        let name = try base.string(1, "name") ?? ""
        // From here on, errors name the layer.
        let r = ProtoReader(base.message, path: base.path + (name.isEmpty ? "" : " \"\(name)\""))
        self.name = name
        inputs = try r.strings(2, "input")
        outputs = try r.strings(3, "output")
        isUpdatable = try r.bool(10, "isUpdatable") ?? false
        // Every layer type is a oneof case numbered 100 or more; fields below 100 are common ones.
        guard let f = r.message.fields.last(where: { $0.number >= 100 }) else {
            throw UpdraftError(.invalidModel, "layer \(index) '\(name)' has no layer type",
                               hint: "every NeuralNetworkLayer needs one of its layer parameter messages")
        }
        let type = NeuralNetworkLayerType(rawValue: f.number)
        let p = try r.child(f, named: NeuralNetworkLayerType.name(ofField: f.number))
        if let type, let read = LayerParams.readers[type] {
            params = try read(p)
        } else {
            params = .unsupported(field: f.number, name: NeuralNetworkLayerType.name(ofField: f.number))
        }
    }
}

extension LayerSpec {
    func encoded() -> ProtoMessage {
        var w = MessageWriter()
        w.string(1, name)
        w.strings(2, inputs)
        w.strings(3, outputs)
        w.bool(10, isUpdatable)
        w.message(params.typeField, params.encoded())
        return w.message
    }
}

extension WeightParams {
    init(reading r: ProtoReader) throws {
        isUpdatable = try r.bool(50, "isUpdatable") ?? false
        let floats = try r.floats(1, "floatValue")
        let half = try r.bytes(2, "float16Value") ?? []
        let raw = try r.bytes(30, "rawValue") ?? []
        let int8 = try r.bytes(31, "int8RawValue") ?? []
        values = []
        if r.has(40) {
            encoding = .quantized
            storedByteCount = raw.count + int8.count
        } else if !raw.isEmpty {
            encoding = .raw
            storedByteCount = raw.count
        } else if !int8.isEmpty {
            encoding = .int8
            storedByteCount = int8.count
        } else if !half.isEmpty {
            guard floats.isEmpty else {
                throw r.error(at: r.message.last(2)?.offset ?? 0,
                    "weights hold both floatValue (\(floats.count) values) and float16Value; expected one of them")
            }
            guard half.count % 2 == 0 else {
                throw r.error(at: r.message.last(2)?.offset ?? 0,
                    "float16Value should hold 2 bytes per value, found an odd \(half.count) bytes")
            }
            var out = [Float]()
            out.reserveCapacity(half.count / 2)
            var i = half.startIndex
            while i < half.endIndex {
                out.append(floatFromHalf(UInt16(half[i]) | UInt16(half[i + 1]) << 8))
                i += 2
            }
            values = out
            encoding = .float16
            storedByteCount = half.count
        } else {
            values = floats
            encoding = floats.isEmpty ? .empty : .float32
            storedByteCount = floats.count * 4
        }
    }
}

/// Reads [H, W] pairs from BorderAmounts {repeated EdgeSizes borderAmounts = 10}.
func borderAmounts(_ r: ProtoReader?) throws -> (top: Int, bottom: Int, left: Int, right: Int) {
    guard let r else { return (0, 0, 0, 0) }
    let edges = try r.messages(10, "borderAmounts")
    if edges.isEmpty { return (0, 0, 0, 0) }
    guard edges.count == 2 else {
        throw UpdraftError(.invalidModel, "\(r.path): padding lists \(edges.count) border amounts; expected 2 (height, width)")
    }
    let h = edges[0], w = edges[1]
    return (try h.size(1, "startEdgeSize") ?? 0, try h.size(2, "endEdgeSize") ?? 0,
            try w.size(1, "startEdgeSize") ?? 0, try w.size(2, "endEdgeSize") ?? 0)
}

private func samePaddingMode(_ r: ProtoReader) throws -> SamePaddingMode {
    let raw = try r.int32(1, "asymmetryMode") ?? 0
    guard let mode = SamePaddingMode(rawValue: Int(raw)) else {
        throw UpdraftError(.invalidModel,
            "\(r.path): asymmetryMode \(raw) is not BOTTOM_RIGHT_HEAVY (0) or TOP_LEFT_HEAVY (1)")
    }
    return mode
}

/// A repeated size pair, Core ML's default when the list is empty.
private func pair(_ values: [Int], default d: [Int]) -> [Int] { values.isEmpty ? d : values }

extension ProtoReader {
    /// A layer's weights (empty when absent) and bias (nil when absent), from their WeightParams fields.
    func weightsAndBias(_ weightsField: Int, _ biasField: Int) throws -> (WeightParams, WeightParams?) {
        (try message(weightsField, "weights").map(WeightParams.init(reading:)) ?? .empty,
         try message(biasField, "bias").map(WeightParams.init(reading:)))
    }
}

extension MessageWriter {
    /// A layer's weights, and its bias when it has one (`hasBias`).
    mutating func weightsAndBias(_ weights: WeightParams, _ bias: WeightParams?, hasBias: Bool, _ weightsField: Int, _ biasField: Int) {
        message(weightsField, weights.encoded())
        if let bias, hasBias { message(biasField, bias.encoded()) }
    }
}

extension ConvolutionLayerParams {
    init(reading r: ProtoReader) throws {
        outputChannels = try r.size(1, "outputChannels") ?? 0
        kernelChannels = try r.size(2, "kernelChannels") ?? 0
        groups = max(1, try r.size(10, "nGroups") ?? 1)
        kernelSize = pair(try r.sizes(20, "kernelSize"), default: [3, 3])
        stride = pair(try r.sizes(30, "stride"), default: [1, 1])
        dilation = pair(try r.sizes(40, "dilationFactor"), default: [1, 1])
        padding = .none
        if let f = r.lastOf([50, 51]) {
            if f.number == 50 {
                let v = try r.child(f, named: "valid")
                let b = try borderAmounts(try v.message(1, "paddingAmounts"))
                padding = .valid(top: b.top, bottom: b.bottom, left: b.left, right: b.right)
            } else {
                let s = try r.child(f, named: "same")
                padding = .same(try samePaddingMode(s))
            }
        }
        isDeconvolution = try r.bool(60, "isDeconvolution") ?? false
        hasBias = try r.bool(70, "hasBias") ?? false
        (weights, bias) = try r.weightsAndBias(Self.weightsField, Self.biasField)
        outputShape = try r.sizes(100, "outputShape")
    }

    func encoded(into w: inout MessageWriter) {
        w.size(1, outputChannels)
        w.size(2, kernelChannels)
        w.size(10, groups)
        w.sizes(20, kernelSize)
        w.sizes(30, stride)
        w.sizes(40, dilation)
        switch padding {
        case let .valid(top, bottom, left, right):
            w.message(50) { v in v.message(1, borderAmounts(top: top, bottom: bottom, left: left, right: right)) }
        case let .same(mode):
            w.message(51) { s in s.int32(1, Int32(mode.rawValue)) }
        }
        w.bool(60, isDeconvolution)
        w.bool(70, hasBias)
        w.weightsAndBias(weights, bias, hasBias: hasBias, Self.weightsField, Self.biasField)
        w.sizes(100, outputShape)
    }
}

extension InnerProductLayerParams {
    init(reading r: ProtoReader) throws {
        inputChannels = try r.size(1, "inputChannels") ?? 0
        outputChannels = try r.size(2, "outputChannels") ?? 0
        hasBias = try r.bool(10, "hasBias") ?? false
        (weights, bias) = try r.weightsAndBias(Self.weightsField, Self.biasField)
        int8DynamicQuantize = try r.bool(22, "int8DynamicQuantize") ?? false
    }

    func encoded(into w: inout MessageWriter) {
        w.size(1, inputChannels)
        w.size(2, outputChannels)
        w.bool(10, hasBias)
        w.weightsAndBias(weights, bias, hasBias: hasBias, Self.weightsField, Self.biasField)
        w.bool(22, int8DynamicQuantize)
    }
}

extension PoolingLayerParams {
    init(reading r: ProtoReader) throws {
        type = try r.int32(1, "type") ?? 0
        kernelSize = pair(try r.sizes(10, "kernelSize"), default: [3, 3])
        stride = pair(try r.sizes(20, "stride"), default: [1, 1])
        excludePadding = try r.bool(50, "avgPoolExcludePadding") ?? false
        global = try r.bool(60, "globalPooling") ?? false
        padding = .none
        if let f = r.lastOf([30, 31, 32]) {
            let names = [30: "valid", 31: "same", 32: "includeLastPixel"]
            let m = try r.child(f, named: names[f.number] ?? "")
            switch f.number {
            case 30:
                let b = try borderAmounts(try m.message(1, "paddingAmounts"))
                padding = .valid(top: b.top, bottom: b.bottom, left: b.left, right: b.right)
            case 31:
                padding = .same(try samePaddingMode(m))
            default:
                let amounts = try m.sizes(10, "paddingAmounts")
                guard amounts.isEmpty || amounts.count == 2 else {
                    throw UpdraftError(.invalidModel,
                        "\(m.path): paddingAmounts lists \(amounts.count) values; expected 2 (height, width)")
                }
                padding = .includeLastPixel(height: amounts.first ?? 0, width: amounts.last ?? 0)
            }
        }
    }

    func encoded(into w: inout MessageWriter) {
        w.int32(1, type)
        w.sizes(10, kernelSize)
        w.sizes(20, stride)
        switch padding {
        case let .valid(top, bottom, left, right):
            w.message(30) { v in v.message(1, borderAmounts(top: top, bottom: bottom, left: left, right: right)) }
        case let .same(mode):
            w.message(31) { s in s.int32(1, Int32(mode.rawValue)) }
        case let .includeLastPixel(h, wd):
            w.message(32) { m in m.sizes(10, [h, wd]) }
        }
        w.bool(50, excludePadding)
        w.bool(60, global)
    }
}

extension ActivationLayerParams {
    init(reading r: ProtoReader) throws {
        guard let f = r.message.fields.last else {
            self.init(unsupported: "no activation type", field: 0)
            return
        }
        let type = ActivationParamsType(rawValue: f.number)
        let name = type?.name ?? "activation type \(f.number)"
        let m = try r.child(f, named: name)
        func float(_ n: Int, _ what: String) throws -> Float { try m.float(n, what) ?? 0 }
        /// The float values of a WeightParams field; nil (unsupported) when quantized.
        func weights(_ n: Int, _ what: String) throws -> [Float]? {
            let w = try m.message(n, what).map(WeightParams.init(reading:)) ?? .empty
            return w.isReadable ? w.values : nil
        }
        switch type {
        case .linear?: self.init(.linear(alpha: try float(1, "alpha"), beta: try float(2, "beta")))
        case .ReLU?: self.init(.relu)
        case .leakyReLU?: self.init(.leakyReLU(alpha: try float(1, "alpha")))
        case .thresholdedReLU?: self.init(.thresholdedReLU(alpha: try float(1, "alpha")))
        case .PReLU?:
            guard let alpha = try weights(1, "alpha") else { self.init(unsupported: "\(name) with quantized alpha", field: f.number); return }
            self.init(.prelu(alpha: alpha))
        case .tanh?: self.init(.tanh)
        case .scaledTanh?: self.init(.scaledTanh(alpha: try float(1, "alpha"), beta: try float(2, "beta")))
        case .sigmoid?: self.init(.sigmoid)
        case .sigmoidHard?: self.init(.sigmoidHard(alpha: try float(1, "alpha"), beta: try float(2, "beta")))
        case .ELU?: self.init(.elu(alpha: try float(1, "alpha")))
        case .softsign?: self.init(.softsign)
        case .softplus?: self.init(.softplus)
        case .parametricSoftplus?:
            guard let alpha = try weights(1, "alpha"), let beta = try weights(2, "beta") else {
                self.init(unsupported: "\(name) with quantized alpha or beta", field: f.number); return
            }
            self.init(.parametricSoftplus(alpha: alpha, beta: beta))
        case nil:
            self.init(unsupported: name, field: f.number)
        }
    }

    func encoded(into w: inout MessageWriter) {
        let field = typeField
        switch activation {
        case .relu?, .tanh?, .sigmoid?, .softsign?, .softplus?: w.message(field, ProtoMessage())
        case let .leakyReLU(alpha)?, let .thresholdedReLU(alpha)?, let .elu(alpha)?:
            w.message(field) { m in m.float(1, alpha) }
        case let .linear(alpha, beta)?, let .scaledTanh(alpha, beta)?, let .sigmoidHard(alpha, beta)?:
            w.message(field) { m in m.float(1, alpha); m.float(2, beta) }
        case let .prelu(alpha)?: w.message(field) { m in m.message(1, WeightParams(values: alpha).encoded()) }
        case let .parametricSoftplus(alpha, beta)?:
            w.message(field) { m in
                m.message(1, WeightParams(values: alpha).encoded())
                m.message(2, WeightParams(values: beta).encoded())
            }
        case .clip?, .unary?, nil: if field > 0 { w.message(field, ProtoMessage()) }
        }
    }
}

extension UnaryFunctionLayerParams {
    init(reading r: ProtoReader) throws {
        self.init(type: try r.int32(1, "type") ?? 0, alpha: try r.float(2, "alpha") ?? 0, epsilon: try r.float(3, "epsilon") ?? 0,
                  shift: try r.float(4, "shift") ?? 0, scale: try r.float(5, "scale") ?? 0)
    }

    func encoded(into w: inout MessageWriter) {
        w.int32(1, type)
        w.float(2, alpha)
        w.float(3, epsilon)
        w.float(4, shift)
        w.float(5, scale)
    }
}

extension BatchnormLayerParams {
    init(reading r: ProtoReader) throws {
        channels = try r.size(1, "channels") ?? 0
        computeMeanVar = try r.bool(5, "computeMeanVar") ?? false
        instanceNormalization = try r.bool(6, "instanceNormalization") ?? false
        epsilon = try r.float(10, "epsilon") ?? 0
        gamma = try r.message(15, "gamma").map(WeightParams.init(reading:)) ?? .empty
        beta = try r.message(16, "beta").map(WeightParams.init(reading:)) ?? .empty
        mean = try r.message(17, "mean").map(WeightParams.init(reading:)) ?? .empty
        variance = try r.message(18, "variance").map(WeightParams.init(reading:)) ?? .empty
    }

    func encoded(into w: inout MessageWriter) {
        w.size(1, channels)
        w.bool(5, computeMeanVar)
        w.bool(6, instanceNormalization)
        w.float(10, epsilon)
        w.message(15, gamma.encoded())
        w.message(16, beta.encoded())
        w.message(17, mean.encoded())
        w.message(18, variance.encoded())
    }
}
