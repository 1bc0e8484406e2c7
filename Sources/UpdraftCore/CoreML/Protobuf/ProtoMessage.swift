/// One field of a protobuf message exactly as it sits on the wire.
///
/// `raw` is the whole field (key and payload) as read, or as encoded for a field Updraft wrote;
/// writing a message re-emits `raw` untouched, so fields Updraft does not understand, and the
/// original encoding of those it does (packed or not, over-long varints), survive byte for byte.
/// For fields read from a file, indices into `raw` are absolute offsets in that file (array slices
/// keep their base's indices), which is what error messages report.
public struct ProtoField: Sendable {
    /// The field number (1...2^29-1) from the field's key.
    public let number: Int
    /// How the payload is encoded (the key's low 3 bits).
    public let wireType: WireType
    /// Key and payload, as on the wire.
    public let raw: ArraySlice<UInt8>
    /// Where the payload starts inside `raw` (after the key, and after the length for wire type 2).
    let payloadStart: Int
    /// The value of a varint, or the bit pattern of a 32/64-bit field; 0 for length-delimited fields.
    public let scalar: UInt64

    /// Absolute offset of the field's key.
    public var offset: Int { raw.startIndex }
    /// The payload: the content bytes of a length-delimited field, the value bytes otherwise.
    public var payload: ArraySlice<UInt8> { raw[payloadStart..<raw.endIndex] }

    init(number: Int, wireType: WireType, raw: ArraySlice<UInt8>, payloadStart: Int, scalar: UInt64) {
        self.number = number; self.wireType = wireType; self.raw = raw
        self.payloadStart = payloadStart; self.scalar = scalar
    }

    // MARK: Encoding new fields

    private static func key(_ number: Int, _ wireType: WireType) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(5)
        appendVarint(UInt64(number) << 3 | UInt64(wireType.rawValue), to: &out)
        return out
    }

    /// A varint field (int32/int64/uint64/bool/enum; negative values take 10 bytes, as protobuf says).
    public init(number: Int, varint value: UInt64) {
        var out = ProtoField.key(number, .varint)
        let start = out.count
        appendVarint(value, to: &out)
        self.init(number: number, wireType: .varint, raw: out[...], payloadStart: start, scalar: value)
    }

    /// A varint field holding `value` as two's complement (negative values take 10 bytes).
    public init(number: Int, int64 value: Int64) { self.init(number: number, varint: UInt64(bitPattern: value)) }
    /// A varint field holding 1 for true, 0 for false.
    public init(number: Int, bool value: Bool) { self.init(number: number, varint: value ? 1 : 0) }

    /// A fixed32 field holding `value`'s IEEE 754 bits, little-endian.
    public init(number: Int, float value: Float) {
        var out = ProtoField.key(number, .fixed32)
        let start = out.count
        appendFixed32(value.bitPattern, to: &out)
        self.init(number: number, wireType: .fixed32, raw: out[...], payloadStart: start, scalar: UInt64(value.bitPattern))
    }

    /// A fixed64 field holding `value`'s IEEE 754 bits, little-endian.
    public init(number: Int, double value: Double) {
        var out = ProtoField.key(number, .fixed64)
        let start = out.count
        appendFixed64(value.bitPattern, to: &out)
        self.init(number: number, wireType: .fixed64, raw: out[...], payloadStart: start, scalar: value.bitPattern)
    }

    /// A length-delimited field holding `bytes` (a string, bytes, a message or packed scalars).
    public init<C: Collection>(number: Int, bytes: C) where C.Element == UInt8 {
        var out = ProtoField.key(number, .lengthDelimited)
        appendVarint(UInt64(bytes.count), to: &out)
        let start = out.count
        out.append(contentsOf: bytes)
        self.init(number: number, wireType: .lengthDelimited, raw: out[...], payloadStart: start, scalar: 0)
    }

    /// A length-delimited field holding `string` as UTF-8.
    public init(number: Int, string: String) { self.init(number: number, bytes: Array(string.utf8)) }

    /// A length-delimited field holding `message` serialized (its fields' raw bytes).
    public init(number: Int, message: ProtoMessage) {
        var out = ProtoField.key(number, .lengthDelimited)
        appendVarint(UInt64(message.serializedSize), to: &out)
        let start = out.count
        message.appendSerialized(to: &out)
        self.init(number: number, wireType: .lengthDelimited, raw: out[...], payloadStart: start, scalar: 0)
    }

    /// Packed repeated float (proto3's default encoding of `repeated float`).
    public init(number: Int, packedFloats values: [Float]) {
        var payload: [UInt8] = []
        payload.reserveCapacity(values.count * 4)
        #if _endian(little)
        values.withUnsafeBytes { payload.append(contentsOf: $0) }   // already little-endian float32
        #else
        for v in values { appendFixed32(v.bitPattern, to: &payload) }
        #endif
        self.init(number: number, bytes: payload)
    }

    /// Packed repeated double (proto3's default encoding of `repeated double`).
    public init(number: Int, packedDoubles values: [Double]) {
        var payload: [UInt8] = []
        payload.reserveCapacity(values.count * 8)
        for v in values { appendFixed64(v.bitPattern, to: &payload) }
        self.init(number: number, bytes: payload)
    }

    /// Packed repeated varints (int64/uint64).
    public init(number: Int, packedVarints values: [UInt64]) {
        var payload: [UInt8] = []
        for v in values { appendVarint(v, to: &payload) }
        self.init(number: number, bytes: payload)
    }
}

