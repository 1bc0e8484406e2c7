import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// Evaluation and prediction keep going when their device fails: one warning, the batch again on the
/// CPU, the same numbers as a CPU run.
final class InferenceRunnerTests: XCTestCase {
    let model = Result { try CoreMLModel(contentsOf: Fixtures.url("conv_image_classifier.mlmodel")) }

    func batch(_ count: Int = 3) throws -> TrainingBatch {
        try ArrayBatchProvider(examples: (0..<count).map {
            TrainingExample(input: Tensor(shape: [3, 16, 16], uniformIn: 0...255, seed: UInt64($0)), target: .classIndex($0 % 2))
        }).batch(at: 0..<count)
    }

    func testDeviceFailureMidRunGoesOnOnTheCPU() throws {
        let graph = try NetworkGraph(model: try model.get())
        let b = try batch()
        let cpu = try InferenceRunner(graph: graph, prefix: CPUBackend(), tail: CPUBackend(), warn: { XCTFail("no warning: \($0)") })
        let expected = try cpu.run(position: "batch 1") { try $0.predict(b.inputs) }
        let expectedLoss = try cpu.run(position: "batch 1") { try $0.evaluate(b) }.loss
        XCTAssertTrue(cpu.fallbacks.isEmpty, "nothing to fall back to from the host")

        let failing = FailingBackend(CPUBackend(), failing: .convolutionForward, onCall: 2, name: "gpu")
        var warnings: [String] = []
        let runner = try InferenceRunner(graph: graph, prefix: failing, tail: failing, warn: { warnings.append($0) })
        XCTAssertEqual(try runner.run(position: "batch 1") { try $0.predict(b.inputs) }, expected)
        XCTAssertEqual(runner.deviceName, "gpu")
        XCTAssertEqual(try runner.run(position: "batch 2") { try $0.evaluate(b) }.loss, expectedLoss)
        XCTAssertEqual(runner.deviceName, "cpu")
        XCTAssertEqual(warnings.count, 1)
        XCTAssertTrue(warnings.first?.hasPrefix("gpu failed (") ?? false, "\(warnings)")
        XCTAssertTrue(warnings.first?.hasSuffix("; continuing on cpu, batch 2 again") ?? false, "\(warnings)")
        XCTAssertFalse(warnings.first?.contains("\n") ?? true)
    }

    func testAFailingStartMovesToTheFallbackAndTheLastFailureIsAnError() throws {
        let graph = try NetworkGraph(model: try model.get())
        let b = try batch()
        let oom = OpenCLError(-4, "clCreateBuffer", "allocating")
        var warnings: [String] = []
        let atStart = FailingBackend(CPUBackend(), failing: .makeBuffer, onCall: 1, error: oom, name: "gpu")
        let started = try InferenceRunner(graph: graph, prefix: atStart, tail: atStart, warn: { warnings.append($0) })
        XCTAssertEqual(started.deviceName, "cpu")
        XCTAssertEqual(warnings.count, 1)
        XCTAssertTrue(warnings.first?.contains("cannot start on gpu") ?? false, "\(warnings)")
        XCTAssertTrue(warnings.first?.contains("CL_MEM_OBJECT_ALLOCATION_FAILURE") ?? false, "\(warnings)")
        _ = try started.run(position: "batch 1") { try $0.evaluate(b) }

        // No fallback left: the failure is an error that says so.
        let lost = FailingBackend(CPUBackend(), failing: .convolutionForward, onCall: 1, name: "gpu")
        let alone = try InferenceRunner(graph: graph, prefix: lost, tail: lost, fallbacks: [], warn: { XCTFail("no warning: \($0)") })
        XCTAssertThrowsError(try alone.run(position: "batch 1") { try $0.predict(b.inputs) }) { error in
            XCTAssertEqual((error as? UpdraftError)?.kind, .device)
            XCTAssertTrue("\(error)".contains("gpu failed"), "\(error)")
            XCTAssertTrue("\(error)".contains("no other device is left"), "\(error)")
        }
    }

    /// Input the model cannot take is the caller's problem, on every device: no fallback, no warning.
    func testDataErrorsAreNotDeviceFailures() throws {
        let graph = try NetworkGraph(model: try model.get())
        let runner = try InferenceRunner(graph: graph, prefix: FailingBackend(CPUBackend(), name: "gpu"),
                                         tail: FailingBackend(CPUBackend(), name: "gpu"), warn: { XCTFail("no warning: \($0)") })
        XCTAssertThrowsError(try runner.run(position: "batch 1") { try $0.predict(Tensor(shape: [1, 3, 8, 8], data: Array(repeating: 0, count: 192))) }) {
            XCTAssertEqual(($0 as? UpdraftError)?.kind, .data, "\($0)")
        }
        XCTAssertEqual(runner.fallbacks.count, 1, "the fallback is still there")
    }
}
