import Foundation
import UpdraftCore
import UpdraftData

/// TensorBoard's `Event` and `Summary` protobufs (tensorboard/compat/proto/event.proto, summary.proto,
/// histogram.proto, tensor.proto; plugins/hparams/plugin_data.proto), built with Updraft's own
/// protobuf writer. Field numbers are the protos'; only what Updraft logs is here.
enum TensorBoardEvent {
    /// `Event { wall_time = 1; step = 2; oneof what { file_version = 3; summary = 5; session_log = 7 } }`.
    static func event(wallTime: Double, step: Int64, _ what: ProtoField) -> [UInt8] {
        var fields = [ProtoField(number: 1, double: wallTime)]
        if step != 0 { fields.append(ProtoField(number: 2, int64: step)) }
        fields.append(what)
        return ProtoMessage(fields: fields).serialized()
    }

    /// The first record of every event file: `file_version: "brain.Event:2"`.
    static func fileVersion(wallTime: Double) -> [UInt8] {
        event(wallTime: wallTime, step: 0, ProtoField(number: 3, string: "brain.Event:2"))
    }

    /// An event holding `values` (each a `Summary.Value`) as its `summary` (field 5).
    static func summary(wallTime: Double, step: Int64, _ values: [ProtoMessage]) -> [UInt8] {
        event(wallTime: wallTime, step: step,
              ProtoField(number: 5, message: ProtoMessage(fields: values.map { ProtoField(number: 1, message: $0) })))
    }

    /// `SessionLog { status = 1 (START = 1); msg = 3 }` as field 7: TensorBoard drops the events of
    /// earlier files logged at steps at or after this event's (a resumed run's overlap).
    static func sessionStart(wallTime: Double, step: Int64, message: String) -> [UInt8] {
        event(wallTime: wallTime, step: step, ProtoField(number: 7, message: ProtoMessage(fields: [
            ProtoField(number: 1, varint: 1), ProtoField(number: 3, string: message)])))
    }

    /// `Summary.Value { tag = 1; simple_value = 2 }`: one point of the scalars dashboard.
    static func scalar(_ tag: String, _ value: Double) -> ProtoMessage {
        ProtoMessage(fields: [ProtoField(number: 1, string: tag), ProtoField(number: 2, float: Float(value))])
    }

    /// `Summary.Value { tag = 1; histo = 5 }` of `values`: `HistogramProto { min = 1; max = 2; num = 3;
    /// sum = 4; sum_squares = 5; bucket_limit = 6 (packed double, each bucket's right edge, the last
    /// one the maximum); bucket = 7 (packed double counts) }`, in `bucketCount` equal-width buckets
    /// from the minimum to the maximum. Non-finite values are left out (counted in none).
    static func histogram(_ tag: String, _ values: [Float], bucketCount: Int = 30) -> ProtoMessage {
        let finite = values.lazy.filter(\.isFinite).map(Double.init)
        var lo = Double.infinity, hi = -Double.infinity, sum = 0.0, squares = 0.0, n = 0
        for v in finite { lo = min(lo, v); hi = max(hi, v); sum += v; squares += v * v; n += 1 }
        if n == 0 { lo = 0; hi = 0 }
        let count = hi > lo ? max(1, bucketCount) : 1
        let width = (hi - lo) / Double(count)
        var buckets = [Double](repeating: 0, count: count)
        for v in finite { buckets[width > 0 ? min(count - 1, Int((v - lo) / width)) : 0] += 1 }
        let limits = (0..<count).map { $0 == count - 1 ? hi : lo + width * Double($0 + 1) }
        let histo = ProtoMessage(fields: [
            ProtoField(number: 1, double: lo), ProtoField(number: 2, double: hi), ProtoField(number: 3, double: Double(n)),
            ProtoField(number: 4, double: sum), ProtoField(number: 5, double: squares),
            ProtoField(number: 6, packedDoubles: limits), ProtoField(number: 7, packedDoubles: buckets)])
        return ProtoMessage(fields: [ProtoField(number: 1, string: tag), ProtoField(number: 5, message: histo)])
    }

    /// `SummaryMetadata { plugin_data = 1 { plugin_name = 1; content = 2 } }`.
    static func pluginMetadata(_ plugin: String, content: [UInt8] = []) -> ProtoField {
        var data = [ProtoField(number: 1, string: plugin)]
        if !content.isEmpty { data.append(ProtoField(number: 2, bytes: content)) }
        return ProtoField(number: 9, message: ProtoMessage(fields: [ProtoField(number: 1, message: ProtoMessage(fields: data))]))
    }

