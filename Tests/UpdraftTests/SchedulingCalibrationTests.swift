import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftPlacement

final class SchedulingCalibrationTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("updraft-calibration-\(UUID().uuidString)", isDirectory: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    private var cache: CalibrationCache { CalibrationCache(directory: directory) }

    func testRoundTripKeepsEveryField() throws {
        let gpu = DescribedDevices.fastGPU, cpu = DescribedDevices.cpu
        try cache.store(gpu, key: "gpu-key")
        try cache.store(cpu, key: "cpu-key")
        let reread = CalibrationCache(directory: directory)  // a fresh value, reading the file again
        XCTAssertEqual(reread.lookup("gpu-key"), gpu)
        XCTAssertEqual(reread.lookup("cpu-key"), cpu)
        XCTAssertNil(reread.lookup("other-key"))
        XCTAssertEqual(reread.load().count, 2)
    }

    func testMeasuresOnceThenAnswersFromTheCache() throws {
        var measurements = 0
        let measure = { () -> DeviceProfile in measurements += 1; return DescribedDevices.slowGPU }
        let first = try cache.profile(key: "k", measure: measure)
        XCTAssertFalse(first.cached)
        XCTAssertNil(first.warning)
        let second = try cache.profile(key: "k", measure: measure)
        XCTAssertTrue(second.cached)
        XCTAssertEqual(second.profile, DescribedDevices.slowGPU)
        XCTAssertEqual(measurements, 1)
        // Another driver version is another key: measured afresh.
        let otherDriver = CalibrationCache.key(kind: "opencl", name: "Slow GPU", driverVersion: "2.0")
        XCTAssertNotEqual(otherDriver, CalibrationCache.key(kind: "opencl", name: "Slow GPU", driverVersion: "1.0"))
        _ = try cache.profile(key: otherDriver, measure: measure)
        XCTAssertEqual(measurements, 2)
    }

    func testCorruptCacheIsIgnoredAndRewritten() throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data("{\"format\": 1, \"devices\": {\"k\": {\"profile\": [tru".utf8).write(to: cache.fileURL)
        XCTAssertTrue(cache.load().isEmpty)
        var measurements = 0
        let outcome = try cache.profile(key: "k") { measurements += 1; return DescribedDevices.cpu }
        XCTAssertFalse(outcome.cached)
        XCTAssertEqual(measurements, 1)
        // The file is valid again and holds the new measurement.
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: cache.fileURL)) as? [String: Any]
        XCTAssertEqual(object?["format"] as? Int, CalibrationCache.formatVersion)
        XCTAssertEqual(cache.lookup("k"), DescribedDevices.cpu)
    }

    func testOtherFormatAndUnusableEntriesAreIgnored() throws {
        try cache.store(DescribedDevices.cpu, key: "k")
        var text = try String(contentsOf: cache.fileURL, encoding: .utf8)
        text = text.replacingOccurrences(of: "\"format\" : \(CalibrationCache.formatVersion)", with: "\"format\" : 999")
        try Data(text.utf8).write(to: cache.fileURL)
        XCTAssertNil(cache.lookup("k"))

        var broken = DescribedDevices.cpu
        broken.fmaGFLOPS = .nan
        XCTAssertThrowsError(try cache.profile(key: "nan") { broken })
        XCTAssertNil(cache.lookup("nan"))
    }

    func testUnwritableCacheStillGivesTheProfile() throws {
        // The cache "directory" is a file: nothing can be stored, the measurement still counts.
        try Data("x".utf8).write(to: directory)
        let outcome = try CalibrationCache(directory: directory).profile(key: "k") { DescribedDevices.cpu }
        XCTAssertEqual(outcome.profile, DescribedDevices.cpu)
        let warning = try XCTUnwrap(outcome.warning)
        XCTAssertFalse(warning.contains("\n"), warning)
        try FileManager.default.removeItem(at: directory)
    }

    func testCacheDirectoryFromTheEnvironment() {
        let home = ["HOME": "/home/someone"]
        XCTAssertEqual(CalibrationCache.defaultDirectory(environment: home).path, "/home/someone/.cache/updraft")
        XCTAssertEqual(CalibrationCache.defaultDirectory(environment: home.merging(["XDG_CACHE_HOME": "/xdg"]) { $1 }).path,
                       "/xdg/updraft")
        XCTAssertEqual(CalibrationCache.defaultDirectory(environment: ["XDG_CACHE_HOME": "/xdg", "UPDRAFT_CACHE_DIR": "/c"]).path,
                       "/c")
    }

    func testHostCalibrationTimesTheHostBackend() throws {
        let host = HostInfo(cpuName: "Test CPU", cores: 2, memoryBytes: 8 << 30)
        let first = try DeviceCalibration.hostProfile(host, backend: CPUBackend(threads: 1), cache: cache)
        XCTAssertTrue(first.profile.isUsable, "\(first.profile)")
        XCTAssertTrue(first.profile.isHost)
        XCTAssertEqual(first.profile.kind, .cpu)
        XCTAssertEqual(first.profile.memoryBytes, 8 << 30)
        XCTAssertEqual(first.profile.matrixEfficiency, 1)
        XCTAssertFalse(first.cached)
        let key = DeviceCalibration.hostCacheKey(host, backendName: "cpu")
        XCTAssertEqual(cache.lookup(key)?.fmaGFLOPS, first.profile.fmaGFLOPS)
        // Another host backend is measured afresh.
        XCTAssertNotEqual(key, DeviceCalibration.hostCacheKey(host, backendName: "reference"))
        let second = try DeviceCalibration.hostProfile(host, backend: CPUBackend(threads: 1), cache: cache)
        XCTAssertTrue(second.cached)
        XCTAssertEqual(second.profile, first.profile)
    }

    func testOpenCLCalibrationMeasuresTheDevice() throws {
        let device = try OpenCLTestSupport.context().device
        let first = try DeviceCalibration.profile(of: device, cache: cache)
        let p = first.profile
        XCTAssertTrue(p.isUsable, "\(p)")
        XCTAssertEqual(p.openCLIndex, device.info.index)
        XCTAssertEqual(p.name, device.info.name)
        XCTAssertEqual(p.kind, DeviceProfile.Kind(device.info.type))
        XCTAssertEqual(p.memoryBytes, device.info.globalMemory)
        XCTAssertEqual(p.matrixEfficiency, DeviceCalibration.openCLMatrixEfficiency)
        XCTAssertEqual(p.driverVersion, device.info.driverVersion)
        XCTAssertFalse(first.cached)
        XCTAssertTrue(try DeviceCalibration.profile(of: device, cache: cache).cached)
    }
}
