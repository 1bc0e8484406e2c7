import Foundation
import XCTest

/// mpirun for the multi-rank tests. CI must run them (make deps installs openmpi-bin): a missing
/// mpirun fails there, and skips with a message only outside CI.
enum MPITestSupport {
    static func mpirun(file: StaticString = #filePath, line: UInt = #line) throws -> URL {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":") {
            let url = URL(fileURLWithPath: String(dir)).appendingPathComponent("mpirun")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        if ProcessInfo.processInfo.environment["CI"] != nil {
            XCTFail("mpirun is not installed; CI must run the multi-rank tests (make deps installs openmpi-bin)", file: file, line: line)
            throw XCTSkip("no mpirun")
        }
        throw XCTSkip("mpirun is not installed (apt-get install openmpi-bin, or make deps): multi-rank tests skipped")
    }

    /// The `updraft` executable built next to the test bundle.
    static func updraftBinary() throws -> URL {
        let candidates = [Bundle.main.executableURL?.deletingLastPathComponent(), Bundle.main.bundleURL,
                          Bundle.main.bundleURL.deletingLastPathComponent()]
            .compactMap { $0 }.map { $0.appendingPathComponent("updraft") }
        guard let binary = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw XCTSkip("the updraft executable is not built next to the tests; run `swift build` first")
        }
        return binary
    }

    /// `mpirun -np N updraft ARGS`, local ranks, as root where the tests run as root.
    static func arguments(ranks: Int, environment: [String: String] = [:], _ args: [String]) throws -> [String] {
        var out = ["--oversubscribe", "--allow-run-as-root", "-np", "\(ranks)"]
        for (k, v) in environment.sorted(by: { $0.key < $1.key }) { out += ["-x", "\(k)=\(v)"] }
        return out + [try updraftBinary().path] + args
    }

    /// `mpirun -np N updraft ARGS` to its end, with the environment `runUpdraft` gives plus
    /// `environment` (set for mpirun and passed to every rank).
    static func run(ranks: Int, _ args: [String], cacheDirectory: URL, environment: [String: String] = [:]) throws -> CommandRun {
        let process = try updraftProcess(args, cacheDirectory: cacheDirectory, environment: environment)
        process.executableURL = try mpirun()
        process.arguments = try arguments(ranks: ranks, environment: environment, args)
        return try runToEnd(process)
    }

    /// Child processes of `pid` with the MPI rank each was given (from /proc).
    static func ranks(of pid: Int32) -> [Int: Int32] {
        var out: [Int: Int32] = [:]
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return out }
        for entry in entries {
            guard let child = Int32(entry),
                  let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 2, Int32(fields[1]) == pid,
                  let environ = FileManager.default.contents(atPath: "/proc/\(entry)/environ") else { continue }
            for variable in environ.split(separator: 0) {
                let text = String(decoding: variable, as: UTF8.self)
                if text.hasPrefix("OMPI_COMM_WORLD_RANK="), let r = Int(text.dropFirst("OMPI_COMM_WORLD_RANK=".count)) {
                    out[r] = child
                }
            }
        }
        return out
    }
}
