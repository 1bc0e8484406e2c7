import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// Issue 26, item 1: concurrent update tasks admit memory against what their device has, through the
/// process's `DeviceMemoryLedger`. With an artificial capacity (the tests' override of host memory,
/// which the CPU backend and PoCL both use): four tasks that each need 40% run two at a time and end
/// with their solo models; a task needing 150% fails at once with its need and the capacity named,
/// while the others finish; a task cancelled while it waits ends cancelled.
final class TrainingMemoryAdmissionTests: XCTestCase {
    override func tearDown() {
        DeviceMemoryLedger.shared.overrideCapacity(nil, for: "host")
        super.tearDown()
    }

    /// The SqueezeShaped model in mini-batches of `batch`, each task with data and a learning rate of its own.
    func job(_ i: Int, batch: Int64 = 4) throws -> (CoreMLModel, BatchProvider, [ParameterKey: ParameterValue]) {
        (try SqueezeShaped.model(batch: batch), try SqueezeShaped.data(count: 12, seed: 11 + 17 * UInt64(i)),
         [.learningRate: .double(0.01 * Double(i + 1))])
    }

    /// Host memory a task of `job` plans to hold (what it reserves).
    func need(batch: Int64, _ device: (inout UpdateConfiguration) -> Void) throws -> UInt64 {
        var config = UpdateConfiguration()
        device(&config)
        let model = try SqueezeShaped.model(batch: batch)
        let planned = TrainingSession.plannedReplicas(batchSize: Int(batch), configuration: config)
        return try XCTUnwrap(TrainingSession.plannedMemory(planned, graph: try NetworkGraph(model: model), halfPrecisionPrefix: false)[DeviceMemoryLedger.host])
    }

    func task(_ i: Int, batch: Int64 = 4, slow: Bool, _ device: (inout UpdateConfiguration) -> Void) throws -> UpdateTask {
        let (model, data, parameters) = try job(i, batch: batch)
        var config = UpdateConfiguration()
        device(&config)
        config.parameters = parameters
        // A pause per mini-batch keeps the admitted tasks running while the others arrive.
        return UpdateTask(model: model, trainingData: data, configuration: config,
                          handlers: UpdateHandlers(progress: { if slow && $0.event == .miniBatchEnd { usleep(30_000) } }))
    }

    func bytes(_ task: UpdateTask) -> [UInt8] { (try? task.currentModel().serializedBytes()) ?? [] }

    static func cpu(_ config: inout UpdateConfiguration) { config.placement.backends = (CPUBackend(), CPUBackend()) }

    static func pocl() throws -> (inout UpdateConfiguration) -> Void {
        let context = try OpenCLTestSupport.context()
        return { let b = OpenCLBackend(context: context); $0.placement.backends = (b, b); $0.placement.fallbacks = [] }
    }

    func assertFourTasksOfFortyPercentRunTwoAtATime(_ device: (inout UpdateConfiguration) -> Void,
                                                    file: StaticString = #filePath, line: UInt = #line) throws {
        let alone = try (0..<4).map { i -> [UInt8] in
            let t = try task(i, slow: false, device)
            XCTAssertEqual(t.run().task.state, .completed, file: file, line: line)
            return bytes(t)
        }
        let each = try need(batch: 4, device)
        let capacity = each * 5 / 2
        DeviceMemoryLedger.shared.overrideCapacity(capacity, for: "host")
        let tasks = try (0..<4).map { try task($0, slow: true, device) }
        tasks.forEach { $0.resume() }
        tasks.forEach { $0.wait() }
        let stats = DeviceMemoryLedger.shared.statistics
        for (i, t) in tasks.enumerated() {
            XCTAssertEqual(t.state, .completed, "task \(i): \(t.wait().error.map { "\($0)" } ?? "")", file: file, line: line)
            XCTAssertTrue(bytes(t) == alone[i], "task \(i): the model differs from its solo run", file: file, line: line)
        }
        XCTAssertEqual(stats.peakAdmitted, 2, "40% each: two at a time (\(formatBytes(each)) of \(formatBytes(capacity)))", file: file, line: line)
        XCTAssertGreaterThanOrEqual(stats.waited, 1, "the others waited", file: file, line: line)
        XCTAssertLessThanOrEqual(stats.peakReserved["host"] ?? 0, capacity, "never more admitted than the capacity", file: file, line: line)
        XCTAssertEqual(stats.peakReserved["host"], 2 * each, file: file, line: line)
        XCTAssertTrue(tasks.contains { $0.warnings.contains { $0.contains("waits for") && $0.contains(formatBytes(each)) } },
                      "a waiting task says what it waits for: \(tasks.map(\.warnings))", file: file, line: line)
    }

