import Foundation
import UpdraftCore

/// An array read from a NumPy `.npy` file (format versions 1.0, 2.0 and 3.0; little-endian or
/// single-byte data in C order). Values are widened or narrowed to `Float` (floating point) or `Int`
/// (integers and booleans); anything else is an error saying how to re-save the array.
public struct NpyArray: Equatable, Sendable {
    /// The elements in C order: floating-point dtypes as Float, integer and boolean dtypes as Int.
    public enum Values: Equatable, Sendable {
        /// Elements of a float32 or float64 array, as Float.
        case float([Float])
        /// Elements of an integer or boolean array, as Int (booleans as 0 and 1).
        case integer([Int])

        /// Number of elements.
        public var count: Int {
            switch self {
            case .float(let v): return v.count
            case .integer(let v): return v.count
            }
        }
    }

    /// The array's dimensions, outermost first (empty for a 0-d array).
    public var shape: [Int]
    /// The dtype as written in the header, e.g. `<f4`.
    public var descr: String
    /// The elements in C order (row-major), converted to Float or Int.
    public var values: Values

    /// An array of `values` in `shape`, `descr` the dtype numpy would write for them (`<f4`, `<i8`).
    public init(shape: [Int], descr: String, values: Values) { self.shape = shape; self.descr = descr; self.values = values }

    /// Parses the bytes of a `.npy` file; `name` is used in error messages.
    public init(data: Data, name: String) throws {
        let (header, type) = try NpyHeader.checked(data: data, name: name)
        let count = try header.elementCount(name: name)
        self.shape = header.shape
        self.descr = header.descr
        self.values = data.withUnsafeBytes { raw in
            type.read(UnsafeRawBufferPointer(rebasing: raw[header.dataOffset...]), count: count)
        }
    }

    /// Reads and parses a `.npy` file.
    public init(contentsOf url: URL) throws {
        let data = try readFile(url, what: "")
        try self.init(data: data, name: url.path)
    }
}

/// The dictionary at the start of a `.npy` file: `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
struct NpyHeader {
    var descr: String
    var shape: [Int]
    var dataOffset: Int

    init(data: Data, name: String) throws {
        let bytes = [UInt8](data.prefix(12))
        let magic: [UInt8] = [0x93, 0x4E, 0x55, 0x4D, 0x50, 0x59]  // "\x93NUMPY"
        guard bytes.count >= 10, Array(bytes[0..<6]) == magic else {
            throw UpdraftError(.data, "\(name) is not a .npy file (no \\x93NUMPY signature)",
                               hint: "write arrays with numpy.save(path, array)")
        }
        let major = Int(bytes[6]), minor = Int(bytes[7])
        let headerLength: Int, start: Int
        switch major {
        case 1:
            headerLength = Int(bytes[8]) | Int(bytes[9]) << 8
            start = 10
        case 2, 3:
            guard bytes.count >= 12 else { throw Self.truncated(name) }
            headerLength = Int(bytes[8]) | Int(bytes[9]) << 8 | Int(bytes[10]) << 16 | Int(bytes[11]) << 24
            start = 12
        default:
            throw UpdraftError(.unsupported, "\(name): .npy format version \(major).\(minor) is not supported (1.0, 2.0 and 3.0 are)",
                               hint: "save with numpy.save, which writes version 1.0 for ordinary arrays")
        }
        guard data.count - start >= headerLength else { throw Self.truncated(name) }
        let headerBytes = data.subdata(in: data.startIndex + start..<data.startIndex + start + headerLength)
        // Versions 1 and 2 are latin-1, version 3 UTF-8; the keys and values we accept are ASCII.
        let text = String(decoding: headerBytes, as: UTF8.self)
        var parser = PythonLiteralParser(text: text)
        guard case .dict(let dict)? = try? parser.parseValue() else {
            throw UpdraftError(.data, "\(name): the .npy header is not a Python dictionary: \(text.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        guard case .string(let descr)? = dict["descr"] else {
            throw UpdraftError(.unsupported, "\(name): the .npy dtype is not a simple type (structured or record arrays are not supported)",
                               hint: "save a plain numeric array, e.g. numpy.save(path, array.astype('float32'))")
        }
        guard case .bool(let fortran)? = dict["fortran_order"], case .tuple(let dims)? = dict["shape"] else {
            throw UpdraftError(.data, "\(name): the .npy header lacks 'fortran_order' or 'shape'")
        }
        guard !fortran else {
            throw UpdraftError(.unsupported, "\(name): the array is stored in Fortran (column-major) order",
                               hint: "save numpy.ascontiguousarray(array) instead")
        }
        var shape: [Int] = []
        for dim in dims {
            guard case .int(let n) = dim, n >= 0 else {
                throw UpdraftError(.data, "\(name): the .npy shape (\(dims.map(\.python).joined(separator: ", "))) is not a tuple of non-negative integers",
                                   hint: "the file's header is damaged; save the array again with numpy.save")
            }
            shape.append(n)
        }
        self.descr = descr
        self.shape = shape
        self.dataOffset = start + headerLength
    }

    /// The header of a whole `.npy` file and its element type, checked against the bytes that follow:
    /// exactly shape x element size of them (a truncated or padded file is an error naming it).
    static func checked(data: Data, name: String) throws -> (NpyHeader, NpyElementType) {
        let header = try NpyHeader(data: data, name: name)
        let type = try NpyElementType(descr: header.descr, name: name)
        let count = try header.elementCount(name: name)
        let (expected, overflow) = count.multipliedReportingOverflow(by: type.size)
        guard !overflow, data.count - header.dataOffset == expected else {
            throw UpdraftError(.data, "\(name): shape \(header.shape) of \(header.descr) needs \(overflow ? "too many" : String(expected)) bytes of data, the file has \(data.count - header.dataOffset)",
                               hint: "the file may be truncated; save it again with numpy.save")
        }
        return (header, type)
    }

    func elementCount(name: String) throws -> Int {
        var count = 1
        for dim in shape {
            let (product, overflow) = count.multipliedReportingOverflow(by: dim)
            guard !overflow else { throw UpdraftError(.data, "\(name): shape \(shape) is too large") }
            count = product
        }
        return count
    }

    private static func truncated(_ name: String) -> UpdraftError {
        UpdraftError(.data, "\(name): the .npy header is truncated", hint: "save the array again with numpy.save")
    }
}

/// The element types accepted, from a dtype string such as `<f4`, `|u1`, `<i8`.
enum NpyElementType {
    case float32, float64, signed(Int), unsigned(Int), bool

