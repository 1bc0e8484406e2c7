import UpdraftCore

/// Writing the typed spec as protobuf messages, for models Updraft builds from scratch and for the
/// parts of a loaded model it replaces. Fields go out in field-number order, proto3 style: scalars
/// equal to their default are left out, repeated scalars are packed, weights are always float32
/// (floatValue).
/// Appends fields to a message, leaving out proto3 defaults.
struct MessageWriter {
    var message = ProtoMessage()

    mutating func field(_ f: ProtoField) { message.fields.append(f) }
    mutating func string(_ n: Int, _ s: String) { if !s.isEmpty { field(ProtoField(number: n, string: s)) } }
    mutating func strings(_ n: Int, _ values: [String]) { for s in values { field(ProtoField(number: n, string: s)) } }
    /// uint64 sizes (negative values cannot occur in a valid spec and are written as 0, i.e. left out).
    mutating func size(_ n: Int, _ v: Int) { if v > 0 { field(ProtoField(number: n, varint: UInt64(v))) } }
    mutating func int64(_ n: Int, _ v: Int64) { if v != 0 { field(ProtoField(number: n, int64: v)) } }
    /// int32 and enums (negative values sign-extended to 10 bytes, as protobuf does).
    mutating func int32(_ n: Int, _ v: Int32) { if v != 0 { field(ProtoField(number: n, int64: Int64(v))) } }
    mutating func bool(_ n: Int, _ v: Bool) { if v { field(ProtoField(number: n, bool: true)) } }
    mutating func float(_ n: Int, _ v: Float) { if v.bitPattern != 0 { field(ProtoField(number: n, float: v)) } }
    mutating func double(_ n: Int, _ v: Double) { if v.bitPattern != 0 { field(ProtoField(number: n, double: v)) } }
    mutating func sizes(_ n: Int, _ values: [Int]) {
        if !values.isEmpty { field(ProtoField(number: n, packedVarints: values.map { UInt64(max(0, $0)) })) }
    }
    mutating func int64s(_ n: Int, _ values: [Int64]) {
        if !values.isEmpty { field(ProtoField(number: n, packedVarints: values.map { UInt64(bitPattern: $0) })) }
    }
    mutating func floats(_ n: Int, _ values: [Float]) {
        if !values.isEmpty { field(ProtoField(number: n, packedFloats: values)) }
    }
    mutating func doubles(_ n: Int, _ values: [Double]) {
        if !values.isEmpty { field(ProtoField(number: n, packedDoubles: values)) }
    }
    /// An embedded message, always written (presence matters for messages).
    mutating func message(_ n: Int, _ m: ProtoMessage) { field(ProtoField(number: n, message: m)) }
    mutating func message(_ n: Int, _ build: (inout MessageWriter) -> Void) {
        var w = MessageWriter()
        build(&w)
        message(n, w.message)
    }
}

extension ModelSpec {
    /// The spec as a Model protobuf message (float32 weights; what `CoreMLModel.init(spec:)` stores and writes).
    public func encoded() -> ProtoMessage {
        var w = MessageWriter()
        w.int32(1, specificationVersion)
        w.message(2, description.encoded())
        w.bool(10, isUpdatable)
        switch body {
        case let .neuralNetwork(n): w.message(n.kind.fieldNumber, n.encoded())
        case let .kNearestNeighbors(k): w.message(CoreMLModelType.kNearestNeighborsClassifier.rawValue, k.encoded())
        case let .pipeline(p): w.message(p.kind.modelType.rawValue, p.encoded())
        case let .family(f): w.message(f.base.modelType.rawValue, f.codec.encoded())
        }
        return w.message
    }
}

extension ModelDescription {
    func encoded() -> ProtoMessage {
        var w = MessageWriter()
        for f in inputs { w.message(1, f.encoded()) }
        for f in outputs { w.message(10, f.encoded()) }
        w.string(11, predictedFeatureName)
        w.string(12, predictedProbabilitiesName)
        for f in trainingInputs { w.message(50, f.encoded()) }
        if !metadata.isEmpty {
            w.message(100) { m in
                m.string(1, metadata.shortDescription)
                m.string(2, metadata.versionString)
                m.string(3, metadata.author)
                m.string(4, metadata.license)
                for kv in metadata.userDefined {
                    m.message(100) { e in e.string(1, kv.key); e.string(2, kv.value) }
                }
            }
        }
        return w.message
    }
}

