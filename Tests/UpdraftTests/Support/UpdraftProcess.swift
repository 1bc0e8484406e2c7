import Foundation
import XCTest
@testable import UpdraftPlacement

/// What a run of the `updraft` executable printed, and how it ended.
struct CommandRun { var status: Int32; var stdout: String; var stderr: String }

/// Runs the `updraft` built next to this test bundle (.build/debug/UpdraftPackageTests.xctest), as a
/// user would: the device-pin and data-parallel variables cleared, the calibration cache in
/// `cacheDirectory`, then `extra` on top. `program`: another executable built beside it (`updraft-bench`).
func runUpdraft(_ arguments: [String], program: String = "updraft", cacheDirectory: URL, environment extra: [String: String] = [:],
                file: StaticString = #filePath, line: UInt = #line) throws -> CommandRun {
    try runToEnd(try updraftProcess(arguments, program: program, cacheDirectory: cacheDirectory, environment: extra, file: file, line: line))
}

/// Runs `process` (not started) to its end, with what it printed.
func runToEnd(_ process: Process) throws -> CommandRun {
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    // Drain stderr beside stdout, so a full pipe on either side cannot stall the child.
    final class Drained: @unchecked Sendable { var data = Data() }  // written by the reader, read after `wait`
    let stderr = Drained()
    let drained = DispatchSemaphore(value: 0)
    DispatchQueue.global().async { stderr.data = err.fileHandleForReading.readDataToEndOfFile(); drained.signal() }
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    drained.wait()
    process.waitUntilExit()
    return CommandRun(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                      stderr: String(decoding: stderr.data, as: UTF8.self))
}

/// A `Process` for the `updraft` built next to this test bundle, not started, with the environment
/// `runUpdraft` describes.
func updraftProcess(_ arguments: [String], program: String = "updraft", cacheDirectory: URL, environment extra: [String: String] = [:],
                    file: StaticString = #filePath, line: UInt = #line) throws -> Process {
    let candidates = [Bundle.main.executableURL?.deletingLastPathComponent(), Bundle.main.bundleURL,
                      Bundle.main.bundleURL.deletingLastPathComponent()]
        .compactMap { $0 }.map { $0.appendingPathComponent(program) }
    guard let binary = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
        XCTFail("the \(program) executable is not built next to the tests (\(candidates.map(\.path))); run `swift build` first",
                file: file, line: line)
        throw XCTSkip("no \(program) binary")
    }
    var env = ProcessInfo.processInfo.environment
    for key in [DevicePin.environmentVariable, DataParallelMode.environmentVariable] { env.removeValue(forKey: key) }
    env[CalibrationCache.directoryVariable] = cacheDirectory.path
    env.merge(extra) { $1 }
    let process = Process()
    process.executableURL = binary
    process.arguments = arguments
    process.environment = env
    return process
}

/// Runs `updraft` until it writes `marker` to stderr, then kills it with SIGKILL (as `kill -9`
/// does: no handler runs, nothing is flushed or saved). Returns what it wrote to stderr; fails
/// the test if it ended by itself before the marker.
func killUpdraft(when marker: String, _ arguments: [String], cacheDirectory: URL, environment extra: [String: String] = [:],
                 file: StaticString = #filePath, line: UInt = #line) throws -> String {
    let process = try updraftProcess(arguments, cacheDirectory: cacheDirectory, environment: extra, file: file, line: line)
    let err = Pipe()
    process.standardOutput = FileHandle.nullDevice
    process.standardError = err
    try process.run()
    var seen = Data()
    while !String(decoding: seen, as: UTF8.self).contains(marker) {
        let chunk = err.fileHandleForReading.availableData
        if chunk.isEmpty { break }   // end of file: it exited
        seen += chunk
    }
    let text = String(decoding: seen, as: UTF8.self)
    guard text.contains(marker) else {
        process.waitUntilExit()
        XCTFail("updraft ended (status \(process.terminationStatus)) before '\(marker)': \(text)", file: file, line: line)
        return text
    }
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
    XCTAssertEqual(process.terminationReason, .uncaughtSignal, file: file, line: line)
    XCTAssertEqual(process.terminationStatus, SIGKILL, "killed by SIGKILL", file: file, line: line)
    return text
}
