#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Standard output for the executables, without touching C's `stdout` global (shared mutable
/// state that strict concurrency checking rightly refuses).
public enum StandardOutput {
    /// Writes what `print` buffered (a progress line without a newline) to the terminal or pipe now.
    public static func flush() { fflush(nil) }

    /// Sends everything later written to standard output to /dev/null (ranks other than the first
    /// of an MPI job, whose output would repeat rank 0's). Standard error stays.
    public static func silence() {
        flush()
        let null = open("/dev/null", O_WRONLY)
        guard null >= 0 else { return }
        _ = dup2(null, STDOUT_FILENO)
        _ = close(null)
    }
}
