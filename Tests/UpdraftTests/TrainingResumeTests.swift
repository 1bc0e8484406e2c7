import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// Exact resume: a run stopped after a checkpoint and resumed from it ends with the weights, losses
/// and history of a run never interrupted, bit for bit; a checkpoint that does not belong to the
/// model or data, or a run that would change its shape, is refused with a named error.
final class TrainingResumeTests: FolderTestCase {
    /// What a run produced: every mini-batch's loss, the history (without timings) and the weights.
    struct Outcome: Equatable {
        var losses: [Double] = []
        var history: [TrainingMetrics] = []
        var weights: [String: [Float]] = [:]
        var learningRates: [Double] = []
    }

    static let trained = ["fire2/expand1x1", "fire2/expand3x3", "conv10", "fullyconnected0"]

    /// Trains with the SqueezeNet-shaped model: a handler anneals the learning rate at every epoch's
    /// end (resume(withParameters:)), and cancels once `stopAfter` mini-batches are done.
    func train(_ make: (UpdateHandlers) throws -> UpdateTask, stopAfter: Int? = nil) throws -> (Outcome, UpdateTask) {
        let recorded = Locked((outcome: Outcome(), steps: 0))
        let handlers = UpdateHandlers(progress: { ctx in
            switch ctx.event {
            case .miniBatchEnd:
                let steps = recorded.mutate { r in
                    r.outcome.losses.append(ctx.metrics!.lossValue)
                    r.outcome.learningRates.append(ctx.parameters.learningRate)
                    r.steps += 1
                    return r.steps
                }
                if steps == stopAfter { ctx.task.cancel() }
            case .epochEnd:
                try? ctx.task.resume(withParameters: [.learningRate: .double(ctx.parameters.learningRate * 0.5)])
            default: break
            }
        })
        let task = try make(handlers)
        let final = task.run()
        XCTAssertNil(final.error)
        var outcome = recorded.value.outcome
        for name in Self.trained {
            let (w, b) = try task.weights(ofLayer: name)
            outcome.weights[name] = w.data + (b?.data ?? [])
        }
        outcome.history = task.history.epochs.map { m in
            var m = m
            m.seconds = nil; m.examplesPerSecond = nil
            return m
        }
        return (outcome, task)
    }

    /// Two epochs of four mini-batches, flips, a validation set; `devices` says where.
    func configuration(_ devices: (inout UpdateConfiguration) -> Void) -> UpdateConfiguration {
        var config = UpdateConfiguration()
        devices(&config)
        config.data.augmentation = ImageAugmentation(horizontalFlip: true, verticalFlip: true, seed: 9)
                config.data.validationData = try? SqueezeShaped.data(count: 5, seed: 99)
        return config
    }

    /// Stops after `stopAfter` of the 8 steps with checkpoints every `every` mini-batches, or every
    /// epoch when `every` is nil (the last written after step `saved`: the steps after it are lost,
    /// as when a process is killed), resumes from the checkpoint on disk, and compares with a run
    /// never stopped.
    func assertResumeIsExact(_ devices: (inout UpdateConfiguration) -> Void, optimizer: OptimizerKind, stopAfter: Int,
                             every: Int?, saved: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let model = try SqueezeShaped.model(optimizer: optimizer, batch: 4)
        let data = try SqueezeShaped.data(count: 15)
        let (expected, _) = try train { UpdateTask(model: model, trainingData: data, configuration: configuration(devices), handlers: $0) }
        XCTAssertEqual(expected.losses.count, 8, file: file, line: line)

        let checkpoint = folder.appendingPathComponent("run.mlmodel")
        var config = configuration(devices)
        config.checkpoints.everyMiniBatches = every
        config.checkpoints.everyEpochs = every == nil ? 1 : nil
        config.checkpoints.url = checkpoint
        let (stopped, _) = try train({ UpdateTask(model: model, trainingData: data, configuration: config, handlers: $0) }, stopAfter: stopAfter)
        XCTAssertEqual(stopped.losses.count, stopAfter, file: file, line: line)
        XCTAssertEqual(try TrainingCheckpoint.read(forModel: checkpoint).position.steps, saved, file: file, line: line)

        var resumedConfig = UpdateConfiguration()
        devices(&resumedConfig)
        resumedConfig.data.validationData = try SqueezeShaped.data(count: 5, seed: 99)
        let (resumed, task) = try train { try UpdateTask(resumingFrom: checkpoint, trainingData: data, configuration: resumedConfig, handlers: $0) }
        XCTAssertEqual(task.state, .completed, file: file, line: line)
        assertSameWeights(resumed, expected, file: file, line: line)
        XCTAssertEqual(resumed.losses, Array(expected.losses[saved...]), "the steps after the checkpoint", file: file, line: line)
        XCTAssertEqual(resumed.learningRates, Array(expected.learningRates[saved...]), "annealed rates carry over", file: file, line: line)
        XCTAssertEqual(resumed.history, expected.history, "the history, epochs before the checkpoint included", file: file, line: line)
    }

