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

func samePaddingMode(_ r: ProtoReader) throws -> SamePaddingMode {
    let raw = try r.int32(1, "asymmetryMode") ?? 0
    guard let mode = SamePaddingMode(rawValue: Int(raw)) else {
        throw UpdraftError(.invalidModel,
            "\(r.path): asymmetryMode \(raw) is not BOTTOM_RIGHT_HEAVY (0) or TOP_LEFT_HEAVY (1)")
    }
    return mode
}

/// A repeated size pair, Core ML's default when the list is empty.
func sizePair(_ values: [Int], default d: [Int]) -> [Int] { values.isEmpty ? d : values }

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
