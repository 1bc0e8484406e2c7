import Foundation
import XCTest
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftPlacement
@testable import UpdraftData
@testable import UpdraftTraining

/// Library callers get the scheduler as the CLI does: `UpdateConfiguration.placement.computeUnits` (Core ML's
/// `MLModelConfiguration.computeUnits`), a typed device pin and data-parallel mode; `backends` stays an
/// expert override.
final class UpdateTaskComputeUnitsTests: XCTestCase {
    private func train(_ configure: (inout UpdateConfiguration) -> Void) throws -> (UpdateContext, [TrainingMetrics], [String]) {
        let (golden, model) = try GoldenRun.load("branches_sgd")
        var config = UpdateConfiguration()
        configure(&config)
        let epochs = Locked<[TrainingMetrics]>([]), warnings = Locked<[String]>([])
        let task = UpdateTask(model: model, trainingData: try ArrayBatchProvider(examples: golden.examples),
                              configuration: config, handlers: UpdateHandlers(
                                events: [.epochEnd], progress: { epochs.append($0.metrics!) }, warning: { warnings.append($0) }))
        return (task.run(), epochs.value, warnings.value)
    }

    func testTheDefaultIsCoreMLsAll() {
        XCTAssertEqual(UpdateConfiguration().placement.computeUnits, .all)
        XCTAssertNil(UpdateConfiguration().placement.backends)
    }

    func testWithoutBackendsATaskRunsWhereTheSchedulerPutsIt() throws {
        let (final, epochs, _) = try train { $0.placement.computeUnits = .cpuOnly; $0.placement.dataParallelMode = .off }
        XCTAssertEqual(final.task.state, .completed, "\(final.error.map { "\($0)" } ?? "")")
        XCTAssertEqual(epochs.map(\.device), ["cpu", "cpu"], "cpuOnly trains on the fast CPU path, not the reference")
    }

    func testAPinnedDeviceIsUsedAndExplicitBackendsStillOverride() throws {
        let context = try OpenCLTestSupport.context()
        let (pinned, epochs, _) = try train { $0.placement.preferredDevice = .openCL(index: context.device.info.index) }
        XCTAssertEqual(pinned.task.state, .completed, "\(pinned.error.map { "\($0)" } ?? "")")
        XCTAssertEqual(epochs.first?.device, "opencl:\(context.device.info.name)")
        let (refused, _, _) = try train {
            $0.placement.computeUnits = .cpuOnly
            $0.placement.preferredDevice = .openCL(index: context.device.info.index)
        }
        XCTAssertEqual(refused.task.state, .failed, "an OpenCL pin outside cpuOnly is refused, as with --device")
        XCTAssertTrue("\(refused.error!)".contains("cpuOnly"), "\(refused.error!)")
        let reference = ReferenceBackend()
        let (_, overridden, _) = try train { $0.placement.computeUnits = .cpuOnly; $0.placement.backends = (reference, reference) }
        XCTAssertEqual(overridden.first?.device, "reference")
    }

    func testAPinToAMissingDeviceFailsTheTaskWithANamedError() throws {
        let (final, _, _) = try train { $0.placement.preferredDevice = .openCL(index: 9_999) }
        XCTAssertEqual(final.task.state, .failed)
        let message = "\(final.error.map { "\($0)" } ?? "")"
        XCTAssertTrue(message.contains("9999") && message.contains("does not exist"), message)
    }

    func testInferenceIsScheduledTheSameWay() throws {
        let (golden, model) = try GoldenRun.load("branches_sgd")
        let graph = try NetworkGraph(model: model)
        let runner = try InferenceRunner(graph: graph, computeUnits: .cpuOnly, batchSize: 4, warn: { XCTFail("no warning expected: \($0)") })
        XCTAssertEqual(runner.deviceName, "cpu")
        let batch = try ArrayBatchProvider(examples: golden.examples).batch(at: 0..<2)
        let onCPU = try runner.run(position: "batch") { try $0.predict(batch.inputs) }
        let reference = try InferenceRunner(graph: graph, prefix: ReferenceBackend(), tail: ReferenceBackend(), warn: { _ in })
        let expected = try reference.run(position: "batch") { try $0.predict(batch.inputs) }
        XCTAssertEqual(onCPU.shape, expected.shape)
        for (a, b) in zip(onCPU.data, expected.data) { XCTAssertEqual(a, b, accuracy: 1e-5) }
    }

    func testDevicePinsSpellTheirDeviceOption() {
        XCTAssertEqual(DevicePin.host.optionText, "cpu")
        XCTAssertEqual(DevicePin.openCL(index: 3).optionText, "3")
    }
}
