import Foundation
import Updraft
import UpdraftCommandLine

/// Checks, before any training, that a file can be written at `url` (named by `option` in
/// messages): its folder exists and takes new files, and the path is not a folder. A run that
/// could not save its result should fail in the first second, not after the last epoch.
func checkWritable(_ url: URL, option: String) throws {
    let path = url.path
    var st = stat()
    if stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFDIR {
        throw UpdraftError(.io, "\(option) \(path) is a folder", hint: "give \(option) a file name, e.g. \(path)/model.mlmodel")
    }
    let folder = url.deletingLastPathComponent().path
    var isFolder: ObjCBool = false
    guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
        throw UpdraftError(.io, "the folder of \(option) \(path) does not exist", hint: "create it (mkdir -p \(folder)) or choose another path")
    }
    if let error = folderRefusesNewFiles(url.deletingLastPathComponent()) {
        throw UpdraftError(.io, "cannot write \(option) \(path): the folder \(folder) does not take new files (\(String(cString: strerror(error))))",
                           hint: "choose a writable folder for \(option)")
    }
}

/// Stops training cleanly on SIGINT (Ctrl-C), SIGTERM (docker stop, Kubernetes, batch schedulers)
/// and SIGHUP (a closed terminal): `stop` runs once per signal on a dispatch queue; the signal
/// received first is remembered for the exit status (128 + its number).
final class StopSignals {
    private var sources: [DispatchSourceSignal] = []
    private let lock = NSLock()
    private var first: Int32?

    init(_ signals: [Int32] = [SIGINT, SIGTERM, SIGHUP], stop: @escaping (Int32) -> Void) {
        for s in signals {
            signal(s, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: s, queue: .global())
            source.setEventHandler { [weak self] in
                self?.lock.lock()
                if self?.first == nil { self?.first = s }
                self?.lock.unlock()
                stop(s)
            }
            source.resume()
            sources.append(source)
        }
    }

    /// The first signal received, if any.
    var received: Int32? { lock.lock(); defer { lock.unlock() }; return first }

    func cancel() { sources.forEach { $0.cancel() } }
}

/// "SIGTERM" for messages.
func signalName(_ s: Int32) -> String {
    switch s {
    case SIGINT: return "SIGINT"
    case SIGTERM: return "SIGTERM"
    case SIGHUP: return "SIGHUP"
    default: return "signal \(s)"
    }
}
