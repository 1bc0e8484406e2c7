/// Typed, checked access to a parsed message. Every accessor checks the wire type against the
/// field's declared type and decodes only when called; errors carry the message path, the field's
/// name and number, its byte offset, and what was expected.
public struct ProtoReader: Sendable {
    /// The parsed message this reader decodes fields from.
    public let message: ProtoMessage
    /// Where this message sits, e.g. `Model.description.input[0]`.
    public let path: String

    /// A reader for an already parsed `message` at `path` (used in errors).
    public init(_ message: ProtoMessage, path: String) { self.message = message; self.path = path }

    /// Parses `bytes` as the top-level message `typeName`.
    public init(parsing bytes: ArraySlice<UInt8>, typeName: String) throws {
        self.init(try ProtoMessage(parsing: bytes, path: typeName), path: typeName)
    }

    /// A `ProtobufError` at byte `offset` carrying this reader's path, for callers' own checks.
    public func error(at offset: Int, _ message: String) -> ProtobufError {
        ProtobufError(offset: offset, path: path, message)
    }

    /// Whether field `number` occurs at all.
    public func has(_ number: Int) -> Bool { message.contains(number) }

    /// The field, among `numbers`, that occurs last: the case a oneof holds.
    public func lastOf(_ numbers: Set<Int>) -> ProtoField? { message.fields.last { numbers.contains($0.number) } }

    private func checked(_ f: ProtoField, _ expected: WireType, _ name: String) throws -> ProtoField {
        guard f.wireType == expected else {
            throw error(at: f.offset,
                "field '\(name)' (\(f.number)) should be \(expected), found \(f.wireType)")
        }
        return f
    }

    private func lastChecked(_ number: Int, _ expected: WireType, _ name: String) throws -> ProtoField? {
        guard let f = message.last(number) else { return nil }
        return try checked(f, expected, name)
    }

    // MARK: Scalars (nil when absent; proto3 then means the type's default)

    /// The last occurrence of varint field `number`; nil when absent. Throws `ProtobufError` for another wire type (`name` is for the message).
    public func uint64(_ number: Int, _ name: String) throws -> UInt64? {
        try lastChecked(number, .varint, name)?.scalar
    }
    /// A varint field read as int64 (two's complement of the 64-bit value); nil when absent.
    public func int64(_ number: Int, _ name: String) throws -> Int64? {
        try uint64(number, name).map { Int64(bitPattern: $0) }
    }
    /// int32 and enums: protobuf keeps the low 32 bits of the varint.
    public func int32(_ number: Int, _ name: String) throws -> Int32? {
        try uint64(number, name).map { Int32(truncatingIfNeeded: $0) }
    }
    /// A varint field read as bool (any non-zero value is true); nil when absent.
    public func bool(_ number: Int, _ name: String) throws -> Bool? {
        try uint64(number, name).map { $0 != 0 }
    }
    /// A uint64 count or size as an Int, clamped to Int.max (later checks reject absurd sizes).
    public func size(_ number: Int, _ name: String) throws -> Int? {
        try uint64(number, name).map { Int(clamping: $0) }
    }
    /// A fixed32 field read as a Float; nil when absent. Throws `ProtobufError` for another wire type.
    public func float(_ number: Int, _ name: String) throws -> Float? {
        try lastChecked(number, .fixed32, name).map { Float(bitPattern: UInt32(truncatingIfNeeded: $0.scalar)) }
    }
    /// A fixed64 field read as a Double; nil when absent. Throws `ProtobufError` for another wire type.
    public func double(_ number: Int, _ name: String) throws -> Double? {
        try lastChecked(number, .fixed64, name).map { Double(bitPattern: $0.scalar) }
    }
    /// The payload of length-delimited field `number` (indices are absolute offsets); nil when absent.
    public func bytes(_ number: Int, _ name: String) throws -> ArraySlice<UInt8>? {
        try lastChecked(number, .lengthDelimited, name)?.payload
    }
    /// A length-delimited field decoded as UTF-8; nil when absent. Throws `ProtobufError` for invalid UTF-8 or another wire type.
    public func string(_ number: Int, _ name: String) throws -> String? {
        guard let f = try lastChecked(number, .lengthDelimited, name) else { return nil }
        return try decodeString(f, name)
    }

    private func decodeString(_ f: ProtoField, _ name: String) throws -> String {
        guard let s = String(validating: f.payload, as: UTF8.self) else {
            throw error(at: f.offset, "field '\(name)' (\(f.number)) should be a UTF-8 string, found invalid UTF-8")
        }
        return s
    }

    // MARK: Repeated

    /// Every occurrence of repeated string field `number`, in wire order; empty when absent. Throws `ProtobufError` as `string(_:_:)`.
    public func strings(_ number: Int, _ name: String) throws -> [String] {
        try message.all(number).map { try decodeString(try checked($0, .lengthDelimited, name), name) }
    }

