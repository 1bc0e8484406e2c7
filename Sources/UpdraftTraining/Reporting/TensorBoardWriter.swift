import Foundation
import UpdraftCore
import UpdraftData

/// Appends TensorBoard events to `events.out.tfevents.<unix seconds>.<host>` in a log folder, as
/// TFRecords: each record is its length (UInt64, little-endian), the masked CRC-32C of those 8 bytes,
/// the bytes, and their masked CRC-32C. The file starts with the `file_version: "brain.Event:2"` event.
/// Each record goes to the file in one write as it is logged (a live TensorBoard sees the run, and a
/// killed run leaves every record written so far); `flush()` also syncs it to disk. When a write
/// fails (a full disk), the writer calls `onWriteFailure` once and writes nothing more: training
/// is not affected.
public final class TensorBoardWriter {
    private let file: AppendOnlyFile
    /// The event file.
    public var url: URL { file.url }
    /// Called once, with a one-line message, when a write fails.
    public var onWriteFailure: ((String) -> Void)? {
        get { file.onWriteFailure }
        set { file.onWriteFailure = newValue }
    }

    /// Makes `directory` (and its parents) when it does not exist and checks that it takes new files;
    /// throws `.io` naming the folder when it is a file or cannot be written, before any training.
    public static func checkDirectory(_ directory: URL) throws {
        let path = directory.path
        var st = stat()
        if stat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFDIR else {
                throw UpdraftError(.io, "the TensorBoard folder \(path) is \(fileKind(st.st_mode)), not a folder",
                                   hint: "give --tensorboard a folder (it is made when it does not exist)")
            }
        } else {
            do { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) } catch {
                throw UpdraftError(.io, "cannot make the TensorBoard folder \(path): \(pathProblem(directory, expectingFile: false, error: error).message)",
                                   hint: "check that its parent folder exists and is writable, or give --tensorboard another folder")
            }
        }
        if let error = folderRefusesNewFiles(directory) {
            throw UpdraftError(.io, "cannot write in the TensorBoard folder \(path): \(String(cString: strerror(error)))",
                               hint: "give --tensorboard a writable folder")
        }
    }

    /// A new event file in `directory` (checked with `checkDirectory`), named for `time` (seconds
    /// since 1970) and this host, with its `file_version` record written. Throws `.io` when the
    /// folder or the file cannot be written.
    public convenience init(directory: URL, time: Double = Date().timeIntervalSince1970) throws {
        try Self.checkDirectory(directory)
        let host = ProcessInfo.processInfo.hostName.isEmpty ? "localhost" : ProcessInfo.processInfo.hostName
        // Two runs started in the same second on one host: a numbered suffix keeps the files apart.
        for attempt in 0..<1000 {
            let name = "events.out.tfevents.\(Int(time)).\(host)" + (attempt == 0 ? "" : ".\(attempt)")
            let url = directory.appendingPathComponent(name)
            let fd = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0o644)
            if fd < 0 && errno == EEXIST { continue }
            guard fd >= 0 else {
                throw UpdraftError(.io, "cannot create the TensorBoard event file \(url.path): \(String(cString: strerror(errno)))",
                                   hint: "give --tensorboard a writable folder")
            }
            self.init(fileDescriptor: fd, url: url)
            write(record: TensorBoardEvent.fileVersion(wallTime: time))
            if file.hasFailed {
                throw UpdraftError(.io, "cannot write the TensorBoard event file \(url.path): \(String(cString: strerror(errno)))",
                                   hint: "free some space on its disk, or give --tensorboard another folder")
            }
            return
        }
        throw UpdraftError(.io, "cannot create a TensorBoard event file in \(directory.path): 1000 files named for this second exist",
                           hint: "give --tensorboard another folder")
    }

    /// A writer on an open descriptor (tests: a descriptor whose writes fail).
    init(fileDescriptor: Int32, url: URL) {
        file = AppendOnlyFile(fileDescriptor: fileDescriptor, url: url, what: "the TensorBoard event file")
    }

    /// `data` framed as one TFRecord.
    static func frame(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(data.count + 16)
        let length = UInt64(data.count)
        for i in 0..<8 { out.append(UInt8(truncatingIfNeeded: length >> (8 * UInt64(i)))) }
        let lengthCRC = CRC32C.maskedChecksum(out)
        for i in 0..<4 { out.append(UInt8(truncatingIfNeeded: lengthCRC >> (8 * UInt32(i)))) }
        out.append(contentsOf: data)
        let dataCRC = CRC32C.maskedChecksum(data)
        for i in 0..<4 { out.append(UInt8(truncatingIfNeeded: dataCRC >> (8 * UInt32(i)))) }
        return out
    }

    /// Whether a write has failed (nothing more is written).
    public var hasFailed: Bool { file.hasFailed }

    /// Appends `record` (a serialized `Event`) as one TFRecord, in one write.
    func write(record: [UInt8]) {
        Self.frame(record).withUnsafeBytes { file.append($0) }
    }

    /// Syncs what was written to disk (once per epoch).
    func flush() { file.sync() }
}
