import UpdraftCore

// Open model bodies: a Core ML model type added in a file of its own (`<Kind>Spec.swift`), with no case
// of its own in `ModelBody`. Its spec conforms to `ModelBodyCodec` (read, written, typed) and is carried
// as `ModelBody.family`; `ModelBody.families` (ModelSpec.swift) lists the spec types, one row each.
// The closed cases stay for the kinds that predate this (network, k-NN, pipeline).

/// A family's model spec, as the model holds it (`ModelBody.family`).
public protocol ModelBodyFamily: Hashable, Sendable {
    /// The Model oneof case it is stored as.
    var modelType: CoreMLModelType { get }
    /// The labels it predicts, in the order of its probabilities; nil when it is not a classifier.
    var classLabels: ClassLabels? { get }
}

/// What the reader and the writer need of a family's spec, declared next to it.
protocol ModelBodyCodec: ModelBodyFamily {
    /// The Model oneof cases the family reads.
    static var modelTypes: [CoreMLModelType] { get }
    /// Reads the body message of a model stored as `type`.
    init(reading r: ProtoReader, type: CoreMLModelType) throws
    /// The body message, as written under `modelType`'s field.
    func encoded() -> ProtoMessage
}

/// A family's model spec (any family's), compared by value.
public struct FamilyModelBody: FamilyBox, Sendable {
    /// The family's spec (`as?` the family's type to read it, or `ModelBody.family(as:)`).
    public let base: any ModelBodyFamily
    let codec: any ModelBodyCodec
    public var hashKey: AnyHashable { AnyHashable(base) }

    init(_ spec: some ModelBodyCodec) { base = spec; codec = spec }
}

extension ModelBody {
    /// The family spec as `T`, or nil for another body.
    public func family<T: ModelBodyFamily>(as type: T.Type) -> T? {
        if case let .family(f) = self { return f.base as? T }
        return nil
    }

    /// The body of a model stored as `type`, read by the family that reads that type; nil when none does.
    static func family(reading r: ProtoReader, type: CoreMLModelType) throws -> ModelBody? {
        guard let family = families.first(where: { $0.modelTypes.contains(type) }) else { return nil }
        return .family(try family.body(reading: r, type: type))
    }
}

extension ModelBodyCodec {
    /// Reads a body of this family, wrapped.
    static func body(reading r: ProtoReader, type: CoreMLModelType) throws -> FamilyModelBody {
        FamilyModelBody(try Self(reading: r, type: type))
    }
}