    /// Bit for bit: the same floats in every trained tensor (the message gives the largest difference).
    func assertSameWeights(_ a: Outcome, _ b: Outcome, file: StaticString = #filePath, line: UInt = #line) {
        var worst: Float = 0
        for (name, w) in a.weights {
            guard let v = b.weights[name], v.count == w.count else { return XCTFail("\(name) is missing or differs in size", file: file, line: line) }
            for (x, y) in zip(w, v) { worst = max(worst, abs(x - y)) }
        }
        XCTAssertTrue(a.weights == b.weights, "final weights differ from the uninterrupted run's by up to \(worst)", file: file, line: line)
    }

    /// One backend for the whole network.
    static func one(_ make: @escaping () -> Backend) -> (inout UpdateConfiguration) -> Void {
        { config in let b = make(); config.placement.backends = (b, b) }
    }

    /// Image files through pixel upload, stopped after 3 steps and resumed from the checkpoint, end
    /// like a run on the float path never stopped.
    func testImageFilesResumeThroughPixelUploadLikeAnUnstoppedFloatRun() throws {
        let images = try DataTestFolder()
        let model = try SqueezeShaped.model(batch: 4, scaler: ImageScaler(channelScale: 0.02, redBias: -1, greenBias: -2, blueBias: 0.5))
        let data = try ModelDataset(model: model, path: try DataStreamingTests.writeImages(images, count: 15)).provider
        var floats = UpdateConfiguration()
        floats.placement.backends = (CPUBackend(), CPUBackend())
        floats.data.augmentation = ImageAugmentation(horizontalFlip: true, verticalFlip: true, seed: 9)
        floats.pixelUpload = false
        let (expected, _) = try train { UpdateTask(model: model, trainingData: data, configuration: floats, handlers: $0) }
        let checkpoint = folder.appendingPathComponent("images.mlmodel")
        var config = floats
        config.pixelUpload = true
        config.checkpoints.everyMiniBatches = 1
        config.checkpoints.url = checkpoint
        _ = try train({ UpdateTask(model: model, trainingData: data, configuration: config, handlers: $0) }, stopAfter: 3)
        var resumedConfig = UpdateConfiguration()
        resumedConfig.placement.backends = (CPUBackend(), CPUBackend())
        let (resumed, task) = try train { try UpdateTask(resumingFrom: checkpoint, trainingData: data, configuration: resumedConfig, handlers: $0) }
        XCTAssertEqual(task.state, .completed)
        XCTAssertTrue(task.configuration.pixelUpload)
        assertSameWeights(resumed, expected)
        XCTAssertEqual(resumed.losses, Array(expected.losses[3...]))
    }

    func testSGDWithMomentumResumesBitIdenticallyOnTheCPU() throws {
        // Steps 1-4 are epoch 1: stopped in epoch 2 with the checkpoint after step 6, mid-epoch.
        try assertResumeIsExact(Self.one { CPUBackend() }, optimizer: .sgd, stopAfter: 7, every: 3, saved: 6)
    }

