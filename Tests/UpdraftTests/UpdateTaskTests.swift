import XCTest
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftData
@testable import UpdraftTraining

/// Core ML's update-task semantics, and where Updraft goes past them.
final class UpdateTaskTests: XCTestCase {
    func golden(_ name: String = "branches_sgd") throws -> (GoldenRun, CoreMLModel, ArrayBatchProvider) {
        let (g, m) = try GoldenRun.load(name)
        return (g, m, try ArrayBatchProvider(examples: g.examples))
    }

    func testEventsInOrderAndCompletion() throws {
        let (_, model, data) = try golden()
        let events = Locked<[String]>([])
        let completed = Locked<UpdateTaskState?>(nil)
        let task = UpdateTask(model: model, trainingData: data, handlers: UpdateHandlers(
            progress: { ctx in
                switch ctx.event {
                case .trainingBegin: events.append("begin")
                case .miniBatchEnd: events.append("batch\(ctx.metrics!.epochIndex).\(ctx.metrics!.miniBatchIndex!)")
                case .epochEnd: events.append("epoch\(ctx.metrics!.epochIndex)")
                default: events.append("?")
                }
                XCTAssertEqual(ctx.task.state, .suspended, "handlers see a suspended task, as in Core ML")
            },
            completion: { ctx in completed.mutate { $0 = ctx.task.state } }))
        task.resume()
        let final = task.wait()
        XCTAssertNil(final.error)
        XCTAssertEqual(events.value, ["begin", "batch0.0", "batch0.1", "epoch0", "batch1.0", "batch1.1", "epoch1"])
        XCTAssertEqual(completed.value, .completed)
        XCTAssertEqual(task.history.epochs.count, 2)
    }

    func testEventMaskFiltersHandlers() throws {
        let (_, model, data) = try golden()
        let count = Locked(0)
        let task = UpdateTask(model: model, trainingData: data,
                              handlers: UpdateHandlers(events: [.epochEnd], progress: { _ in count.mutate { $0 += 1 } }))
        task.run()
        XCTAssertEqual(count.value, 2)
    }

    func testEpochMetricsReportMeanAndLastLossAndAccuracy() throws {
        let (golden, model, data) = try golden()
        var config = UpdateConfiguration()
        config.data.validationData = data
        let recorded = Locked<[TrainingMetrics]>([])
        let task = UpdateTask(model: model, trainingData: data, configuration: config,
                              handlers: UpdateHandlers(events: [.epochEnd], progress: { recorded.append($0.metrics!) }))
        XCTAssertEqual(task.run().task.state, .completed)
        let epochs = recorded.value
        XCTAssertEqual(epochs[0].lossValue, golden.losses[1], accuracy: 1e-5, "lossValue is the last batch's, as Core ML")
        XCTAssertEqual(epochs[0].meanLoss!, (golden.losses[0] + golden.losses[1]) / 2, accuracy: 1e-5)
        XCTAssertNotNil(epochs[0].trainingAccuracy)
        XCTAssertNotNil(epochs[1].validationLoss)
        XCTAssertNotNil(epochs[1].validationAccuracy)
    }

