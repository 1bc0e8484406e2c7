import Foundation
import UpdraftCore

/// Writing a changed k-NN back into its model: only the fields that changed are re-encoded, so
/// everything else in the file (the description, metadata, the index type, unknown fields) keeps
/// its bytes; and the room a model file has left under protobuf's 2 GiB message limit.
extension CoreMLModel {
    /// Protobuf's limit on a message's size (2 GiB - 1 bytes): a larger model file cannot be read,
    /// by Core ML, coremltools or Updraft.
    public static let protobufMessageLimit = Int(Int32.max)

    /// The bytes one more sample of `dimension` floats labelled `label` adds to a k-NN's model file:
    /// its FloatVector in floatSamples (field 2 of the index) and its label in the labels' list.
    /// The lengths of the messages around them may grow by a few bytes more (`protobufSlack`).
    public static func kNearestNeighborsBytes(dimension: Int, label: ClassLabelValue) -> Int {
        let floats = 4 * dimension
        let vector = 1 + varintSize(UInt64(floats)) + floats          // FloatVector.vector, packed
        let sample = 1 + varintSize(UInt64(vector)) + vector          // floatSamples entry
        switch label {
        case let .string(s):
            let n = s.utf8.count
            return sample + 1 + varintSize(UInt64(n)) + n             // StringVector.vector entry
        case let .int64(v):
            return sample + varintSize(UInt64(bitPattern: v))         // Int64Vector.vector, packed
        }
    }

    /// Bytes a few growing length prefixes may add on top of `kNearestNeighborsBytes`' sum.
    public static let protobufSlack = 64

    /// Throws when this model with `labels.count` more k-NN samples of `dimension` values would pass
    /// `limit` bytes, saying how many such samples still fit.
    /// - Parameter currentSize: the model's size now (default: its serialized size).
    public func checkKNearestNeighborsRoom(appending labels: ClassLabels, dimension: Int, currentSize: Int? = nil,
                                           limit: Int = protobufMessageLimit) throws {
        let now = currentSize ?? message.serializedSize
        let values = labels.values
        var total = now + Self.protobufSlack
        var fits = 0
        for v in values {
            total += Self.kNearestNeighborsBytes(dimension: dimension, label: v)
            if total <= limit { fits += 1 }
        }
        guard total > limit else { return }
        throw UpdraftError(.invalidArgument,
            "appending \(values.count) samples of dimension \(dimension) would make the model \(total) bytes, past protobuf's 2 GiB message limit (\(limit) bytes); only \(fits) more sample\(fits == 1 ? "" : "s") fit",
            hint: "keep fewer samples per label first (updraft knn MODEL --max-per-label N, or --dedupe), or append fewer examples")
    }

