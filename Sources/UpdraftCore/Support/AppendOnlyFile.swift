import Foundation

/// An open file that records are appended to, each in one `writeFully`, from any thread. The first
/// write that fails (a full disk, a file-size limit) calls `onWriteFailure` once with "cannot write
/// WHAT PATH: why; training goes on without it", and nothing more is written: a log that fails
/// never stops training. The JSON Lines log and the TensorBoard event file write through one.
package final class AppendOnlyFile: @unchecked Sendable {
    /// The file, for messages.
    package let url: URL
    /// What the file is, for messages: "the log", "the TensorBoard event file".
    package let what: String
    private let fd: Int32
    private let lock = NSLock()
    private var failed = false
    /// Called once, with a one-line message, when a write fails.
    package var onWriteFailure: ((String) -> Void)?

    /// Takes over `fd` (closed when the file is released).
    package init(fileDescriptor fd: Int32, url: URL, what: String) {
        self.fd = fd; self.url = url; self.what = what
    }

    deinit { close(fd) }

    /// Whether a write has failed (nothing more is written).
    package var hasFailed: Bool { lock.lock(); defer { lock.unlock() }; return failed }

    /// Appends `bytes` in one `writeFully`; nothing once a write has failed.
    package func append(_ bytes: UnsafeRawBufferPointer) {
        lock.lock(); defer { lock.unlock() }
        guard !failed else { return }
        if !writeFully(fd, bytes) { fail() }
    }

    /// Syncs what was written to disk (a file system that cannot sync this file is not a failure).
    package func sync() {
        lock.lock(); defer { lock.unlock() }
        guard !failed else { return }
        if fsync(fd) != 0 && errno != EINVAL && errno != EROFS { fail() }
    }

    /// Called with `lock` held.
    private func fail() {
        failed = true
        onWriteFailure?("cannot write \(what) \(url.path): \(String(cString: strerror(errno))); training goes on without it")
    }
}
