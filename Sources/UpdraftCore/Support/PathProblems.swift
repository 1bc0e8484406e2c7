import Foundation

/// Why a path that was given could not be read, in words, for the messages of every reader (model
/// files, `.npy` files, data folders): a name that is not valid UTF-8 (Swift sees it with U+FFFD in
/// place of the bad bytes, so the file "does not exist" although it does), a folder where a file
/// was expected, a file that is not there, or the system's reason.
package func pathProblem(_ url: URL, expectingFile: Bool = true, error: Error? = nil) -> (message: String, hint: String) {
    let path = url.path
    if path.contains("\u{FFFD}") {
        return ("its name is not valid UTF-8 (the bytes shown as \u{FFFD}), which Updraft cannot open",
                "rename it (or a folder above it) to a UTF-8 name, e.g. with convmv, or make a symbolic link with a UTF-8 name")
    }
    var st = stat()
    guard stat(path, &st) == 0 else {
        let reason = String(cString: strerror(errno))
        return (errno == ENOENT ? "it does not exist" : reason, "check the path")
    }
    let kind = st.st_mode & S_IFMT
    if expectingFile && kind == S_IFDIR { return ("it is a folder, not a file", "give the path of the file itself") }
    if expectingFile && kind != S_IFREG { return ("it is \(fileKind(st.st_mode)), not a regular file", "give the path of a regular file") }
    if let error { return (error.localizedDescription, "check that the file is readable") }
    return ("it cannot be read", "check that the file is readable")
}

/// The bytes of the file at `url`; when it cannot be read, an `.io` error "cannot read WHAT PATH: why"
/// with `pathProblem`'s reason and hint (`what`: "the model file"; empty for a bare path).
package func readFile(_ url: URL, what: String) throws -> Data {
    do {
        return try Data(contentsOf: url)
    } catch {
        let problem = pathProblem(url, error: error)
        throw UpdraftError(.io, "cannot read \(what.isEmpty ? "" : what + " ")\(url.path): \(problem.message)", hint: problem.hint)
    }
}

/// "a folder", "a character device", ... for messages about a path.
package func fileKind(_ mode: mode_t) -> String {
    switch mode & S_IFMT {
    case S_IFDIR: return "a folder"
    case S_IFCHR: return "a character device"
    case S_IFBLK: return "a block device"
    case S_IFIFO: return "a FIFO"
    case S_IFSOCK: return "a socket"
    case S_IFLNK: return "a symbolic link"
    default: return "a regular file"
    }
}
