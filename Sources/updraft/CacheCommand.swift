import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft cache [clear] [--all] [--json]`: what Updraft keeps between runs in its cache folder
/// (program binaries, calibrations, tunings), and emptying it.
let cacheCommand = CLICommand(CommandSpec(
    name: "cache",
    summary: "Show the cache folder (OpenCL program binaries, calibrations, tunings); `updraft cache clear` empties the program binaries.",
    positionals: "[clear]", minPositionals: 0, maxPositionals: 1,
    options: OptionSpec.table("""
        --all   with clear: also remove the calibrations and tunings (devices are measured again on their next use)
        --json  print JSON
        """),
    discussion: """
    The folder is $\(CacheDirectory.variable), else $XDG_CACHE_HOME/updraft, else ~/.cache/updraft. Built OpenCL \
    programs are kept in its programs/ folder (one file per device, driver, build options and kernel source), so a \
    new process loads them instead of compiling again; \(ProgramBinaryCache.capacityVariable) caps it (default \
    \(ProgramBinaryCache.defaultCapacityBytes >> 20) MiB, least recently used first out) and \
    \(ProgramBinaryCache.switchVariable)=off turns it off.
    """
)) { args in
    let environment = ProcessInfo.processInfo.environment
    let folder = CacheDirectory.url(environment: environment)
    let programs = ProgramBinaryCache.standard(environment: environment)
        ?? ProgramBinaryCache(directory: folder.appendingPathComponent("programs", isDirectory: true))
    let others = [CalibrationCache.fileName, KernelTuningStore.fileName, CPUConvolutionTuning.fileName].map { folder.appendingPathComponent($0) }
    switch args.positionals.first {
    case nil:
        let usage = programs.usage
        let stored = others.filter { FileManager.default.fileExists(atPath: $0.path) }
        if args.flag("json") {
            let object: [String: Any] = ["folder": folder.path, "programs": ["folder": programs.directory.path, "entries": usage.entries,
                                                                             "bytes": usage.bytes, "capacityBytes": programs.capacityBytes,
                                                                             "enabled": ProgramBinaryCache.standard(environment: environment) != nil],
                                         "files": stored.map(\.lastPathComponent)]
            print(String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys]), as: UTF8.self))
        } else {
            print("cache folder: \(folder.path)")
            print(programCacheLine(programs, enabled: ProgramBinaryCache.standard(environment: environment) != nil))
            print("other files: " + (stored.isEmpty ? "none" : stored.map(\.lastPathComponent).joined(separator: ", ")))
        }
        return 0
    case "clear"?:
        let removed = programs.clear()
        var line = "removed \(removed) program binar\(removed == 1 ? "y" : "ies") from \(programs.directory.path)"
        if args.flag("all") {
            let files = others.filter { (try? FileManager.default.removeItem(at: $0)) != nil }
            line += "; and \(files.isEmpty ? "no other file" : files.map(\.lastPathComponent).joined(separator: ", "))"
        }
        print(line)
        return 0
    case let other?:
        throw UsageError("updraft cache takes `clear` or nothing, not '\(other)'")
    }
}

/// "program binaries: N (X MiB of a Y MiB cap) in FOLDER", for `cache` and `devices`.
func programCacheLine(_ cache: ProgramBinaryCache, enabled: Bool) -> String {
    guard enabled else { return "program binaries: not cached (\(ProgramBinaryCache.switchVariable)=off)" }
    let usage = cache.usage
    return "program binaries: \(usage.entries) (\(formatBytes(UInt64(usage.bytes))) of a \(formatBytes(UInt64(cache.capacityBytes))) cap) "
        + "in \(cache.directory.path); `updraft cache clear` empties it"
}