    func testFourTasksOfFortyPercentRunTwoAtATimeOnTheCPU() throws {
        try assertFourTasksOfFortyPercentRunTwoAtATime(Self.cpu)
    }

    func testFourTasksOfFortyPercentRunTwoAtATimeOnPoCL() throws {
        try assertFourTasksOfFortyPercentRunTwoAtATime(try Self.pocl())
    }

    func assertATaskThatCanNeverFitFailsAlone(_ device: (inout UpdateConfiguration) -> Void,
                                              file: StaticString = #filePath, line: UInt = #line) throws {
        let big = try need(batch: 16, device), small = try need(batch: 4, device)
        let capacity = big * 2 / 3  // the big task needs 150%
        XCTAssertLessThanOrEqual(small, capacity / 2, "the small tasks fit two at a time", file: file, line: line)
        let alone = try (0..<3).map { i -> [UInt8] in
            let t = try task(i, slow: false, device)
            t.run()
            return bytes(t)
        }
        DeviceMemoryLedger.shared.overrideCapacity(capacity, for: "host")
        let tasks = try (0..<3).map { try task($0, slow: true, device) } + [try task(3, batch: 16, slow: true, device)]
        tasks.forEach { $0.resume() }
        tasks.forEach { $0.wait() }
        let failed = tasks[3].wait()
        XCTAssertEqual(failed.task.state, .failed, file: file, line: line)
        let message = "\(failed.error.map { "\($0)" } ?? "")"
        XCTAssertTrue(message.contains("needs an estimated \(formatBytes(big)) of host memory") && message.contains(formatBytes(capacity))
                      && message.contains("can never start"), message, file: file, line: line)
        XCTAssertEqual((failed.error as? UpdraftError)?.kind, .device, file: file, line: line)
        for i in 0..<3 {
            XCTAssertEqual(tasks[i].state, .completed, "task \(i)", file: file, line: line)
            XCTAssertTrue(bytes(tasks[i]) == alone[i], "task \(i): the model differs from its solo run", file: file, line: line)
        }
        XCTAssertLessThanOrEqual(DeviceMemoryLedger.shared.statistics.peakReserved["host"] ?? 0, capacity, file: file, line: line)
    }

    func testATaskThatCanNeverFitFailsAndTheOthersFinishOnTheCPU() throws {
        try assertATaskThatCanNeverFitFailsAlone(Self.cpu)
    }

    func testATaskThatCanNeverFitFailsAndTheOthersFinishOnPoCL() throws {
        try assertATaskThatCanNeverFitFailsAlone(try Self.pocl())
    }

    /// Room for one: the second waits, is cancelled while waiting, and ends cancelled at once; the
    /// first finishes, and the memory is all given back.
    func testATaskCancelledWhileWaitingEndsCancelled() throws {
        let each = try need(batch: 4, Self.cpu)
        DeviceMemoryLedger.shared.overrideCapacity(each * 3 / 2, for: "host")
        let first = try task(0, slow: true, Self.cpu), second = try task(1, slow: false, Self.cpu)
        first.resume()
        while DeviceMemoryLedger.shared.statistics.peakAdmitted < 1 { usleep(1000) }
        second.resume()
        while DeviceMemoryLedger.shared.statistics.waited < 1 { usleep(1000) }
        second.cancel()
        XCTAssertEqual(second.wait().task.state, .cancelled)
        XCTAssertEqual(first.wait().task.state, .completed)
        XCTAssertEqual(DeviceMemoryLedger.shared.statistics.peakAdmitted, 1)
        // Everything given back: a task needing the whole capacity starts.
        DeviceMemoryLedger.shared.overrideCapacity(each, for: "host")
        XCTAssertEqual(try task(2, slow: false, Self.cpu).run().task.state, .completed)
    }
}