    init(descr: String, name: String) throws {
        let chars = Array(descr)
        guard chars.count >= 3, let size = Int(String(chars[2...])) else {
            throw UpdraftError(.unsupported, "\(name): dtype '\(descr)' is not supported", hint: Self.hint)
        }
        let order = chars[0], kind = chars[1]
        if order == ">" && size > 1 {
            throw UpdraftError(.unsupported, "\(name): dtype '\(descr)' is big-endian",
                               hint: "save array.astype('<\(kind)\(size)') instead")
        }
        guard order == "<" || order == "|" || order == "=" || (order == ">" && size == 1) else {
            throw UpdraftError(.unsupported, "\(name): dtype '\(descr)' has an unknown byte order", hint: Self.hint)
        }
        switch (kind, size) {
        case ("f", 4): self = .float32
        case ("f", 8): self = .float64
        case ("i", 1), ("i", 2), ("i", 4), ("i", 8): self = .signed(size)
        case ("u", 1), ("u", 2), ("u", 4), ("u", 8): self = .unsigned(size)
        case ("b", 1): self = .bool
        default:
            throw UpdraftError(.unsupported, "\(name): dtype '\(descr)' is not supported", hint: Self.hint)
        }
    }

    static let hint = "use float32/float64 inputs and integer or float targets, e.g. array.astype('float32')"

    var size: Int {
        switch self {
        case .float32: return 4
        case .float64: return 8
        case .signed(let n), .unsigned(let n): return n
        case .bool: return 1
        }
    }

    /// Reads `count` little-endian elements (unaligned loads: the data offset need not be aligned).
    func read(_ raw: UnsafeRawBufferPointer, count: Int) -> NpyArray.Values {
        switch self {
        case .float32:
            return .float((0..<count).map { Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 4, as: UInt32.self))) })
        case .float64:
            return .float((0..<count).map { Float(Double(bitPattern: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 8, as: UInt64.self)))) })
        case .bool, .unsigned(1):
            return .integer((0..<count).map { Int(raw[$0]) })
        case .signed(1):
            return .integer((0..<count).map { Int(Int8(bitPattern: raw[$0])) })
        case .signed(2):
            return .integer((0..<count).map { Int(Int16(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 2, as: Int16.self))) })
        case .unsigned(2):
            return .integer((0..<count).map { Int(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 2, as: UInt16.self))) })
        case .signed(4):
            return .integer((0..<count).map { Int(Int32(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 4, as: Int32.self))) })
        case .unsigned(4):
            return .integer((0..<count).map { Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 4, as: UInt32.self))) })
        case .signed(_):
            return .integer((0..<count).map { Int(Int64(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 8, as: Int64.self))) })
        case .unsigned(_):
            // Values above Int.max cannot be class indices or sensible inputs; they clamp.
            return .integer((0..<count).map { Int(clamping: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 8, as: UInt64.self))) })
        }
    }
}

