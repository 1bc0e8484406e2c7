import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// The program binary cache (`ProgramBinaryCache`): a miss builds and stores, a new context loads
/// what the last one built, a corrupt, truncated or refused file is rebuilt with one warning, a new
/// driver misses, many writers never leave a torn file, and the folder stays under its cap.
final class ProgramBinaryCacheTests: XCTestCase {
    private var folder: URL!

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-programs-\(UUID().uuidString)")
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: folder) }

    /// A kernel no other test builds (the define makes the driver's own cache miss too).
    private func source(_ offset: Float) -> String {
        """
        __kernel void shifted(__global float* y, __global const float* x, int n) {
            int i = get_global_id(0);
            if (i < n) y[i] = x[i] + \(offset)f + SHIFT;
        }
        """
    }

    /// A fresh context on the test device that caches in `folder` and collects its warnings.
    private func context(_ warnings: WarningLog) throws -> OpenCLContext {
        let shared = try OpenCLTestSupport.context()
        let ctx = try OpenCLContext(device: shared.device)
        ctx.binaryCache = ProgramBinaryCache(directory: folder)
        ctx.warn = { warnings.append($0) }
        return ctx
    }

    /// Builds the test program in `ctx` and checks that it computes x + offset + 1.
    private func runProgram(_ ctx: OpenCLContext, offset: Float) throws {
        let program = try ctx.program(source: source(offset), named: "shifted.cl", defines: ["SHIFT": "1.0f"])
        let k = try program.kernel("shifted")
        let x = try ctx.makeBuffer((0..<16).map(Float.init)), y = try ctx.makeBuffer(count: 16)
        try k.setArguments([.buffer(y), .buffer(x), .int(16)])
        try k.launch(global: [16])
        XCTAssertEqual(try ctx.read(y), (0..<16).map { Float($0) + offset + 1 })
    }

    private func onlyFile() throws -> URL {
        let files = try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == ProgramBinaryCache.fileExtension }
        XCTAssertEqual(files.count, 1, "\(files)")
        return try XCTUnwrap(files.first)
    }

    func testAMissBuildsAndStoresAndANewContextLoadsTheBinary() throws {
        let warnings = WarningLog()
        let first = try context(warnings)
        try runProgram(first, offset: 0.25)
        XCTAssertEqual(first.programStatistics.builtFromSource, 1)
        XCTAssertEqual(first.programStatistics.loadedFromBinary, 0)
        XCTAssertEqual(ProgramBinaryCache(directory: folder).usage.entries, 1)

        let second = try context(warnings)
        try runProgram(second, offset: 0.25)
        XCTAssertEqual(second.programStatistics.loadedFromBinary, 1)
        XCTAssertEqual(second.programStatistics.builtFromSource, 0)
        XCTAssertEqual(warnings.lines, [])
    }

    func testACorruptEntryIsRebuiltWithOneWarningAndStoredAgain() throws {
        let warnings = WarningLog()
        try runProgram(try context(warnings), offset: 0.5)
        let file = try onlyFile()
        var bytes = [UInt8](try Data(contentsOf: file))
        bytes[bytes.count - 3] ^= 0xFF  // a flipped bit inside the binary: the checksum no longer matches
        try Data(bytes).write(to: file)

        let ctx = try context(warnings)
        try runProgram(ctx, offset: 0.5)
        XCTAssertEqual(ctx.programStatistics.rejectedBinaries, 1)
        XCTAssertEqual(ctx.programStatistics.builtFromSource, 1)
        XCTAssertEqual(warnings.lines.count, 1)
        XCTAssertTrue(warnings.lines.first?.contains("checksum mismatch") ?? false, "\(warnings.lines)")
        // Stored again, whole: the next context loads it.
        let next = try context(warnings)
        try runProgram(next, offset: 0.5)
        XCTAssertEqual(next.programStatistics.loadedFromBinary, 1)
        XCTAssertEqual(warnings.lines.count, 1)
    }

    func testATruncatedEntryIsRebuilt() throws {
        let warnings = WarningLog()
        try runProgram(try context(warnings), offset: 0.75)
        let file = try onlyFile()
        let bytes = try Data(contentsOf: file)
        try bytes.prefix(bytes.count / 2).write(to: file)

        let ctx = try context(warnings)
        try runProgram(ctx, offset: 0.75)
        XCTAssertEqual(ctx.programStatistics.rejectedBinaries, 1)
        XCTAssertEqual(ctx.programStatistics.builtFromSource, 1)
        XCTAssertTrue(warnings.lines.first?.contains("truncated") ?? false, "\(warnings.lines)")
    }

    func testABinaryTheDriverRefusesIsRebuiltFromSource() throws {
        let warnings = WarningLog()
        try runProgram(try context(warnings), offset: 1.25)
        // A well-formed entry (key, length and checksum right) holding bytes no driver can load.
        let ctx = try context(warnings)
        let options = ctx.baseBuildOptions + " -DSHIFT=1.0f"
        let key = ProgramBinaryCache.Key(device: ctx.device.info, source: source(1.25), options: options)
        XCTAssertEqual(try onlyFile().lastPathComponent, key.fileName, "the test must build the key the context builds")
        try ProgramBinaryCache(directory: folder).store(Array("not a program binary of any driver".utf8), for: key)

        try runProgram(ctx, offset: 1.25)
        XCTAssertEqual(ctx.programStatistics.rejectedBinaries, 1)
        XCTAssertEqual(ctx.programStatistics.builtFromSource, 1)
        XCTAssertEqual(warnings.lines.count, 1)
        XCTAssertTrue(warnings.lines.first?.contains("refused") ?? false, "\(warnings.lines)")
        guard case .hit = ProgramBinaryCache(directory: folder).load(key) else { return XCTFail("the rebuilt binary was not stored") }
    }

    func testANewDriverOrAForeignFileIsAMiss() throws {
        let cache = ProgramBinaryCache(directory: folder)
        var device = Self.device
        let key = ProgramBinaryCache.Key(device: device, source: "kernel", options: "-cl-std=CL1.2")
        try cache.store([1, 2, 3], for: key)
        XCTAssertEqual(cache.load(key), .hit([1, 2, 3]))

        device.driverVersion = "2.0"
        let newDriver = ProgramBinaryCache.Key(device: device, source: "kernel", options: "-cl-std=CL1.2")
        XCTAssertNotEqual(newDriver.fileName, key.fileName)
        XCTAssertEqual(cache.load(newDriver), .miss)
        // Another key's file under this key's name (a hash collision, a copied folder) is a miss, and stays.
        try FileManager.default.copyItem(at: folder.appendingPathComponent(key.fileName),
                                         to: folder.appendingPathComponent(newDriver.fileName))
        XCTAssertEqual(cache.load(newDriver), .miss)
        XCTAssertEqual(cache.load(key), .hit([1, 2, 3]))
        // Other options or other source: other keys.
        XCTAssertNotEqual(ProgramBinaryCache.Key(device: Self.device, source: "kernel", options: "-DX=1").text, key.text)
        XCTAssertNotEqual(ProgramBinaryCache.Key(device: Self.device, source: "kernel ", options: "-cl-std=CL1.2").text, key.text)
        // A file of another format is corrupt, and removed.
        try Data("UPDRAFT-CL-BINARY-1\nold".utf8).write(to: folder.appendingPathComponent(key.fileName))
        guard case .corrupt = cache.load(key) else { return XCTFail("an old-format file must read as corrupt") }
        XCTAssertEqual(cache.load(key), .miss)
    }

    func testManyWritersAtOnceNeverLeaveATornFile() throws {
        let key = ProgramBinaryCache.Key(device: Self.device, source: "shared", options: "")
        let payloads: [[UInt8]] = (0..<8).map { w in (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* (w + 3)) } }
        let failures = WarningLog()
        let directory: URL = folder
        DispatchQueue.concurrentPerform(iterations: 8) { writer in
            let cache = ProgramBinaryCache(directory: directory)  // each as a process would: its own value
            for round in 0..<25 {
                do { try cache.store(payloads[writer], for: key) } catch { failures.append("store: \(error)") }
                switch cache.load(key) {
                case let .hit(bytes) where payloads.contains(bytes): break
                case .hit: failures.append("round \(round): a hit that is none of the payloads")
                case .miss: failures.append("round \(round): a miss after a store")
                case let .corrupt(reason): failures.append("round \(round): corrupt: \(reason)")
                }
            }
        }
        XCTAssertEqual(failures.lines, [])
        XCTAssertEqual(ProgramBinaryCache(directory: folder).usage.entries, 1)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".tmp") }
        XCTAssertEqual(leftovers, [])
    }

    func testTheFolderStaysUnderItsCapLeastRecentlyUsedFirst() throws {
        let cache = ProgramBinaryCache(directory: folder, capacityBytes: 10_000)
        var keys: [ProgramBinaryCache.Key] = []
        for i in 0..<8 {
            let key = ProgramBinaryCache.Key(device: Self.device, source: "program \(i)", options: "")
            keys.append(key)
            try cache.store([UInt8](repeating: UInt8(i), count: 3_000), for: key)
            // Make the order of use unambiguous whatever the file system's time resolution.
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: Double(i - 100))],
                                                  ofItemAtPath: folder.appendingPathComponent(key.fileName).path)
            if i == 6 { _ = cache.load(keys[0]) }  // used again: now the most recent
        }
        XCTAssertLessThanOrEqual(cache.usage.bytes, 10_000)
        guard case .hit = cache.load(keys[7]) else { return XCTFail("the newest entry was evicted") }
        XCTAssertEqual(cache.load(keys[1]), .miss, "the least recently used entry should have gone first")
        let stored = cache.usage.entries
        XCTAssertGreaterThan(stored, 0)
        XCTAssertEqual(cache.clear(), stored)
        XCTAssertEqual(cache.usage.entries, 0)
    }

    func testTheEnvironmentTurnsItOffAndSetsItsCap() {
        XCTAssertNil(ProgramBinaryCache.standard(environment: ["UPDRAFT_PROGRAM_CACHE": "off", "HOME": "/tmp"]))
        let cache = ProgramBinaryCache.standard(environment: ["UPDRAFT_CACHE_DIR": "/tmp/u", "UPDRAFT_PROGRAM_CACHE_MB": "3"])
        XCTAssertEqual(cache?.directory.path, "/tmp/u/programs")
        XCTAssertEqual(cache?.capacityBytes, 3 << 20)
    }

    static let device = OpenCLDeviceInfo(
        platformName: "Test Platform", platformVersion: "OpenCL 3.0", name: "Test Device", vendor: "Test", type: .gpu,
        computeUnits: 1, clockMHz: 1, globalMemory: 1 << 30, localMemory: 1 << 15, maxAllocation: 1 << 28, maxWorkGroupSize: 256,
        maxWorkItemSizes: [256, 256, 256], openCLCVersion: "OpenCL C 1.2", driverVersion: "1.0", extensions: [], index: 0)
}

