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
    guard data.withUnsafeBytes({ writeFully(fd, $0) }) else { throw failure("writing failed") }
    guard fsync(fd) == 0 else { throw failure("flushing to disk failed") }
    closed = true
    guard close(fd) == 0 else { throw failure("closing the file failed") }
    guard rename(tmp.path, url.path) == 0 else { throw failure("cannot move the written file into place") }
    done = true
    // The folder's entry for the new name, on disk too (best effort: some file systems refuse).
    let dirFD = open(dir.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    if dirFD >= 0 { _ = fsync(dirFD); close(dirFD) }
}

/// Writes all of `raw` to `fd`, going on after short writes and interruptions (EINTR). False, with
/// `errno` set, when a write fails (a full disk, a file-size limit).
package func writeFully(_ fd: Int32, _ raw: UnsafeRawBufferPointer) -> Bool {
    var offset = 0
    while offset < raw.count {
        let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
        if n < 0 { if errno == EINTR { continue }; return false }
        offset += n
    }
    return true
}

/// Whether `folder` takes new files, tried with a probe file (made and removed): nil when it does,
/// else the `errno` of the failure (write permission, a read-only mount and a full inode table all
/// show here).
package func folderRefusesNewFiles(_ folder: URL) -> Int32? {
    let probe = folder.appendingPathComponent(".updraft-probe-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
    let fd = open(probe.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return errno }
    close(fd)
    unlink(probe.path)
    return nil
}
