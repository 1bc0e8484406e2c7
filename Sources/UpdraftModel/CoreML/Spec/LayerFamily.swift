import UpdraftCore

// Open layer families: a Core ML layer type added in a file of its own (`Layers+<Family>.swift`), with
// no case of its own in `LayerParams` or `LayerOp`. Its parameters conform to `LayerFamilyCodec` (read,
// written, shaped) and its graph op to `LayerFamilyOp`; `LayerParams.families` (LayerTable.swift) lists
// the parameter types, one row each. The closed cases stay for the layer types that predate this.

/// What a `.family` case carries (a layer family's parameters or op, a model kind's spec): a value
/// behind an existential, compared and hashed as that value, so the enums holding it stay Hashable.
public protocol FamilyBox: Hashable {
    /// The boxed value, as `AnyHashable`.
    var hashKey: AnyHashable { get }
}

extension FamilyBox {
    public static func == (a: Self, b: Self) -> Bool { a.hashKey == b.hashKey }
    public func hash(into hasher: inout Hasher) { hasher.combine(hashKey) }
}

/// A family's parameter message, as the spec holds it (`LayerParams.family`).
public protocol LayerFamilyParams: Hashable, Sendable {
    /// The NeuralNetworkLayer type these parameters are written as.
    var layerType: NeuralNetworkLayerType { get }
    /// Values the layer stores (weights, gamma, beta): `LayerSpec.parameterCount`.
    var parameterCount: Int { get }
}

/// What the codec and the graph builder need of a family's parameters, declared next to them.
protocol LayerFamilyCodec: LayerFamilyParams, LayerShapeRule {
    /// The layer types the family reads.
    static var layerTypes: [NeuralNetworkLayerType] { get }
    /// Reads the parameter message of a layer of `type`.
    init(reading r: ProtoReader, type: NeuralNetworkLayerType) throws
    /// Writes the parameter message.
    func encoded(into w: inout MessageWriter)
}

/// A family layer's parameters (any family's), compared by value.
public struct FamilyLayerParams: FamilyBox, Sendable {
    /// The family's parameters (`as?` the family's type to read them).
    public let base: any LayerFamilyParams
    let codec: any LayerFamilyCodec
    public var hashKey: AnyHashable { AnyHashable(base) }

    init(_ params: some LayerFamilyCodec) { base = params; codec = params }
}

/// A family layer's graph op: what its kind needs to run it (`LayerOp.family`).
public protocol LayerFamilyOp: Hashable, Sendable {
    /// Short label for logs and error messages.
    var name: String { get }
}

/// A family layer's op (any family's), compared by value.
public struct FamilyOp: FamilyBox, Sendable {
    /// The family's op (`as?` the family's type to read it).
    public let base: any LayerFamilyOp
    public var hashKey: AnyHashable { AnyHashable(base) }
    public init(_ op: some LayerFamilyOp) { base = op }
}

extension LayerOp {
    /// The family op as `T`, or nil for another op.
    public func family<T: LayerFamilyOp>(as type: T.Type) -> T? {
        if case let .family(f) = self { return f.base as? T }
        return nil
    }
}

extension LayerParams {
    /// The family parameters as `T`, or nil for other parameters.
    public func family<T: LayerFamilyParams>(as type: T.Type) -> T? {
        if case let .family(f) = self { return f.base as? T }
        return nil
    }

    /// The names of the families' layer types, for messages that list what Updraft runs.
    static var familyTypeNames: [String] { families.flatMap { $0.layerTypes.map(\.name) } }
}
