import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftData
@testable import UpdraftTraining

/// `for try await event in task.events` and `try await task.run()` beside Core ML's handlers.
final class UpdateTaskAsyncTests: XCTestCase {
    private func task(_ configure: (inout UpdateConfiguration) -> Void = { _ in }) throws -> UpdateTask {
        let (golden, model) = try GoldenRun.load("branches_sgd")
        var config = UpdateConfiguration()
        let reference = ReferenceBackend()
        config.placement.backends = (reference, reference)
        configure(&config)
        return UpdateTask(model: model, trainingData: try ArrayBatchProvider(examples: golden.examples), configuration: config)
    }

    func testAwaitingRunReturnsTheModelAndTheEventsArriveInOrder() async throws {
        let trained = try task()
        let events = trained.events
        let collector = Task { () -> [String] in
            var seen: [String] = []
            for try await e in events {
                switch e.event {
                case .trainingBegin: seen.append("begin")
                case .miniBatchEnd: seen.append("batch\(e.metrics!.epochIndex).\(e.metrics!.miniBatchIndex!)")
                case .epochEnd: seen.append("epoch\(e.metrics!.epochIndex)")
                default: seen.append("?")
                }
            }
            return seen
        }
        let model = try await trained.run()
        let seen = try await collector.value
        XCTAssertEqual(seen, ["begin", "batch0.0", "batch0.1", "epoch0", "batch1.0", "batch1.1", "epoch1"])
        // The same training run synchronously gives the same weights.
        let synchronous = try task()
        XCTAssertEqual(synchronous.run().task.state, .completed)
        for layer in model.updatableLayerNames {
            XCTAssertEqual(try model.weights(ofLayer: layer), try synchronous.currentModel().weights(ofLayer: layer))
        }
        // Subscribing after the end gives a sequence that is already over.
        for try await _ in trained.events { XCTFail("no events after the task ended") }
    }

    func testAFailedTaskThrowsFromRunAndFromItsEvents() async throws {
        let failing = try task { $0.placement.backends = nil; $0.placement.preferredDevice = .openCL(index: 9_999) }
        let events = failing.events
        do {
            _ = try await failing.run()
            XCTFail("run() should throw")
        } catch {
            XCTAssertTrue("\(error)".contains("9999"), "\(error)")
        }
        do {
            for try await _ in events {}
            XCTFail("the events should end with the task's error")
        } catch {
            XCTAssertTrue("\(error)".contains("9999"), "\(error)")
        }
    }

    func testCancellingTheAwaitingSwiftTaskCancelsTraining() async throws {
        let (golden, model) = try GoldenRun.load("branches_sgd")
        var config = UpdateConfiguration()
        let reference = ReferenceBackend()
        config.placement.backends = (reference, reference)
        // 2 epochs of 2 mini-batches; the first mini-batch's handler holds training until the
        // cancellation arrives, so the test does not race the (tiny) training run.
        let handlerSawTheCancel = Locked<[Bool]>([])
        let long = UpdateTask(model: model, trainingData: try ArrayBatchProvider(examples: golden.examples),
                              configuration: config, handlers: UpdateHandlers(events: [.miniBatchEnd], progress: { ctx in
            let deadline = Date().addingTimeInterval(30)
            while ctx.task.state != .cancelling, Date() < deadline { usleep(1000) }
            handlerSawTheCancel.append(ctx.task.state == .cancelling)
        }))
        let events = long.events
        let runner = Task { try await long.run() }
        var batches = 0
        for try await e in events where e.event == .miniBatchEnd {
            batches += 1
            if batches == 1 { runner.cancel() }
        }
        switch await runner.result {
        case .success: XCTFail("a cancelled run throws")
        case let .failure(error): XCTAssertEqual((error as? UpdraftError)?.kind, .cancelled, "\(error)")
        }
        XCTAssertEqual(long.state, .cancelled)
        XCTAssertEqual(batches, 1, "training stopped after the mini-batch during which it was cancelled")
        // A cancel that arrives before the handler runs (the events stream sees the mini-batch first)
        // is not hidden from the handler behind `.suspended`.
        XCTAssertEqual(handlerSawTheCancel.value, [true], "the handler sees the task cancelling")
        XCTAssertNoThrow(try long.currentModel(), "the model trained so far is kept")
    }
}