    func testAdamResumesBitIdenticallyOnTheReferenceBackendFromAnEpochEnd() throws {
        // Adam's step count and both moments; the checkpoint written at the end of epoch 1 (after
        // validation and the handler's annealing).
        try assertResumeIsExact(Self.one { ReferenceBackend() }, optimizer: .adam, stopAfter: 6, every: nil, saved: 4)
    }

    func testAdamResumesBitIdenticallyOnOpenCL() throws {
        let context = try OpenCLTestSupport.context()
        // The checkpoint after epoch 1's last mini-batch, before its end: the resumed run validates
        // and ends epoch 1 first.
        try assertResumeIsExact(Self.one { OpenCLBackend(context: context) }, optimizer: .adam, stopAfter: 5, every: 4, saved: 4)
    }

    /// The fp16 feature cache rounds an example's features from the step that computes them, so a
    /// resumed run (whose cache starts empty) reads the same features as the uninterrupted one.
    func testTheHalfPrecisionFeatureCacheResumesBitIdentically() throws {
        try assertResumeIsExact({ $0.placement.backends = (CPUBackend(), CPUBackend()); $0.featureCache.halfPrecision = true },
                                optimizer: .sgd, stopAfter: 7, every: 3, saved: 6)
    }

    func testDataParallelResumesBitIdentically() throws {
        // Two CPU replicas with unequal shares (slices of 3 and 1 of each mini-batch of 4).
        try assertResumeIsExact({ $0.placement.dataParallel = DataParallelism(replicas: [CPUBackend(), CPUBackend()], shares: [3, 1]) },
                                optimizer: .sgd, stopAfter: 6, every: 1, saved: 6)
    }

    /// A cancelled task writes where it stopped; the resumed run completes the uninterrupted one.
    func testACancelledTaskCheckpointsWhereItStopped() throws {
        let model = try SqueezeShaped.model(optimizer: .adam, batch: 4), data = try SqueezeShaped.data(count: 15)
        let config = configuration(Self.one { CPUBackend() })
        let (expected, _) = try train { UpdateTask(model: model, trainingData: data, configuration: config, handlers: $0) }
        let (_, stopped) = try train({ UpdateTask(model: model, trainingData: data, configuration: config, handlers: $0) }, stopAfter: 2)
        XCTAssertEqual(stopped.state, .cancelled)
        let checkpoint = folder.appendingPathComponent("stopped.mlmodel")
        try stopped.writeCheckpoint(to: checkpoint)
        XCTAssertNoThrow(try CoreMLModel(contentsOf: checkpoint), "the checkpoint is a plain Core ML model")
        var again = UpdateConfiguration()
        again.placement.backends = (CPUBackend(), CPUBackend())
        again.data.validationData = config.data.validationData
        let (resumed, _) = try train { try UpdateTask(resumingFrom: checkpoint, trainingData: data, configuration: again, handlers: $0) }
        assertSameWeights(resumed, expected)
        XCTAssertEqual(resumed.losses, Array(expected.losses[2...]))
    }

    // MARK: What a checkpoint belongs to

    /// A checkpoint after 3 steps of the SGD model on 15 examples; returns its model file.
    func smallCheckpoint() throws -> URL {
        let url = folder.appendingPathComponent("small.mlmodel")
        var config = UpdateConfiguration()
        config.checkpoints.everyMiniBatches = 3
        config.checkpoints.url = url
        _ = try train({ UpdateTask(model: try SqueezeShaped.model(), trainingData: try SqueezeShaped.data(count: 15),
                                   configuration: config, handlers: $0) }, stopAfter: 4)
        return url
    }