extension FeatureDescription {
    func encoded() -> ProtoMessage {
        var w = MessageWriter()
        w.string(1, name)
        w.string(2, shortDescription)
        w.message(3) { t in
            switch type {
            case .int64: t.message(1, ProtoMessage())
            case .double: t.message(2, ProtoMessage())
            case .string: t.message(3, ProtoMessage())
            case let .image(i):
                t.message(4) { m in
                    m.int64(1, Int64(i.width))
                    m.int64(2, Int64(i.height))
                    m.int32(3, i.colorSpace.rawValue)
                }
            case let .multiArray(a):
                t.message(5) { m in
                    m.int64s(1, a.shape.map { Int64($0) })
                    m.int32(2, a.dataType.rawValue)
                }
            case let .dictionary(key): t.message(6) { m in m.message(key == .int64 ? 1 : 2, ProtoMessage()) }
            case .unsupported: break
            }
            t.bool(1000, isOptional)
        }
        return w.message
    }
}

extension NeuralNetworkSpec {
    func encoded() -> ProtoMessage {
        var w = MessageWriter()
        for l in layers { w.message(1, l.encoded()) }
        for p in preprocessing {
            w.message(2) { m in
                m.string(1, p.featureName)
                if let s = p.scaler {
                    m.message(10) { sc in
                        sc.float(10, s.channelScale)
                        sc.float(20, s.blueBias)
                        sc.float(21, s.greenBias)
                        sc.float(22, s.redBias)
                        sc.float(30, s.grayBias)
                    }
                }
            }
        }
        w.int32(5, arrayInputShapeMapping)
        w.int32(6, imageInputShapeMapping)
        if let u = updateParameters { w.message(10, u.encoded()) }
        if kind == .classifier {
            switch classLabels {
            case let .strings(s)?: w.message(100) { m in m.strings(1, s) }
            case let .int64(v)?: w.message(101) { m in m.int64s(1, v) }
            case nil: break
            }
            w.string(200, labelProbabilityLayerName)
        }
        return w.message
    }
}

// MARK: Update parameters

extension DoubleParameter {
    func encoded() -> ProtoMessage {
        var w = MessageWriter()
        w.double(1, defaultValue)
        if let r = range { w.message(10) { m in m.double(1, r.min); m.double(2, r.max) } }
        return w.message
    }
}

extension Int64Parameter {
    func encoded() -> ProtoMessage {
        var w = MessageWriter()
        w.int64(1, defaultValue)
        switch allowed {
        case let .range(lo, hi)?: w.message(10) { m in m.int64(1, lo); m.int64(2, hi) }
        case let .set(values)?: w.message(11) { m in m.int64s(1, values) }
        case nil: break
        }
        return w.message
    }
}

extension UpdateParameters {
    func encoded() -> ProtoMessage {
        var w = MessageWriter()
        for loss in lossLayers {
            w.message(1) { m in
                m.string(1, loss.name)
                if let kind = loss.kind {
                    m.message(kind == .categoricalCrossEntropy ? 10 : 11) { l in
                        l.string(1, loss.input)
                        l.string(2, loss.target)
                    }
                }
            }
        }
        // An optimizer past Core ML has no message to write (`CoreMLModel.write` refuses such a model by name).
        if let o = optimizer, let fields = o.kind.optimizerType.coreML {
            w.message(2) { m in
                m.message(fields.field) { p in
                    if let lr = o.learningRate { p.message(1, lr.encoded()) }
                    if let mb = o.miniBatchSize { p.message(2, mb.encoded()) }
                    for f in fields.parameters {
                        if let v = o[f.key] { p.message(f.field, v.encoded()) }
                    }
                }
            }
        }
        if let e = epochs { w.message(3, e.encoded()) }
        if let s = shuffle { w.message(10) { m in m.bool(1, s.defaultValue) } }
        if let s = seed { w.message(20, s.encoded()) }
        return w.message
    }
}

// MARK: Layers

extension WeightParams {
    /// float32 values and the updatable flag (float16 values are widened: Updraft writes float32).
    func encoded() -> ProtoMessage {
        var w = MessageWriter()
        w.floats(1, values)
        w.bool(50, isUpdatable)
        return w.message
    }
}

func borderAmounts(top: Int, bottom: Int, left: Int, right: Int) -> ProtoMessage {
    var w = MessageWriter()
    w.message(10) { e in e.size(1, top); e.size(2, bottom) }
    w.message(10) { e in e.size(1, left); e.size(2, right) }
    return w.message
}
