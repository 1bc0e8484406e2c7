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
}
