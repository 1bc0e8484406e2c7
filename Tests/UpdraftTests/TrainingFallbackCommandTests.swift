import XCTest
@testable import UpdraftModel
@testable import UpdraftPlacement

/// `updraft train` as a user runs it, in a subprocess, on a tiny image model and eight 16x16 images
/// in a temporary folder: without OpenCL it trains on the CPU (a plan per batch warns that OpenCL is missing); with data parallelism
/// forced it trains to the CPU's result, falling back with a warning if an OpenCL device fails.
final class TrainingFallbackCommandTests: XCTestCase {
    private static let files = CommandTestFiles("updraft-train-fallback")

    override class func setUp() {
        try? FileManager.default.createDirectory(at: files.noOpenCL, withIntermediateDirectories: true)
        // Four dark and four bright images with some noise: the model's classes are "no" and "yes".
        writeNoisyImageFolder(files.data, perLabel: 4, seed: 21)
    }

    override class func tearDown() { files.remove() }

    typealias Run = CommandRun

    /// Runs the `updraft` built next to this test bundle.
    private func updraft(_ arguments: [String], environment extra: [String: String] = [:],
                         file: StaticString = #filePath, line: UInt = #line) throws -> Run {
        return try runUpdraft(arguments, cacheDirectory: Self.files.cache, environment: extra, file: file, line: line)
    }

    /// Trains one epoch in batches of 4 and returns the run and the trained weights of conv and dense.
    private func train(_ name: String, _ extra: [String], environment: [String: String] = [:],
                       file: StaticString = #filePath, line: UInt = #line) throws -> (Run, [Float]) {
        let out = Self.files.file("\(name).mlmodel")
        let run = try updraft(["train", Self.files.model, "--train", Self.files.data.path, "--epochs", "1", "--batch-size", "4",
                               "--learning-rate", "0.1", "--out", out.path] + extra, environment: environment)
        XCTAssertEqual(run.status, 0, "\(name): \(run.stderr)", file: file, line: line)
        guard run.status == 0 else { return (run, []) }
        let trained = try CoreMLModel(contentsOf: out)
        var values: [Float] = []
        for layer in ["conv", "dense"] {
            values += try trained.weights(ofLayer: layer).data + (try trained.bias(ofLayer: layer)?.data ?? [])
        }
        return (run, values)
    }

    private func assertClose(_ a: [Float], _ b: [Float], _ tolerance: Float, _ what: String,
                             file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(a.count, b.count, what, file: file, line: line)
        let worst = zip(a, b).map { abs($0 - $1) }.max() ?? .infinity
        XCTAssertLessThanOrEqual(worst, tolerance, "\(what): weights differ by \(worst)", file: file, line: line)
    }

    func testWithoutOpenCLTrainingRunsOnTheCPUWithAWarning() throws {
        let noOpenCL = ["OCL_ICD_VENDORS": Self.files.noOpenCL.path]
        // Eight images: a job the CPU finishes before any OpenCL device could start, so OpenCL is not even looked for.
        let (run, weights) = try train("no-opencl", [], environment: noOpenCL)
        XCTAssertTrue(run.stdout.contains("device: cpu;"), run.stdout)
        XCTAssertEqual(run.stderr.split(separator: "\n").filter { $0.hasPrefix("warning: ") }, [], run.stderr)
        // Placed per batch (the plan without a job), the missing OpenCL is looked for and named, once.
        let plan = try updraft(["plan", Self.files.model, "--batch-size", "4"], environment: noOpenCL)
        XCTAssertEqual(plan.status, 0, plan.stderr)
        XCTAssertTrue(plan.stdout.contains("all on cpu"), plan.stdout)
        let warnings = plan.stderr.split(separator: "\n").filter { $0.hasPrefix("warning: ") }
        XCTAssertEqual(warnings.count, 1, plan.stderr)
        XCTAssertTrue(warnings.first?.contains("OpenCL") ?? false, plan.stderr)
        XCTAssertTrue(warnings.first?.contains("CPU only") ?? false, plan.stderr)
        // Forcing data parallelism without a second device changes nothing.
        let (forced, forcedWeights) = try train("no-opencl-forced", ["--data-parallel", "on"], environment: noOpenCL)
        XCTAssertTrue(forced.stdout.contains("device: cpu;"), forced.stdout)
        // The same training as asking for the CPU in the first place.
        let (_, cpu) = try train("cpu-only", ["--compute-units", "cpuOnly"])
        assertClose(weights, cpu, 0, "no OpenCL vs cpuOnly")
        assertClose(forcedWeights, cpu, 0, "no OpenCL, forced data parallel vs cpuOnly")
        let original = try CoreMLModel(contentsOf: URL(fileURLWithPath: Self.files.model))
        var before: [Float] = []
        for layer in ["conv", "dense"] { before += try original.weights(ofLayer: layer).data + (try original.bias(ofLayer: layer)?.data ?? []) }
        XCTAssertEqual(before.count, cpu.count)
        XCTAssertGreaterThan(zip(before, cpu).map { abs($0 - $1) }.max() ?? 0, 1e-4, "training changed the weights")
    }

    /// Every batch split between the OpenCL device and the CPU (UPDRAFT_DATA_PARALLEL=on): the
    /// result is the CPU's. Where an OpenCL op fails (convolution before the GEMM kernels land),
    /// training goes on on the CPU after one warning naming the device, the reason and the fallback.
    func testForcedDataParallelTrainsToTheCPUResult() throws {
        _ = try OpenCLTestSupport.context()
        let (run, weights) = try train("data-parallel", [], environment: [DataParallelMode.environmentVariable: "on"])
        // Both devices, the faster (by this machine's calibration) first.
        let device = run.stdout.split(separator: "\n").first { $0.hasPrefix("device: ") }.map(String.init) ?? ""
        XCTAssertTrue(device.hasPrefix("device: data parallel: "), run.stdout)
        XCTAssertTrue(device.contains("opencl:") && device.contains("cpu ("), device)
        let warnings = run.stderr.split(separator: "\n").filter { $0.hasPrefix("warning: ") }
        XCTAssertLessThanOrEqual(warnings.count, 1, run.stderr)
        if let w = warnings.first {
            XCTAssertTrue(w.hasPrefix("warning: opencl:") && w.contains(" failed (") && w.contains("continuing on cpu"), String(w))
        }
        let (_, cpu) = try train("cpu-only-2", ["--compute-units", "cpuOnly"])
        assertClose(weights, cpu, 1e-4, "data parallel vs cpuOnly")
    }
}