    /// Repeated varints (int64/uint64/enum), packed or not, in wire order.
    public func varints(_ number: Int, _ name: String) throws -> [UInt64] {
        var out: [UInt64] = []
        for f in message.all(number) {
            switch f.wireType {
            case .varint: out.append(f.scalar)
            case .lengthDelimited:
                let payload = f.payload
                var i = payload.startIndex
                while i < payload.endIndex {
                    do { out.append(try readVarint(payload, &i, what: "element \(out.count) of '\(name)'")) } catch var e as ProtobufError {
                        e.path = path; throw e
                    }
                }
            default:
                throw error(at: f.offset, "field '\(name)' (\(f.number)) should be repeated varints, found \(f.wireType)")
            }
        }
        return out
    }

    /// A repeated uint64 field (sizes) as Ints, clamped.
    public func sizes(_ number: Int, _ name: String) throws -> [Int] {
        try varints(number, name).map { Int(clamping: $0) }
    }

    /// Repeated floats, packed (a multiple of 4 bytes) or not.
    public func floats(_ number: Int, _ name: String) throws -> [Float] {
        try fixedWidth(number, name, what: "float", wireType: .fixed32) { Float(bitPattern: UInt32(truncatingIfNeeded: $0)) }
    }

    /// Repeated doubles, packed (a multiple of 8 bytes) or not.
    public func doubles(_ number: Int, _ name: String) throws -> [Double] {
        try fixedWidth(number, name, what: "double", wireType: .fixed64) { Double(bitPattern: $0) }
    }

    /// Repeated fixed-width values of `T` (4 or 8 bytes, as `wireType` says), packed or not; `scalar`
    /// makes one from its bits (an unpacked field's, or one read from a packed payload on big-endian hosts).
    private func fixedWidth<T: BinaryFloatingPoint>(_ number: Int, _ name: String, what: String, wireType: WireType,
                                                    scalar: (UInt64) -> T) throws -> [T] {
        let occurrences = message.all(number)
        if occurrences.isEmpty { return [] }
        let width = MemoryLayout<T>.size
        var out: [T] = []
        for f in occurrences {
            switch f.wireType {
            case wireType: out.append(scalar(f.scalar))
            case .lengthDelimited:
                let payload = f.payload
                guard payload.count % width == 0 else {
                    throw error(at: f.offset,
                        "field '\(name)' (\(f.number)) should hold packed \(width)-byte \(what)s, but its \(payload.count) bytes are not a multiple of \(width)")
                }
                if payload.isEmpty { continue }
                let start = out.count
                out.append(contentsOf: repeatElement(0, count: payload.count / width))
                #if _endian(little)
                out.withUnsafeMutableBytes { dst in
                    payload.withUnsafeBytes { src in
                        dst.baseAddress!.advanced(by: start * width).copyMemory(from: src.baseAddress!, byteCount: src.count)
                    }
                }
                #else
                var i = payload.startIndex
                for k in start..<out.count {
                    out[k] = scalar(width == 4 ? UInt64(readFixed32(payload, at: i)) : readFixed64(payload, at: i))
                    i += width
                }
                #endif
            default:
                throw error(at: f.offset, "field '\(name)' (\(f.number)) should be repeated \(what)s, found \(f.wireType)")
            }
        }
        return out
    }

    // MARK: Messages

    /// The embedded message in field `number` (the last occurrence), or nil when absent.
    public func message(_ number: Int, _ name: String) throws -> ProtoReader? {
        guard let f = try lastChecked(number, .lengthDelimited, name) else { return nil }
        return try child(f, path: path + "." + name)
    }

    /// An embedded message, or an empty one when absent (proto3 reads an absent message as defaults).
    public func messageOrEmpty(_ number: Int, _ name: String) throws -> ProtoReader {
        try message(number, name) ?? ProtoReader(ProtoMessage(), path: path + "." + name)
    }

    /// Every occurrence of a repeated message field, in order.
    public func messages(_ number: Int, _ name: String) throws -> [ProtoReader] {
        let all = message.all(number)
        var out: [ProtoReader] = []
        out.reserveCapacity(all.count)
        for (i, f) in all.enumerated() {
            out.append(try child(try checked(f, .lengthDelimited, name), path: "\(path).\(name)[\(i)]"))
        }
        return out
    }

    /// Parses field `f`, a message called `name` (such as a oneof's case), checking its wire type.
    public func child(_ f: ProtoField, named name: String) throws -> ProtoReader {
        _ = try checked(f, .lengthDelimited, name)
        return try child(f, path: path + "." + name)
    }

    /// Parses a length-delimited field as a message.
    public func child(_ f: ProtoField, path: String) throws -> ProtoReader {
        ProtoReader(try ProtoMessage(parsing: f.payload, path: path), path: path)
    }
}
