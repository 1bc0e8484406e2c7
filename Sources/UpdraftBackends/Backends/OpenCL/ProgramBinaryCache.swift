import Foundation
import UpdraftCore

/// Built OpenCL programs kept on disk, so a new process loads what an earlier one compiled instead
/// of paying the driver's compiler again (`clGetProgramInfo(CL_PROGRAM_BINARIES)` when a program is
/// first built, `clCreateProgramWithBinary` after that).
///
/// One file per program in `programs/` under Updraft's cache folder (`UPDRAFT_CACHE_DIR`, see
/// `CacheDirectory`), named by a hash of its key: the platform, device, driver version, build
/// options and the expanded kernel source (two checksums and its length). The file holds the whole
/// key, the binary's length and its CRC-32C, so a corrupt, truncated or foreign file (another key
/// under the same name, a half-copied file) is a miss: it is removed and the program is built from
/// source. Files are written whole through a temporary file and a rename (`writeAtomically`), so
/// processes starting at once never see half a file; the last writer of a key wins, and both wrote
/// the same program. When the folder grows past `capacityBytes` the least recently used files go
/// (a hit refreshes a file's time) until it is below three quarters of the cap.
///
/// `UPDRAFT_PROGRAM_CACHE=off` turns it off; `UPDRAFT_PROGRAM_CACHE_MB` sets the cap (default 256).
public struct ProgramBinaryCache: Sendable {
    /// The folder holding the binaries: `programs/` in the cache folder.
    public var directory: URL
    /// Above this many bytes of binaries, the least recently used are removed.
    public var capacityBytes: Int

    /// The environment variable that turns the cache off (`off`, `0` or `false`).
    public static let switchVariable = "UPDRAFT_PROGRAM_CACHE"
    /// The environment variable that sets the cap in MiB.
    public static let capacityVariable = "UPDRAFT_PROGRAM_CACHE_MB"
    /// The cap without `UPDRAFT_PROGRAM_CACHE_MB`.
    public static let defaultCapacityBytes = 256 << 20
    /// Bumped when the file layout changes; files of another version are misses.
    static let magic = Array("UPDRAFT-CL-BINARY-2\n".utf8)
    static let fileExtension = "clbin"

    /// A cache in `directory` (nothing is read or created yet).
    public init(directory: URL, capacityBytes: Int = defaultCapacityBytes) {
        self.directory = directory
        self.capacityBytes = max(1, capacityBytes)
    }

    /// The cache for `environment`, or nil when `UPDRAFT_PROGRAM_CACHE` turns it off.
    public static func standard(environment: [String: String] = ProcessInfo.processInfo.environment) -> ProgramBinaryCache? {
        if let s = environment[switchVariable]?.lowercased(), ["off", "0", "false", "no"].contains(s) { return nil }
        let megabytes = environment[capacityVariable].flatMap(Int.init).flatMap { $0 > 0 ? $0 : nil }
        return ProgramBinaryCache(directory: CacheDirectory.url(environment: environment).appendingPathComponent("programs", isDirectory: true),
                                  capacityBytes: megabytes.map { $0 << 20 } ?? defaultCapacityBytes)
    }

    // MARK: Keys

    /// What a program binary depends on: where it runs, the compiler's version, how it was built, what it was built from.
    public struct Key: Hashable, Sendable {
        /// The whole key as text (stored in the file and compared on load).
        public let text: String
        /// The file name: a hash of `text`.
        public var fileName: String { String(format: "%016llx", fnv1a64(Array(text.utf8))) + "." + ProgramBinaryCache.fileExtension }

        /// The key of `source` built with `options` for `device`.
        public init(device: OpenCLDeviceInfo, source: String, options: String) {
            let bytes = Array(source.utf8)
            text = """
                platform: \(device.platformName) | \(device.platformVersion)
                device: \(device.name) | \(device.vendor)
                driver: \(device.driverVersion)
                options: \(options)
                source: \(String(format: "%016llx", fnv1a64(bytes))) \(String(format: "%08x", CRC32C.checksum(bytes))) \(bytes.count)
                """
        }
    }