    func resumeError(_ url: URL, data: BatchProvider? = nil, model: CoreMLModel? = nil,
                     configure: (inout UpdateConfiguration) -> Void = { _ in }) throws -> String {
        var config = UpdateConfiguration()
        configure(&config)
        let task: UpdateTask
        do {
            task = try UpdateTask(resumingFrom: url, trainingData: try data ?? SqueezeShaped.data(count: 15), configuration: config)
        } catch {
            return "\(error)"
        }
        var c = task.configuration
        if let model {
            c.checkpoints.resumeFrom = task.configuration.checkpoints.resumeFrom
            let other = UpdateTask(model: model, trainingData: task.trainingData, configuration: c)
            return other.run().error.map { "\($0)" } ?? "no error"
        }
        return task.run().error.map { "\($0)" } ?? "no error"
    }

    func testACheckpointIsRefusedForAnotherModelOrOtherData() throws {
        let url = try smallCheckpoint()
        // Same layers, other frozen weights (another initialization seed would differ everywhere).
        var other = try SqueezeShaped.model()
        try other.setWeights(Tensor(shape: try other.weights(ofLayer: "conv1").shape, uniformIn: -1...1, seed: 1), ofLayer: "conv1")
        XCTAssertTrue(try resumeError(url, model: other).contains("belongs to another model"))
        XCTAssertTrue(try resumeError(url, data: try SqueezeShaped.data(count: 14)).contains("has 14 examples, the checkpoint's run had 15"))
        XCTAssertTrue(try resumeError(url, data: try SqueezeShaped.data(count: 15, seed: 12)).contains("contents of the examples differ"))
        let relabelled = try ArrayBatchProvider(examples: (0..<15).map { i in
            var e = try SqueezeShaped.data(count: 15).example(at: i)
            e.target = .classIndex((i + 1) % SqueezeShaped.classes)
            return e
        })
        XCTAssertTrue(try resumeError(url, data: relabelled).contains("labels (targets) of the examples differ"))
        XCTAssertTrue(try resumeError(url) { $0.parameters = [.seed: .int(4)] }.contains("seed is 3 in the checkpoint"))
        XCTAssertEqual(try resumeError(url) { $0.parameters = [.learningRate: .double(0.01)] }, "no error",
                       "optimizer settings may change, as with resume(withParameters:)")
        // The model it started from has the checkpoint's fingerprint too.
        XCTAssertEqual(try resumeError(url, model: try SqueezeShaped.model()), "no error")
    }

    func testAMissingOrDamagedStateIsNamed() throws {
        let url = try smallCheckpoint()
        let state = TrainingCheckpoint.url(forModel: url)
        XCTAssertEqual(state.lastPathComponent, "small.resume")
        var bytes = try Data(contentsOf: state)
        bytes[bytes.count / 2] ^= 0x40
        try bytes.write(to: state)
        let damaged = try resumeError(url)
        XCTAssertTrue(damaged.contains("resume state is damaged: its checksum does not match"), damaged)
        try Data(bytes.prefix(100)).write(to: state)
        XCTAssertTrue(try resumeError(url).contains("damaged"))
        try Data("hello".utf8).write(to: state)
        XCTAssertTrue(try resumeError(url).contains("not an Updraft resume state"))
        try FileManager.default.removeItem(at: state)
        let missing = try resumeError(url)
        XCTAssertTrue(missing.contains("small.mlmodel has no resume state: small.resume is missing"), missing)
    }

    /// Killed between writing the state and the model: the model file is a checkpoint older than the
    /// state. The state holds the trained tensors, so the run still continues from the state exactly.
    func testAStateNewerThanItsModelFileStillResumesExactly() throws {
        let model = try SqueezeShaped.model(), data = try SqueezeShaped.data(count: 15)
        let url = folder.appendingPathComponent("torn.mlmodel")
        var config = UpdateConfiguration()
        config.checkpoints.everyMiniBatches = 2
        config.checkpoints.url = url
        let (expected, _) = try train { UpdateTask(model: model, trainingData: data, handlers: $0) }
        _ = try train({ UpdateTask(model: model, trainingData: data, configuration: config, handlers: $0) }, stopAfter: 5)
        try model.write(to: url)   // the model file as it was before any step
        let (resumed, _) = try train { try UpdateTask(resumingFrom: url, trainingData: data, handlers: $0) }
        assertSameWeights(resumed, expected)
    }
}
