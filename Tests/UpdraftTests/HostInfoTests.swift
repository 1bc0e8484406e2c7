import Foundation
import XCTest
@testable import UpdraftCore

/// The cores the process may use: the affinity mask's CPU list as Linux writes it, and the default
/// thread count that follows it (under `taskset -c 0` a backend runs one thread, not one per online core).
final class HostInfoTests: XCTestCase {
    func testCPUListsAreCounted() {
        XCTAssertEqual(HostInfo.countCPUList("0-1"), 2)
        XCTAssertEqual(HostInfo.countCPUList("0"), 1)
        XCTAssertEqual(HostInfo.countCPUList("0-3,8,10-11\n"), 7)
        XCTAssertEqual(HostInfo.countCPUList(" 5 "), 1)
        for bad in ["", "x", "3-1", "1-", "-2", "0-1-2", "1,,2"] { XCTAssertNil(HostInfo.countCPUList(bad), bad) }
    }

    func testUsableCoresFollowTheAffinityMask() throws {
        let online = ProcessInfo.processInfo.activeProcessorCount
        XCTAssertGreaterThanOrEqual(HostInfo.usableCores, 1)
        XCTAssertLessThanOrEqual(HostInfo.usableCores, online)
        XCTAssertEqual(HostInfo.current.cores, HostInfo.usableCores)
        // A child pinned to one core sees one (where taskset exists).
        let taskset = ["/usr/bin/taskset", "/bin/taskset"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let taskset else { throw XCTSkip("no taskset on this host") }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: taskset)
        p.arguments = ["-c", "0", "grep", "Cpus_allowed_list", "/proc/self/status"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        p.waitUntilExit()
        let line = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let list = try XCTUnwrap(line.split(separator: ":").last.map(String.init))
        XCTAssertEqual(HostInfo.countCPUList(list), 1, line)
    }

    /// UPDRAFT_CPU_THREADS sets the CPU backend's default thread count; a value that is not a count
    /// falls back to the usable cores with one warning; `updraft devices --json` names the count.
    func testTheThreadCountVariable() throws {
        XCTAssertEqual(HostInfo.cpuThreads(environment: [:], usable: 3).threads, 3)
        XCTAssertNil(HostInfo.cpuThreads(environment: [:], usable: 3).warning)
        XCTAssertEqual(HostInfo.cpuThreads(environment: ["UPDRAFT_CPU_THREADS": "1"], usable: 3).threads, 1)
        XCTAssertEqual(HostInfo.cpuThreads(environment: ["UPDRAFT_CPU_THREADS": " 8 "], usable: 3).threads, 8)
        for bad in ["0", "-2", "two", "2000"] {
            let r = HostInfo.cpuThreads(environment: ["UPDRAFT_CPU_THREADS": bad], usable: 3)
            XCTAssertEqual(r.threads, 3, bad)
            XCTAssertTrue(r.warning?.contains("UPDRAFT_CPU_THREADS=\(bad) is not a thread count") ?? false, bad)
        }
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("threads-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let noICD = cache.appendingPathComponent("no-icd")
        try FileManager.default.createDirectory(at: noICD, withIntermediateDirectories: true)
        func devices(_ value: String) throws -> (threads: Int?, stderr: String) {
            let run = try runUpdraft(["devices", "--json"], cacheDirectory: cache,
                                     environment: ["UPDRAFT_CPU_THREADS": value, "OCL_ICD_VENDORS": noICD.path])
            XCTAssertEqual(run.status, 0, run.stderr)
            let start = run.stdout.firstIndex(of: "{") ?? run.stdout.startIndex
            let json = try JSONSerialization.jsonObject(with: Data(run.stdout[start...].utf8)) as? [String: Any]
            return ((json?["cpu"] as? [String: Any])?["threads"] as? Int, run.stderr)
        }
        XCTAssertEqual(try devices("1").threads, 1)
        let bad = try devices("lots")
        XCTAssertEqual(bad.threads, HostInfo.usableCores)
        XCTAssertEqual(bad.stderr.components(separatedBy: "UPDRAFT_CPU_THREADS=lots").count - 1, 1, bad.stderr)
    }
}