    // MARK: Reading and writing

    /// What a look-up found.
    public enum Lookup: Equatable, Sendable {
        /// The binary stored for the key.
        case hit([UInt8])
        /// Nothing stored for the key (or a file left by another key under the same name).
        case miss
        /// A file for the key that cannot be used (truncated, corrupt, of another layout): removed; the reason.
        case corrupt(String)
    }

    /// The binary stored for `key`. A corrupt file is removed (and reported, so the caller can warn once).
    public func load(_ key: Key) -> Lookup {
        let url = directory.appendingPathComponent(key.fileName)
        guard let data = FileManager.default.contents(atPath: url.path) else { return .miss }
        switch Self.decode([UInt8](data), key: key) {
        case let .success(binary?):
            // A hit keeps the file: its time is what eviction orders by.
            _ = try? FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: url.path)
            return .hit(binary)
        case .success(nil):
            return .miss
        case let .failure(problem):
            try? FileManager.default.removeItem(at: url)
            return .corrupt(problem.reason)
        }
    }

    /// Stores `binary` for `key` (atomically), then trims the folder to the cap.
    public func store(_ binary: [UInt8], for key: Key) throws {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw UpdraftError(.io, "cannot create the program cache folder \(directory.path): \(error.localizedDescription)",
                               hint: "set \(CacheDirectory.variable) to a writable folder, or \(Self.switchVariable)=off")
        }
        try writeAtomically(Data(Self.encode(binary, key: key)), to: directory.appendingPathComponent(key.fileName))
        trim()
    }

    /// Removes the file stored for `key`, if any.
    public func remove(_ key: Key) {
        try? FileManager.default.removeItem(at: directory.appendingPathComponent(key.fileName))
    }

    /// The stored binaries: how many, and their bytes on disk.
    public var usage: (entries: Int, bytes: Int) {
        let files = entries()
        return (files.count, files.reduce(0) { $0 + $1.bytes })
    }

    /// Removes every stored binary (and left-over temporary files); returns how many binaries went.
    @discardableResult
    public func clear() -> Int {
        let files = entries()
        for f in files { try? FileManager.default.removeItem(at: f.url) }
        for t in temporaryFiles(olderThan: 0) { try? FileManager.default.removeItem(at: t) }
        return files.count
    }

    /// Removes the least recently used binaries until the folder holds at most three quarters of
    /// the cap (nothing when it is under the cap), and temporary files a killed writer left an hour ago or more.
    public func trim() {
        for t in temporaryFiles(olderThan: 3600) { try? FileManager.default.removeItem(at: t) }
        var files = entries()
        var total = files.reduce(0) { $0 + $1.bytes }
        guard total > capacityBytes else { return }
        files.sort { $0.used < $1.used }
        for f in files where total > capacityBytes * 3 / 4 {
            try? FileManager.default.removeItem(at: f.url)
            total -= f.bytes
        }
    }

    /// How many binaries are stored for a device (same device name and driver version).
    public func entries(forDevice name: String, driverVersion: String) -> Int {
        binaryFiles().compactMap(Self.storedKey).filter { key in
            key.contains("\ndevice: \(name) |") && key.contains("\ndriver: \(driverVersion)\n")
        }.count
    }

    /// The folder's binary files (not the temporaries a writer is filling).
    private func binaryFiles(properties: [URLResourceKey]? = nil) -> [URL] {
        guard let urls = try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: properties) else { return [] }
        return urls.filter { $0.pathExtension == Self.fileExtension && !$0.lastPathComponent.hasPrefix(".") }
    }

    private func entries() -> [(url: URL, bytes: Int, used: Date)] {
        let keys: [URLResourceKey] = [.fileSizeKey, .contentModificationDateKey]
        return binaryFiles(properties: keys).compactMap { url in
            guard let v = try? url.resourceValues(forKeys: Set(keys)) else { return nil }
            return (url, v.fileSize ?? 0, v.contentModificationDate ?? .distantPast)
        }
    }

    private func temporaryFiles(olderThan seconds: TimeInterval) -> [URL] {
        guard let urls = try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: [.contentModificationDateKey])
        else { return [] }
        let limit = Date().addingTimeInterval(-seconds)
        return urls.filter { $0.lastPathComponent.hasPrefix(".") && $0.pathExtension == "tmp" }.filter {
            ((try? $0.resourceValues(forKeys: [.contentModificationDateKey]))?.contentModificationDate ?? .distantPast) <= limit
        }
    }

    // MARK: The file layout

    /// The key text a file holds, read from its header (nil for a file that is not a cache entry).
    static func storedKey(_ url: URL) -> String? {
        guard let handle = try? FileHandle(forReadingFrom: url) else { return nil }
        defer { try? handle.close() }
        guard let head = try? handle.read(upToCount: 1 << 14) else { return nil }
        let bytes = [UInt8](head)
        guard bytes.count >= magic.count + 4, Array(bytes[0..<magic.count]) == magic else { return nil }
        let length = bytes[magic.count..<magic.count + 4].reversed().reduce(0) { $0 << 8 | Int($1) }
        guard bytes.count >= magic.count + 4 + length else { return nil }
        return String(decoding: bytes[magic.count + 4..<magic.count + 4 + length], as: UTF8.self)
    }

    /// magic, key length (UInt32 LE), key, binary length (UInt64 LE), binary CRC-32C (UInt32 LE), binary.
    static func encode(_ binary: [UInt8], key: Key) -> [UInt8] {
        let keyBytes = Array(key.text.utf8)
        var out = magic
        out.reserveCapacity(magic.count + 16 + keyBytes.count + binary.count)
        appendLE(&out, UInt64(keyBytes.count), bytes: 4)
        out += keyBytes
        appendLE(&out, UInt64(binary.count), bytes: 8)
        appendLE(&out, UInt64(CRC32C.checksum(binary)), bytes: 4)
        out += binary
        return out
    }

    struct Problem: Error { var reason: String }

    /// The binary for `key` (nil: the file holds another key), or why the file cannot be used.
    static func decode(_ file: [UInt8], key: Key) -> Result<[UInt8]?, Problem> {
        var at = 0
        func take(_ n: Int) -> ArraySlice<UInt8>? {
            guard n >= 0, file.count - at >= n else { return nil }
            defer { at += n }
            return file[at..<at + n]
        }
        guard let m = take(magic.count), Array(m) == magic else { return .failure(Problem(reason: "not a program cache file of this version")) }
        guard let kl = take(4).map(readLE), let k = take(Int(kl)) else { return .failure(Problem(reason: "truncated key")) }
        guard Array(k) == Array(key.text.utf8) else { return .success(nil) }
        guard let length = take(8).map(readLE), let crc = take(4).map(readLE) else { return .failure(Problem(reason: "truncated header")) }
        guard length <= UInt64(file.count - at) else {
            return .failure(Problem(reason: "truncated: \(file.count - at) of \(length) bytes"))
        }
        let binary = Array(file[at..<at + Int(length)])
        guard at + Int(length) == file.count else { return .failure(Problem(reason: "\(file.count - at - Int(length)) bytes past the binary")) }
        guard UInt64(CRC32C.checksum(binary)) == crc else { return .failure(Problem(reason: "checksum mismatch")) }
        return .success(binary)
    }

    private static func appendLE(_ out: inout [UInt8], _ value: UInt64, bytes: Int) {
        for i in 0..<bytes { out.append(UInt8((value >> (8 * UInt64(i))) & 0xFF)) }
    }

    private static func readLE(_ s: ArraySlice<UInt8>) -> UInt64 {
        s.reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }
}

/// FNV-1a, 64 bits: a file name for a key (the key itself is compared on load).
func fnv1a64(_ bytes: [UInt8]) -> UInt64 {
    var h: UInt64 = 0xCBF2_9CE4_8422_2325
    for b in bytes { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01B3 }
    return h
}
