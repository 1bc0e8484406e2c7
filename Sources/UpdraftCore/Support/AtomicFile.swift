import Foundation

/// Writes `data` to `url` through a temporary file in the same folder and a rename, so a crash
/// mid-write never leaves a half-written file where the old one was: the file is flushed to disk
/// (fsync) before the rename and the folder after it, so the new name survives a power cut too. On
/// any failure (a full disk, a missing or read-only folder) the temporary file is removed and the
/// old file, if any, stays as it was.
public func writeAtomically(_ data: Data, to url: URL) throws {
    let dir = url.deletingLastPathComponent()
    let tmp = dir.appendingPathComponent(".\(url.lastPathComponent).\(ProcessInfo.processInfo.processIdentifier).\(UInt32.random(in: 0...UInt32.max)).tmp")
    func failure(_ what: String) -> UpdraftError {
        let reason = String(cString: strerror(errno))
        return UpdraftError(.io, "cannot write \(url.path): \(what): \(reason)",
                            hint: errno == ENOSPC || errno == EDQUOT || errno == EFBIG
                                ? "free some space on the disk that holds \(dir.path)"
                                : "check that the folder \(dir.path) exists and is writable")
    }
    let fd = open(tmp.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw failure("cannot create a temporary file in the folder") }
    var closed = false, done = false
    defer {
        if !closed { close(fd) }
        if !done { unlink(tmp.path) }
    }
    try data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
        var offset = 0
        while offset < raw.count {
            let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                throw failure("writing failed")
            }
            offset += n
        }
    }
    guard fsync(fd) == 0 else { throw failure("flushing to disk failed") }
    closed = true
    guard close(fd) == 0 else { throw failure("closing the file failed") }
    guard rename(tmp.path, url.path) == 0 else { throw failure("cannot move the written file into place") }
    done = true
    // The folder's entry for the new name, on disk too (best effort: some file systems refuse).
    let dirFD = open(dir.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    if dirFD >= 0 { _ = fsync(dirFD); close(dirFD) }
}