/// A protobuf message as an ordered list of raw fields. Parsing reads one level (keys and lengths,
/// every length checked against the bytes that remain, nothing allocated from a claimed size);
/// typed accessors (`ProtoReader`) decode values on demand; writing concatenates the fields' raw
/// bytes, so an unmodified message serializes to exactly the bytes it was read from.
public struct ProtoMessage: Sendable {
    /// The fields in wire order; repeated and duplicate fields appear once per occurrence.
    public var fields: [ProtoField]

    /// An empty message (serializes to no bytes).
    public init() { fields = [] }
    /// A message of `fields`, written in this order.
    public init(fields: [ProtoField]) { self.fields = fields }

    /// Parses the fields of one message. `bytes` may be a slice of a larger buffer: offsets in errors
    /// and in the fields are indices into that buffer.
    public init(parsing bytes: ArraySlice<UInt8>, path: String = "") throws {
        var fields: [ProtoField] = []
        var i = bytes.startIndex
        do {
            while i < bytes.endIndex {
                let start = i
                let key = try readVarint(bytes, &i, what: "a field key")
                let number = key >> 3
                guard number >= 1, number <= UInt64(maxFieldNumber) else {
                    throw ProtobufError(offset: start,
                        "expected a field key, found field number \(number) (valid numbers are 1...\(maxFieldNumber))")
                }
                let remaining = bytes.endIndex - i
                let payloadStart: Int
                var scalar: UInt64 = 0
                let wireType: WireType
                switch key & 7 {
                case 0:
                    wireType = .varint
                    payloadStart = i
                    scalar = try readVarint(bytes, &i, what: "the value of field \(number)")
                case 1, 5:
                    // Fixed width: 8 bytes (wire type 1) or 4 (wire type 5), little-endian.
                    let width = key & 7 == 1 ? 8 : 4
                    wireType = width == 8 ? .fixed64 : .fixed32
                    guard remaining >= width else {
                        throw ProtobufError(offset: start,
                            "field \(number) is a \(width * 8)-bit value but only \(remaining) bytes remain")
                    }
                    payloadStart = i
                    scalar = width == 8 ? readFixed64(bytes, at: i) : UInt64(readFixed32(bytes, at: i))
                    i += width
                case 2:
                    wireType = .lengthDelimited
                    let length = try readVarint(bytes, &i, what: "the length of field \(number)")
                    let left = bytes.endIndex - i
                    guard length <= UInt64(left) else {
                        throw ProtobufError(offset: start,
                            "field \(number) claims \(length) bytes but only \(left) remain in its message")
                    }
                    payloadStart = i
                    i += Int(length)
                case 3, 4:
                    throw ProtobufError(offset: start,
                        "field \(number) uses wire type \(key & 7) (groups), which Core ML models never use")
                default:
                    throw ProtobufError(offset: start,
                        "field \(number) has wire type \(key & 7); valid wire types are 0, 1, 2 and 5")
                }
                fields.append(ProtoField(number: Int(number), wireType: wireType, raw: bytes[start..<i],
                                         payloadStart: payloadStart, scalar: scalar))
            }
        } catch var e as ProtobufError {
            if e.path.isEmpty { e.path = path }
            throw e
        }
        self.fields = fields
    }

