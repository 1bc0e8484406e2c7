import XCTest
@testable import UpdraftCore
@testable import UpdraftModel
@testable import UpdraftPlacement
import UpdraftCommandLine

/// `updraft plan` and `updraft devices` as a user runs them, in a subprocess. OCL_ICD_VENDORS pointed
/// at an empty folder makes OpenCL unavailable (the ICD loader finds no platform), which must leave
/// a CPU plan and a warning, never a failure.
final class SchedulingCommandTests: XCTestCase {
    /// One calibration cache for the class: the host is measured once.
    private static let cacheDirectory = temporaryFolder("updraft-cli-cache")
    private static let emptyVendors = temporaryFolder("updraft-no-icd")

    override class func tearDown() {
        try? FileManager.default.removeItem(at: cacheDirectory)
        try? FileManager.default.removeItem(at: emptyVendors)
    }

    typealias Run = CommandRun

    /// Runs the `updraft` built next to this test bundle.
    private func updraft(_ arguments: [String], environment extra: [String: String] = [:],
                         file: StaticString = #filePath, line: UInt = #line) throws -> Run {
        try FileManager.default.createDirectory(at: Self.emptyVendors, withIntermediateDirectories: true)
        return try runUpdraft(arguments, cacheDirectory: Self.cacheDirectory, environment: extra, file: file, line: line)
    }

    private var noOpenCL: [String: String] { ["OCL_ICD_VENDORS": Self.emptyVendors.path] }
    private var model: String { Fixtures.url("conv_image_classifier.mlmodel").path }

    func testPlanWithoutOpenCLFallsBackToTheCPUWithAWarning() throws {
        let run = try updraft(["plan", model, "--batch-size", "4"], environment: noOpenCL)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("all on cpu"), run.stdout)
        XCTAssertTrue(run.stdout.contains("Total per batch"), run.stdout)
        XCTAssertTrue(run.stderr.contains("warning: no OpenCL platform or device found; planning with the CPU only"), run.stderr)

        let json = try updraft(["plan", model, "--json", "--compute-units", "cpuAndGPU"], environment: noOpenCL)
        XCTAssertEqual(json.status, 0, json.stderr)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(object["computeUnits"] as? String, "cpuAndGPU")
        XCTAssertEqual(object["isSplit"] as? Bool, false)
        XCTAssertEqual((object["tailDevice"] as? [String: Any])?["name"] as? String, HostInfo.current.cpuName)
        // The batch size defaults to the model's miniBatchSize.
        let graph = try NetworkGraph(model: CoreMLModel(contentsOf: Fixtures.url("conv_image_classifier.mlmodel")))
        let expected = graph.updateParameters?.optimizer?.miniBatchSize.map { Int($0.defaultValue) } ?? 8
        XCTAssertEqual(object["batchSize"] as? Int, expected)
        XCTAssertEqual((object["warnings"] as? [String])?.count, 1)
    }

    func testPinningAnUnknownDeviceListsTheDevices() throws {
        let option = try updraft(["plan", model, "--device", "0"], environment: noOpenCL)
        XCTAssertEqual(option.status, 1)
        XCTAssertTrue(option.stderr.contains("--device names OpenCL device #0, which does not exist"), option.stderr)
        XCTAssertTrue(option.stderr.contains("cpu (the host CPU backend)"), option.stderr)
        XCTAssertTrue(option.stderr.contains("no OpenCL platform"), option.stderr)

        var env = noOpenCL
        env[DevicePin.environmentVariable] = "no-such-gpu"
        let variable = try updraft(["plan", model], environment: env)
        XCTAssertEqual(variable.status, 1)
        XCTAssertTrue(variable.stderr.contains("UPDRAFT_DEVICE 'no-such-gpu' matches no device"), variable.stderr)
        // The option wins over the variable.
        let pinned = try updraft(["plan", model, "--device", "cpu"], environment: env)
        XCTAssertEqual(pinned.status, 0, pinned.stderr)
        XCTAssertTrue(pinned.stdout.contains("device pinned by --device to cpu"), pinned.stdout)
    }

    func testBadComputeUnitsIsAUsageError() throws {
        let run = try updraft(["plan", model, "--compute-units", "gpuOnly"], environment: noOpenCL)
        XCTAssertEqual(run.status, 2)
        XCTAssertTrue(run.stderr.contains("cpuOnly, cpuAndGPU, all"), run.stderr)
    }

    /// The CLI reads --compute-units and --data-parallel with the library's parsers: any case.
    func testComputeUnitsAndDataParallelAreReadInAnyCase() throws {
        let run = try updraft(["plan", model, "--json", "--compute-units", "CPUONLY", "--data-parallel", "Off"], environment: noOpenCL)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("\"cpuOnly\""), run.stdout)
        let bad = try updraft(["plan", model, "--data-parallel", "sometimes"], environment: noOpenCL)
        XCTAssertEqual(bad.status, 2, bad.stderr)
        XCTAssertTrue(bad.stderr.contains("--data-parallel") && bad.stderr.contains("auto"), bad.stderr)
    }

    func testDevicesWithoutOpenCLStillShowsThePicks() throws {
        let run = try updraft(["devices"], environment: noOpenCL)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.hasPrefix("CPU: "), run.stdout)
        XCTAssertTrue(run.stdout.contains("OpenCL: no OpenCL platform or device found"), run.stdout)
        XCTAssertTrue(run.stdout.contains("Typical workload: SqueezeNet 1.1"), run.stdout)
        for units in ComputeUnits.allCases {
            XCTAssertNotNil(run.stdout.range(of: "\(units.rawValue) +all on cpu", options: .regularExpression), run.stdout)
        }
        let json = try updraft(["devices", "--json"], environment: noOpenCL)
        XCTAssertEqual(json.status, 0, json.stderr)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        XCTAssertEqual((object["opencl"] as? [Any])?.count, 0)
        XCTAssertNotNil(object["openclProblem"])
        let choices = try XCTUnwrap((object["scheduling"] as? [String: Any])?["choices"] as? [[String: Any]])
        XCTAssertEqual(choices.map { $0["computeUnits"] as? String }, ComputeUnits.allCases.map(\.rawValue))
        XCTAssertTrue(choices.allSatisfy { $0["tailDevice"] as? String == "cpu" })
    }
}