    func testWrapRoundBatchingAndShortLastBatch() {
        let plan = EpochPlan(exampleCount: 10, batchSize: 4, epoch: 0, shuffle: false, seed: 0)
        XCTAssertEqual(plan.batches, [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]])
        let short = EpochPlan(exampleCount: 10, batchSize: 4, epoch: 0, shuffle: false, seed: 0, shortLastBatch: true)
        XCTAssertEqual(short.batches.last, [8, 9])
        let shuffled = EpochPlan(exampleCount: 10, batchSize: 4, epoch: 0, shuffle: true, seed: 3)
        XCTAssertEqual(Set(shuffled.batches.flatMap { $0 }.prefix(10)), Set(0..<10), "every example once per epoch")
        XCTAssertEqual(shuffled.batches, EpochPlan(exampleCount: 10, batchSize: 4, epoch: 0, shuffle: true, seed: 3).batches)
        XCTAssertNotEqual(shuffled.batches, EpochPlan(exampleCount: 10, batchSize: 4, epoch: 1, shuffle: true, seed: 3).batches)
    }

    func testOverridesOutsideAllowedValuesAreRefused() throws {
        let (_, model, data) = try golden()
        for (key, value, allowed) in [(ParameterKey.miniBatchSize, ParameterValue.int(3), "{4}"),
                                      (.learningRate, .double(5), "[0, 1]"), (.epochs, .int(7), "{2}")] {
            var config = UpdateConfiguration()
            config.parameters = [key: value]
            let ctx = UpdateTask(model: model, trainingData: data, configuration: config).run()
            XCTAssertEqual(ctx.task.state, .failed)
            let message = "\(ctx.error.map { "\($0)" } ?? "")"
            XCTAssertTrue(message.contains("\(key)") && message.contains(allowed), message)
        }
    }

    func testResumeWithParametersChangesLearningRate() throws {
        let (_, model, data) = try golden()
        // Expected: first step at the model's 0.1, the remaining three at 0.02.
        let graph = try NetworkGraph(model: model)
        let executor = try Executor(training: try TrainingGraph(graph: graph), optimizer: .sgd, backend: ReferenceBackend())
        var p = try TrainingParameters(optimizer: .sgd, hyperparameters: graph.hyperparameters)
        for (step, start) in [0, 4, 0, 4].enumerated() {
            if step == 1 { try p.set(.learningRate, .double(0.02), descriptions: graph.hyperparameters) }
            _ = try executor.trainStep(try data.batch(at: start..<start + 4), parameters: p)
        }
        let seenRates = Locked<[Double]>([])
        let task = UpdateTask(model: model, trainingData: data, handlers: UpdateHandlers(events: [.miniBatchEnd], progress: { ctx in
            seenRates.append(ctx.parameters.learningRate)
            if ctx.metrics!.miniBatchIndex == 0 && ctx.metrics!.epochIndex == 0 {
                var refused = 0
                do { try ctx.task.resume(withParameters: [.miniBatchSize: .int(8)]) } catch { refused += 1 }
                do { try ctx.task.resume(withParameters: [.learningRate: .double(3)]) } catch { refused += 1 }
                XCTAssertEqual(refused, 2, "mini-batch size is fixed; 3 is outside the model's range")
                do { try ctx.task.resume(withParameters: [.learningRate: .double(0.02)]) } catch { XCTFail("\(error)") }
            }
        }))
        XCTAssertEqual(task.run().task.state, UpdateTaskState.completed)
        XCTAssertEqual(seenRates.value, [0.1, 0.02, 0.02, 0.02])
        // The reference computes in Double, the task on the device scheduled: equal within float rounding
        // (a step at 0.1 instead of 0.02 moves the weights by ~1e-2).
        for (a, b) in zip(try task.weights(ofLayer: "fc").weights.data, try executor.weights(ofLayer: "fc").weights.data) {
            XCTAssertEqual(a, b, accuracy: 1e-6)
        }
    }

    func testCancelCallsCompletionWithPartialModel() throws {
        let (_, model, data) = try golden()
        let completionState = Locked<UpdateTaskState?>(nil)
        let completionModel = Locked<CoreMLModel?>(nil)
        let task = UpdateTask(model: model, trainingData: data, handlers: UpdateHandlers(
            progress: { ctx in if ctx.event == .miniBatchEnd { ctx.task.cancel() } },
            completion: { ctx in completionState.mutate { $0 = ctx.task.state }; completionModel.mutate { $0 = try? ctx.model() } }))
        task.resume()
        task.wait()
        XCTAssertEqual(completionState.value, .cancelled)
        XCTAssertEqual(task.history.epochs.count, 0, "stopped after the first mini-batch")
        // The completion's model holds one step of training, not the original weights.
        let graph = try NetworkGraph(model: model)
        let executor = try Executor(training: try TrainingGraph(graph: graph), optimizer: .sgd, backend: ReferenceBackend())
        _ = try executor.trainStep(try data.batch(at: 0..<4),
                                   parameters: try TrainingParameters(optimizer: .sgd, hyperparameters: graph.hyperparameters))
        XCTAssertEqual(try completionModel.value!.weights(ofLayer: "fc"), try executor.weights(ofLayer: "fc").weights)
        XCTAssertNotEqual(try completionModel.value!.weights(ofLayer: "fc"), try model.weights(ofLayer: "fc"))
    }

    func testSameSeedSameLossesAndFeatureCacheChangesNothing() throws {
        let (_, model, data) = try golden()
        func losses(seed: Int, cache: Bool, flips: Bool = false) -> [Double] {
            var config = UpdateConfiguration()
            config.parameters = [.shuffle: .bool(true), .seed: .int(Int64(seed))]
            config.featureCache.enabled = cache
            if flips { config.data.augmentation = ImageAugmentation(horizontalFlip: true, verticalFlip: true, seed: 9) }
            let out = Locked<[Double]>([])
            let task = UpdateTask(model: model, trainingData: data, configuration: config,
                                  handlers: UpdateHandlers(events: [.miniBatchEnd], progress: { out.append($0.metrics!.lossValue) }))
            XCTAssertEqual(task.run().task.state, .completed)
            return out.value
        }
        let a = losses(seed: 5, cache: true)
        XCTAssertEqual(a, losses(seed: 5, cache: true), "same seed, same losses")
        XCTAssertEqual(a, losses(seed: 5, cache: false), "the feature cache gives identical results")
        XCTAssertNotEqual(a, losses(seed: 6, cache: true))
        XCTAssertEqual(losses(seed: 5, cache: true, flips: true), losses(seed: 5, cache: false, flips: true))
    }

    func testWriteIsAtomicAndKeepsHistory() throws {
        let (_, model, data) = try golden()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-task-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var config = UpdateConfiguration()
        config.checkpoints.everyEpochs = 1
        config.checkpoints.url = dir.appendingPathComponent("ckpt.mlmodel")
        let task = UpdateTask(model: model, trainingData: data, configuration: config)
        XCTAssertEqual(task.run().task.state, .completed)
        let out = dir.appendingPathComponent("out.mlmodel")
        try task.write(to: out)
        let reread = try CoreMLModel(contentsOf: out)
        XCTAssertEqual(try reread.weights(ofLayer: "conv2b"), try task.weights(ofLayer: "conv2b").weights)
        XCTAssertEqual(try TrainingHistory.read(from: TrainingHistory.url(forModel: out)).epochs.count, 2)
        XCTAssertTrue(FileManager.default.fileExists(atPath: config.checkpoints.url!.path))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".tmp") }
        XCTAssertEqual(leftovers, [])
    }
}