    /// Parses the fields of a whole buffer; throws `ProtobufError` as `init(parsing:path:)`.
    public init(parsing bytes: [UInt8]) throws { try self.init(parsing: bytes[...]) }

    // MARK: Writing

    /// Bytes `serialized()` produces: the sum of the fields' raw sizes.
    public var serializedSize: Int { fields.reduce(0) { $0 + $1.raw.count } }

    /// Appends every field's raw bytes, in order, to `out`.
    public func appendSerialized(to out: inout [UInt8]) {
        for f in fields { out.append(contentsOf: f.raw) }
    }

    /// The message's wire bytes: the fields' raw bytes concatenated (identical to the input for an unmodified parsed message).
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(serializedSize)
        appendSerialized(to: &out)
        return out
    }

    // MARK: Finding fields

    /// Whether any field has `number`.
    public func contains(_ number: Int) -> Bool { fields.contains { $0.number == number } }
    /// Every occurrence of field `number`, in wire order (a repeated field's elements, or duplicates).
    public func all(_ number: Int) -> [ProtoField] { fields.filter { $0.number == number } }
    /// The last occurrence wins for a non-repeated field, as in protobuf.
    public func last(_ number: Int) -> ProtoField? { fields.last { $0.number == number } }

    // MARK: Editing (only the fields touched are re-encoded)

    /// Removes every occurrence of a field.
    public mutating func remove(_ number: Int) { fields.removeAll { $0.number == number } }

    /// Replaces every occurrence of `field.number` with `field`, at the place of the first
    /// occurrence, or before the first field with a larger number if it was absent.
    public mutating func set(_ field: ProtoField) { set(field.number, to: [field]) }

    /// Replaces every occurrence of field `number` with `newFields` (a repeated field's elements).
    public mutating func set(_ number: Int, to newFields: [ProtoField]) {
        let position = fields.firstIndex { $0.number == number }
            ?? fields.firstIndex { $0.number > number }
            ?? fields.count
        let before = fields[..<position].filter { $0.number != number }
        let after = fields[position...].filter { $0.number != number }
        fields = Array(before) + newFields + Array(after)
    }

    /// Parses the `occurrence`-th occurrence of the message field `number` (default: the last),
    /// lets `body` edit it, and re-encodes that field in place. Other fields keep their bytes.
    public mutating func editMessage(_ number: Int, occurrence: Int? = nil, path: String = "",
                                     _ body: (inout ProtoMessage) throws -> Void) throws {
        let positions = fields.indices.filter { fields[$0].number == number }
        let chosen = occurrence ?? positions.count - 1
        guard positions.indices.contains(chosen) else {
            throw ProtobufError(offset: 0, path: path,
                "expected occurrence \(chosen) of field \(number), but the message holds \(positions.count)")
        }
        let position = positions[chosen]
        let field = fields[position]
        guard field.wireType == .lengthDelimited else {
            throw ProtobufError(offset: field.offset, path: path,
                "expected field \(number) to be a message (length-delimited), found \(field.wireType)")
        }
        var child = try ProtoMessage(parsing: field.payload, path: path)
        try body(&child)
        fields[position] = ProtoField(number: number, message: child)
    }
}