    /// The model with its k-NN classifier replaced by `knn`. Only the fields that differ from the
    /// model's k-NN are re-encoded (usually the samples, the labels and numberOfNeighbors; a
    /// pre-release `k` field 2 becomes numberOfNeighbors, field 3, once k changes); every other
    /// field keeps its bytes.
    /// - Throws: `.invalidModel` when the model is not a k-NN classifier; `.invalidArgument` when the
    ///   result would pass `limit` bytes.
    public func replacingKNearestNeighbors(_ knn: KNearestNeighborsSpec, limit: Int = protobufMessageLimit) throws -> CoreMLModel {
        guard case let .kNearestNeighbors(old) = spec.body else {
            throw UpdraftError(.invalidModel, "this model is a \(spec.modelType.name), not a k-nearest-neighbors classifier")
        }
        let number = CoreMLModelType.kNearestNeighborsClassifier.rawValue
        let fresh = knn.encoded()
        var out = message
        if !out.contains(number) { out.set(ProtoField(number: number, message: ProtoMessage())) }
        let path = "Model.kNearestNeighborsClassifier"
        var edited = ProtoMessage()
        try out.editMessage(number, path: path) { m in
            // Replaces the fields `numbers` of `target` with `source`'s, where the first of them was
            // (or, absent, before the first field numbered higher).
            func take(_ numbers: [Int], from source: ProtoMessage, into target: inout ProtoMessage) {
                let new = source.fields.filter { numbers.contains($0.number) }
                let at = target.fields.firstIndex { numbers.contains($0.number) }
                    ?? target.fields.firstIndex { $0.number > numbers.max()! } ?? target.fields.count
                let before = target.fields[..<at].filter { !numbers.contains($0.number) }
                let after = target.fields[at...].filter { !numbers.contains($0.number) }
                target.fields = before + new + after
            }
            if old.dimension != knn.dimension || old.samples != knn.samples || old.index != knn.index
                || old.squaredEuclideanDistance != knn.squaredEuclideanDistance {
                if !m.contains(1) { m.set(ProtoField(number: 1, message: ProtoMessage())) }
                let index = try ProtoMessage(parsing: fresh.last(1)?.payload ?? [], path: path + ".nearestNeighborsIndex")
                try m.editMessage(1, path: path + ".nearestNeighborsIndex") { i in
                    if old.dimension != knn.dimension { take([1], from: index, into: &i) }
                    if old.samples != knn.samples { take([2], from: index, into: &i) }
                    if old.index != knn.index { take([100, 110], from: index, into: &i) }
                    if old.squaredEuclideanDistance != knn.squaredEuclideanDistance { take([200], from: index, into: &i) }
                }
            }
            if old.numberOfNeighbors != knn.numberOfNeighbors { take([2, 3], from: fresh, into: &m) }
            if old.labels != knn.labels { take([100, 101], from: fresh, into: &m) }
            if old.defaultLabel != knn.defaultLabel { take([110, 111], from: fresh, into: &m) }
            if old.weighting != knn.weighting { take([200, 210], from: fresh, into: &m) }
            edited = m
        }
        guard out.serializedSize <= limit else {
            throw UpdraftError(.invalidArgument,
                "the k-NN's \(knn.samples.count) samples make the model \(out.serializedSize) bytes, past protobuf's 2 GiB message limit (\(limit) bytes)",
                hint: "keep fewer samples per label (updraft knn MODEL --max-per-label N, or --dedupe)")
        }
        // The typed view is re-read from the bytes just written, so the two never disagree.
        var newSpec = spec
        newSpec.body = .kNearestNeighbors(try KNearestNeighborsSpec(reading: ProtoReader(edited, path: path)))
        return CoreMLModel(message: out, spec: newSpec)
    }
}

/// One label of a k-NN's type.
public enum ClassLabelValue: Hashable, Sendable {
    /// A string label.
    case string(String)
    /// An int64 label.
    case int64(Int64)
}

extension ClassLabels {
    /// The labels one by one.
    public var values: [ClassLabelValue] {
        switch self {
        case let .strings(s): return s.map(ClassLabelValue.string)
        case let .int64(v): return v.map(ClassLabelValue.int64)
        }
    }
}

extension CoreMLModel {
    /// The model's k-NN classifier; nil for a model of another kind.
    public var kNearestNeighbors: KNearestNeighborsSpec? {
        if case let .kNearestNeighbors(k) = spec.body { return k }
        return nil
    }

    /// The model with its k-NN changed by `edit` (`KNearestNeighborsSpec.append`, `removeSamples`,
    /// `capSamplesPerLabel`, `removeDuplicateSamples`, `setNumberOfNeighbors`), written back as
    /// `replacingKNearestNeighbors` writes it: only the fields that changed.
    /// - Throws: `.invalidModel` when the model is not a k-NN classifier; the edit's errors.
    public func editingKNearestNeighbors(_ edit: (inout KNearestNeighborsSpec) throws -> Void) throws -> CoreMLModel {
        guard var knn = kNearestNeighbors else {
            throw UpdraftError(.invalidModel, "this model is a \(spec.modelType.name), not a k-nearest-neighbors classifier",
                               hint: "`updraft inspect` shows what the model is")
        }
        try edit(&knn)
        return try replacingKNearestNeighbors(knn)
    }
}