/// Lines collected from several threads.
final class WarningLog: @unchecked Sendable {
    private let lock = NSLock()
    private var collected: [String] = []
    func append(_ line: String) { lock.lock(); collected.append(line); lock.unlock() }
    var lines: [String] { lock.lock(); defer { lock.unlock() }; return collected }
}

/// `updraft cache` shows the folder and the program binaries; `updraft cache clear` empties them,
/// `--all` the calibration too.
final class CacheCommandTests: XCTestCase {
    func testShowAndClear() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-cache-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let programs = ProgramBinaryCache(directory: folder.appendingPathComponent("programs"))
        for i in 0..<3 { try programs.store([UInt8](repeating: 7, count: 100), for: .init(device: ProgramBinaryCacheTests.device, source: "\(i)", options: "")) }
        try Data("{}".utf8).write(to: folder.appendingPathComponent("calibration.json"))

        let shown = try runUpdraft(["cache", "--json"], cacheDirectory: folder)
        XCTAssertEqual(shown.status, 0, shown.stderr)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any])
        let entries = try XCTUnwrap(object["programs"] as? [String: Any])
        XCTAssertEqual(entries["entries"] as? Int, 3)
        XCTAssertEqual(object["files"] as? [String], ["calibration.json"])
        XCTAssertTrue(try runUpdraft(["cache"], cacheDirectory: folder).stdout.contains("program binaries: 3"))

        let cleared = try runUpdraft(["cache", "clear"], cacheDirectory: folder)
        XCTAssertTrue(cleared.stdout.contains("removed 3 program binaries"), cleared.stdout)
        XCTAssertEqual(programs.usage.entries, 0)
        XCTAssertTrue(FileManager.default.fileExists(atPath: folder.appendingPathComponent("calibration.json").path))
        XCTAssertTrue(try runUpdraft(["cache", "clear", "--all"], cacheDirectory: folder).stdout.contains("calibration.json"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder.appendingPathComponent("calibration.json").path))
        let wrong = try runUpdraft(["cache", "empty"], cacheDirectory: folder)
        XCTAssertEqual(wrong.status, 2)
        XCTAssertTrue(wrong.stderr.contains("clear"), wrong.stderr)
    }
}