    /// A text-plugin value: `tensor = 8 { dtype = 1 (DT_STRING = 7); tensor_shape = 2 {} (a scalar);
    /// string_val = 8 }`, rendered by TensorBoard as Markdown.
    static func text(_ tag: String, markdown: String) -> ProtoMessage {
        let tensor = ProtoMessage(fields: [ProtoField(number: 1, varint: 7), ProtoField(number: 2, message: ProtoMessage()),
                                           ProtoField(number: 8, string: markdown)])
        return ProtoMessage(fields: [ProtoField(number: 1, string: tag), pluginMetadata("text"),
                                     ProtoField(number: 8, message: tensor)])
    }

    /// `Summary.Value { tag = 1; image = 4 { height = 1; width = 2; colorspace = 3; encoded_image_string = 4 } }`.
    static func image(_ tag: String, png: [UInt8], width: Int, height: Int, channels: Int) -> ProtoMessage {
        let image = ProtoMessage(fields: [
            ProtoField(number: 1, varint: UInt64(height)), ProtoField(number: 2, varint: UInt64(width)),
            ProtoField(number: 3, varint: UInt64(channels)), ProtoField(number: 4, bytes: png)])
        return ProtoMessage(fields: [ProtoField(number: 1, string: tag), ProtoField(number: 4, message: image)])
    }

    /// A hyperparameter's value for the hparams plugin: `google.protobuf.Value { number_value = 2;
    /// string_value = 3; bool_value = 4 }`.
    enum HParam: Equatable { case number(Double), string(String), bool(Bool) }

    /// The hparams plugin's `_hparams_/session_start_info` value: `HParamsPluginData { version = 1 (0);
    /// session_start_info = 3 { hparams = 1 (map<string, Value>); group_name = 4; start_time_secs = 5 } }`
    /// (an empty group: the plugin groups by run),
    /// with the plugin's null tensor (`DT_FLOAT`, shape [0]).
    static func sessionStartInfo(_ hparams: [(String, HParam)], group: String, startTime: Double) -> ProtoMessage {
        var info = hparams.map { name, value -> ProtoField in
            let v: ProtoField
            switch value {
            case .number(let x): v = ProtoField(number: 2, double: x)
            case .string(let s): v = ProtoField(number: 3, string: s)
            case .bool(let b): v = ProtoField(number: 4, bool: b)
            }
            // A map entry is a message { key = 1; value = 2 }.
            return ProtoField(number: 1, message: ProtoMessage(fields: [ProtoField(number: 1, string: name),
                                                                        ProtoField(number: 2, message: ProtoMessage(fields: [v]))]))
        }
        if !group.isEmpty { info.append(ProtoField(number: 4, string: group)) }
        info.append(ProtoField(number: 5, double: startTime))
        return hparamsValue("_hparams_/session_start_info", ProtoField(number: 3, message: ProtoMessage(fields: info)))
    }

    /// How a session ended, as the hparams plugin's `Status`.
    enum SessionStatus: UInt64 { case success = 1, failure = 2, running = 3 }

    /// The hparams plugin's `_hparams_/session_end_info` value: `session_end_info = 4 { status = 1; end_time_secs = 2 }`.
    static func sessionEndInfo(_ status: SessionStatus, endTime: Double) -> ProtoMessage {
        hparamsValue("_hparams_/session_end_info", ProtoField(number: 4, message: ProtoMessage(fields: [
            ProtoField(number: 1, varint: status.rawValue), ProtoField(number: 2, double: endTime)])))
    }

    private static func hparamsValue(_ tag: String, _ data: ProtoField) -> ProtoMessage {
        let content = ProtoMessage(fields: [data]).serialized()   // version 0 is proto3's default: not written
        let nullTensor = ProtoMessage(fields: [ProtoField(number: 1, varint: 1), ProtoField(number: 2, message: ProtoMessage(fields: [
            ProtoField(number: 2, message: ProtoMessage())]))])
        return ProtoMessage(fields: [ProtoField(number: 1, string: tag), pluginMetadata("hparams", content: content),
                                     ProtoField(number: 8, message: nullTensor)])
    }
}