/// The subset of Python literal syntax `.npy` headers use: dicts, tuples, lists, strings, integers,
/// True/False/None.
struct PythonLiteralParser {
    indirect enum Value: Equatable {
        /// A Python dict, tuple, list, string, integer, True/False or None.
        case dict([String: Value]), tuple([Value]), list([Value]), string(String), int(Int), bool(Bool), none
    }

    struct SyntaxError: Error {}

    private let chars: [Character]
    private var position = 0

    init(text: String) { chars = Array(text) }

    mutating func parseValue() throws -> Value {
        skipSpace()
        guard position < chars.count else { throw SyntaxError() }
        switch chars[position] {
        case "{":
            position += 1
            var dict: [String: Value] = [:]
            while true {
                skipSpace()
                if consume("}") { return .dict(dict) }
                guard case .string(let key) = try parseValue() else { throw SyntaxError() }
                skipSpace()
                guard consume(":") else { throw SyntaxError() }
                dict[key] = try parseValue()
                skipSpace()
                if consume("}") { return .dict(dict) }
                guard consume(",") else { throw SyntaxError() }
            }
        case "(", "[":
            let close: Character = chars[position] == "(" ? ")" : "]"
            let isTuple = close == ")"
            position += 1
            var items: [Value] = []
            while true {
                skipSpace()
                if consume(close) { return isTuple ? .tuple(items) : .list(items) }
                items.append(try parseValue())
                skipSpace()
                if consume(close) { return isTuple ? .tuple(items) : .list(items) }
                guard consume(",") else { throw SyntaxError() }
            }
        case "'", "\"":
            let quote = chars[position]
            position += 1
            var text = ""
            while position < chars.count && chars[position] != quote {
                text.append(chars[position])
                position += 1
            }
            guard consume(quote) else { throw SyntaxError() }
            return .string(text)
        default:
            var word = ""
            while position < chars.count, chars[position].isLetter || chars[position].isNumber || chars[position] == "-" {
                word.append(chars[position])
                position += 1
            }
            switch word {
            case "True": return .bool(true)
            case "False": return .bool(false)
            case "None": return .none
            default:
                // Python 2 wrote long integers with an L suffix.
                let digits = word.hasSuffix("L") ? String(word.dropLast()) : word
                guard let n = Int(digits) else { throw SyntaxError() }
                return .int(n)
            }
        }
    }

    private mutating func skipSpace() {
        while position < chars.count && chars[position].isWhitespace { position += 1 }
    }

    private mutating func consume(_ c: Character) -> Bool {
        guard position < chars.count, chars[position] == c else { return false }
        position += 1
        return true
    }
}

extension PythonLiteralParser.Value {
    /// The value as Python writes it, for messages: `-8`, `'<f4'`, `(2, 3)`.
    var python: String {
        switch self {
        case let .int(n): return String(n)
        case let .string(s): return "'\(s)'"
        case let .bool(b): return b ? "True" : "False"
        case .none: return "None"
        case let .tuple(items): return "(" + items.map(\.python).joined(separator: ", ") + (items.count == 1 ? ",)" : ")")
        case let .list(items): return "[" + items.map(\.python).joined(separator: ", ") + "]"
        case let .dict(d): return "{" + d.keys.sorted().map { "'\($0)': \(d[$0]!.python)" }.joined(separator: ", ") + "}"
        }
    }
}

extension NpyArray {
    /// The array as a version 1.0 `.npy` file, C order: float values as `<f4`, integers as `<i8`
    /// (what `numpy.load` reads back as the same shape and values).
    public func serialized() -> Data {
        let dtype: String
        var body = Data()
        switch values {
        case let .float(v):
            dtype = "<f4"
            body = v.withUnsafeBufferPointer { Data(buffer: $0) }  // every platform Swift runs on is little-endian
        case let .integer(v):
            dtype = "<i8"
            body = v.map { Int64($0) }.withUnsafeBufferPointer { Data(buffer: $0) }
        }
        let dims = shape.count == 1 ? "(\(shape[0]),)" : "(" + shape.map(String.init).joined(separator: ", ") + ")"
        var header = "{'descr': '\(dtype)', 'fortran_order': False, 'shape': \(dims), }"
        // The magic, version, length and header pad to a multiple of 64 bytes, ending in a newline.
        let used = 10 + header.utf8.count + 1
        header += String(repeating: " ", count: (64 - used % 64) % 64) + "\n"
        var out = Data([0x93] + Array("NUMPY".utf8) + [1, 0, UInt8(header.utf8.count & 0xFF), UInt8(header.utf8.count >> 8)])
        out += Data(header.utf8)
        return out + body
    }
}
