/// Protobuf wire-format primitives, written for Updraft (no generated code, no dependencies).
///
/// A message on the wire is a sequence of fields; each starts with a varint key
/// `(fieldNumber << 3) | wireType` followed by the payload:
/// - varint (0): int32/int64/uint32/uint64/bool/enum, 1...10 bytes, 7 bits each, little end first;
/// - 64-bit (1): double, fixed64, little-endian;
/// - length-delimited (2): a varint byte count, then that many bytes (strings, bytes, messages,
///   packed repeated scalars);
/// - 32-bit (5): float, fixed32, little-endian.
/// Wire types 3 and 4 (groups) are proto2-only and never appear in Core ML models.
public enum WireType: Int, Sendable, CustomStringConvertible {
    /// Wire type 0: a base-128 varint (int32, int64, uint, bool, enum).
    case varint = 0
    /// Wire type 1: 8 little-endian bytes (double, fixed64).
    case fixed64 = 1
    /// Wire type 2: a varint length then that many bytes (strings, bytes, messages, packed repeated scalars).
    case lengthDelimited = 2
    /// Wire type 3: start of a proto2 group; never used by Core ML models.
    case startGroup = 3
    /// Wire type 4: end of a proto2 group; never used by Core ML models.
    case endGroup = 4
    /// Wire type 5: 4 little-endian bytes (float, fixed32).
    case fixed32 = 5

    /// The wire type's name and number, for error messages, e.g. "varint (wire type 0)".
    public var description: String {
        switch self {
        case .varint: return "varint (wire type 0)"
        case .fixed64: return "64-bit (wire type 1)"
        case .lengthDelimited: return "length-delimited (wire type 2)"
        case .startGroup: return "start-group (wire type 3)"
        case .endGroup: return "end-group (wire type 4)"
        case .fixed32: return "32-bit (wire type 5)"
        }
    }
}

/// A malformed protobuf: where (absolute byte offset in the data that was parsed), in which message
/// (a path such as `Model.neuralNetwork.layers[2] "conv1".convolution`), and what was expected.
public struct ProtobufError: Error, CustomStringConvertible, Equatable, Sendable {
    /// Absolute byte offset of the problem (usually the offending field's key) in the parsed data.
    public var offset: Int
    /// The message the problem is in, e.g. `Model.neuralNetwork.layers[2]`; empty at the top level.
    public var path: String
    /// What was found and what was expected.
    public var message: String

    /// An error at `offset`; `path` may be filled in later by the enclosing parse.
    public init(offset: Int, path: String = "", _ message: String) {
        self.offset = offset; self.path = path; self.message = message
    }

    /// "malformed model data at byte N in PATH: message", plus a re-export hint on a second line.
    public var description: String {
        let location = path.isEmpty ? "" : " in \(path)"
        return "malformed model data at byte \(offset)\(location): \(message)\n"
            + "  hint: the file is truncated or is not a Core ML .mlmodel; re-export it (coremltools.utils.save_spec)"
    }
}

/// The largest field number protobuf allows (2^29 - 1).
let maxFieldNumber = 536_870_911

/// Reads a varint starting at `index`, advancing it. Throws on a varint running past `bytes`,
/// one longer than 10 bytes, or one whose value does not fit in 64 bits.
@inline(__always)
func readVarint(_ bytes: ArraySlice<UInt8>, _ index: inout Int, what: @autoclosure () -> String) throws -> UInt64 {
    let start = index
    var result: UInt64 = 0
    var shift: UInt64 = 0
    while true {
        guard index < bytes.endIndex else {
            throw ProtobufError(offset: start,
                "expected \(what()) as a varint, but the data ends after \(index - start) of its bytes")
        }
        let byte = bytes[index]
        index += 1
        // The 10th byte may only hold bit 63: anything more overflows 64 bits or makes the varint
        // longer than the 10 bytes protobuf allows.
        if shift == 63, byte > 1 {
            throw ProtobufError(offset: start,
                "\(what()) is a varint longer than 10 bytes or above 2^64 - 1; protobuf varints hold 64 bits")
        }
        result |= UInt64(byte & 0x7F) << shift
        if byte < 0x80 { return result }
        shift += 7
    }
}

/// Appends `value` as a varint (1...10 bytes).
@inline(__always)
func appendVarint(_ value: UInt64, to out: inout [UInt8]) {
    var v = value
    while v >= 0x80 {
        out.append(UInt8(truncatingIfNeeded: v) | 0x80)
        v >>= 7
    }
    out.append(UInt8(v))
}

/// Number of bytes `value` takes as a varint.
package func varintSize(_ value: UInt64) -> Int {
    var n = 1
    var v = value >> 7
    while v != 0 { n += 1; v >>= 7 }
    return n
}

/// Little-endian fixed-width reads; the caller has checked that the bytes are there.
@inline(__always)
func readFixed32(_ bytes: ArraySlice<UInt8>, at i: Int) -> UInt32 {
    UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24
}

@inline(__always)
func readFixed64(_ bytes: ArraySlice<UInt8>, at i: Int) -> UInt64 {
    UInt64(readFixed32(bytes, at: i)) | UInt64(readFixed32(bytes, at: i + 4)) << 32
}

@inline(__always)
func appendFixed32(_ value: UInt32, to out: inout [UInt8]) {
    out.append(UInt8(truncatingIfNeeded: value))
    out.append(UInt8(truncatingIfNeeded: value >> 8))
    out.append(UInt8(truncatingIfNeeded: value >> 16))
    out.append(UInt8(truncatingIfNeeded: value >> 24))
}

@inline(__always)
func appendFixed64(_ value: UInt64, to out: inout [UInt8]) {
    appendFixed32(UInt32(truncatingIfNeeded: value), to: &out)
    appendFixed32(UInt32(truncatingIfNeeded: value >> 32), to: &out)
}

/// IEEE 754 half precision to single precision (Core ML's float16Value is little-endian binary16).
/// Exact for every half value, subnormals, infinities and NaNs included.
package func floatFromHalf(_ h: UInt16) -> Float {
    let sign = UInt32(h & 0x8000) << 16
    let exponent = Int(h >> 10) & 0x1F
    let mantissa = UInt32(h & 0x3FF)
    if exponent == 0x1F {           // infinity or NaN
        return Float(bitPattern: sign | 0x7F80_0000 | (mantissa << 13))
    }
    if exponent == 0 {              // zero or subnormal: mantissa * 2^-24
        let magnitude = Float(mantissa) * (1.0 / 16_777_216.0)
        return sign != 0 ? -magnitude : magnitude
    }
    return Float(bitPattern: sign | UInt32(exponent - 15 + 127) << 23 | (mantissa << 13))
}
