import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// Issue 26, item 3: a run the non-finite guard stopped keeps a resume point at its last finite
/// step (weights, optimizer state, position, parameters in force, history), and a run resumed from
/// it — with the poisoned example fixed, or skipping the bad mini-batch — ends bit for bit like a run
/// that never met the NaN, on one CPU, on OpenCL (PoCL) and under data parallelism.
final class HardeningNonFiniteResumeTests: FolderTestCase {
    /// x [3] -> fc [2], mean squared error, SGD with momentum (a velocity to carry), mini-batches of
    /// 2 over 10 examples (5 per epoch), 3 epochs, shuffled.
    static func model() throws -> CoreMLModel {
        var r = try ModelBuilder.denseRegressor()
        r.setOptimizer(.sgd(learningRate: 0.05, miniBatchSize: 2, momentum: 0.9))
        r.setEpochs(3)
        r.setShuffle(true, seed: 5)
        return try r.build()
    }

    static let count = 10
    /// The example that turns NaN: not one of the four whose inputs the data fingerprint reads
    /// (0, 3, 6, 9), so the fixed data is still the checkpoint's.
    static let poisoned = 4

    static func clean() throws -> ArrayBatchProvider {
        try ArrayBatchProvider(examples: (0..<count).map { i in
            TrainingExample(input: Tensor(shape: [3, 1, 1], uniformIn: -1...1, seed: 40 + UInt64(i)),
                            target: .values(Tensor(shape: [2], uniformIn: -1...1, seed: 80 + UInt64(i))))
        })
    }

    /// The clean data, except that example `poisoned` reads as NaN from its `fromRead`-th read on
    /// (without the feature cache each epoch reads an example once: 2 poisons it from epoch 2).
    final class PoisonedData: BatchProvider, @unchecked Sendable {
        let base: ArrayBatchProvider
        let fromRead: Int
        private let reads = Locked(0)
        init(fromRead: Int) throws { base = try HardeningNonFiniteResumeTests.clean(); self.fromRead = fromRead }
        var count: Int { base.count }
        func target(at index: Int) throws -> TrainingExample.Target { try base.target(at: index) }
        func example(at index: Int) throws -> TrainingExample {
            var e = try base.example(at: index)
            guard index == HardeningNonFiniteResumeTests.poisoned else { return e }
            if reads.mutate({ $0 += 1; return $0 }) >= fromRead { e.input.data[1] = .nan }
            return e
        }
    }

    /// What a run produced: its mini-batch losses, history (without timings), final weights and the
    /// learning rate of every step.
    struct Outcome: Equatable {
        var losses: [Double] = []
        var learningRates: [Double] = []
        var history: [TrainingMetrics] = []
        var weights: [Float] = []
        /// Why the run stopped, when it failed.
        var error: String?
    }

    /// Trains with a handler that halves the learning rate at every epoch's end (so the parameters
    /// in force are part of what a resume must restore) and, when `corruptAfter` is given, writes a
    /// NaN into every replica's weights after that many mini-batches (a fault between two steps).
    func train(_ make: (UpdateHandlers) throws -> UpdateTask, corruptAfter: Int? = nil) throws -> (Outcome, UpdateTask) {
        let recorded = Locked(Outcome())
        let steps = Locked(0)
        let task = try make(UpdateHandlers(progress: { ctx in
            switch ctx.event {
            case .miniBatchEnd:
                recorded.mutate { $0.losses.append(ctx.metrics!.lossValue); $0.learningRates.append(ctx.parameters.learningRate) }
                if steps.mutate({ $0 += 1; return $0 }) == corruptAfter, let devices = ctx.task.session?.devices {
                    var state = try! devices.primary.captureState()
                    state.tensors[0].values[0] = .nan
                    for r in devices.replicas { try! r.restoreState(state) }
                }
            case .epochEnd:
                try? ctx.task.resume(withParameters: [.learningRate: .double(ctx.parameters.learningRate * 0.5)])
            default: break
            }
        }))
        let error = task.run().error
        var outcome = recorded.value
        outcome.error = error.map { "\($0)" }
        let (w, b) = try task.weights(ofLayer: "fc")
        outcome.weights = w.data + (b?.data ?? [])
        outcome.history = task.history.epochs.map { var m = $0; m.seconds = nil; m.examplesPerSecond = nil; m.device = nil; return m }
        return (outcome, task)
    }

    func configuration(_ devices: (inout UpdateConfiguration) throws -> Void) throws -> UpdateConfiguration {
        var config = UpdateConfiguration()
        try devices(&config)
        config.data.validationData = try ArrayBatchProvider(examples: Array(try Self.clean().examples.prefix(4)))
        return config
    }

    /// `a` equals `b` bit for bit, or with `tolerance` within that relative difference.
    func assertClose<T: BinaryFloatingPoint>(_ a: [T], _ b: [T], tolerance: Double?, _ message: String,
                                             file: StaticString = #filePath, line: UInt = #line) {
        guard let tolerance else { return XCTAssertEqual(a, b, message, file: file, line: line) }
        XCTAssertEqual(a.count, b.count, message, file: file, line: line)
        for (x, y) in zip(a, b) where abs(Double(x) - Double(y)) > tolerance * max(1, abs(Double(y))) {
            return XCTFail("\(message): \(a) is not \(b) within \(tolerance)", file: file, line: line)
        }
    }

    /// The two ways a stop is resumed, checked against a run that never met the NaN: bit for bit, or
    /// within `tolerance` where even a cancelled run does not resume bit for bit (a CPU and an
    /// OpenCL replica together: losses differ in the 8th digit after any resume).
    func assertResumesExactly(_ name: String, tolerance: Double? = nil, _ devices: (inout UpdateConfiguration) throws -> Void,
                              file: StaticString = #filePath, line: UInt = #line) throws {
        let model = try Self.model()
        let (expected, clean) = try train { UpdateTask(model: model, trainingData: try Self.clean(), configuration: try configuration(devices), handlers: $0) }
        XCTAssertEqual(clean.state, .completed, "\(name): \(clean.history)", file: file, line: line)
        XCTAssertEqual(expected.losses.count, 15, name, file: file, line: line)

        // 1. The poisoned example's NaN loss stops the run in epoch 2 (its update not applied); the
        //    run resumed from the resume point with the example fixed is the clean run.
        let (stopped, stoppedTask) = try train { UpdateTask(model: model, trainingData: try PoisonedData(fromRead: 2),
                                                            configuration: try configuration(devices), handlers: $0) }
        XCTAssertEqual(stoppedTask.state, .failed, name, file: file, line: line)
        XCTAssertTrue(stopped.error?.contains("training stopped at epoch 2") == true, "\(name): \(stopped.error ?? "")", file: file, line: line)
        let point = try XCTUnwrap(stoppedTask.resumePoint, "\(name): a NaN stop keeps a resume point", file: file, line: line)
        let done = stopped.losses.count
        XCTAssertTrue((5...9).contains(done), "\(name): stopped after \(done) steps", file: file, line: line)
        XCTAssertEqual(point.position.steps, done, "\(name): the resume point is the last finite step", file: file, line: line)
        XCTAssertEqual(point.position.epoch, 1, name, file: file, line: line)
        XCTAssertEqual(stopped.losses, Array(expected.losses.prefix(done)), name, file: file, line: line)
        var again = try configuration(devices)
        again.resume(from: point)
        let (resumed, resumedTask) = try train { UpdateTask(model: model, trainingData: try Self.clean(), configuration: again, handlers: $0) }
        XCTAssertEqual(resumedTask.state, .completed, name, file: file, line: line)
        assertClose(resumed.losses, Array(expected.losses[done...]), tolerance: tolerance, "\(name): the steps after the stop", file: file, line: line)
        XCTAssertEqual(resumed.learningRates, Array(expected.learningRates[done...]), name, file: file, line: line)
        assertClose(resumed.history.compactMap(\.meanLoss), expected.history.compactMap(\.meanLoss), tolerance: tolerance,
                    "\(name): the history, epoch 1 included", file: file, line: line)
        if tolerance == nil { XCTAssertEqual(resumed.history, expected.history, name, file: file, line: line) }
        assertClose(resumed.weights, expected.weights, tolerance: tolerance, "\(name): the final weights", file: file, line: line)

        // 2. Weights turned NaN between two steps of epoch 2: the guard goes back to the end of
        //    epoch 1 (before its validation and the handler's annealing) and the run resumed from
        //    there is the clean run, epoch 1's end included.
        let (corrupted, corruptedTask) = try train({ UpdateTask(model: model, trainingData: try Self.clean(), configuration: try configuration(devices),
                                                        handlers: $0) }, corruptAfter: 7)
        XCTAssertEqual(corruptedTask.state, .failed, name, file: file, line: line)
        XCTAssertTrue(corrupted.error?.contains("holds nan") == true, "\(name): \(corrupted.error ?? "")", file: file, line: line)
        let back = try XCTUnwrap(corruptedTask.resumePoint, name, file: file, line: line)
        XCTAssertEqual([back.position.epoch, back.position.miniBatch, back.position.steps, back.history.count], [0, 5, 5, 0],
                       "\(name): the end of epoch 1, before it was recorded", file: file, line: line)
        XCTAssertEqual(back.parameters.learningRate, 0.05, "\(name): the rate in force then, not the annealed one", file: file, line: line)
        var fromEpoch = try configuration(devices)
        fromEpoch.resume(from: back)
        let (rerun, _) = try train { UpdateTask(model: model, trainingData: try Self.clean(), configuration: fromEpoch, handlers: $0) }
        assertClose(rerun.losses, Array(expected.losses[5...]), tolerance: tolerance, name, file: file, line: line)
        XCTAssertEqual(rerun.history.count, 3, name, file: file, line: line)
        assertClose(rerun.history.compactMap(\.validationLoss), expected.history.compactMap(\.validationLoss), tolerance: tolerance, name, file: file, line: line)
        if tolerance == nil { XCTAssertEqual(rerun.history, expected.history, name, file: file, line: line) }
        assertClose(rerun.weights, expected.weights, tolerance: tolerance, "\(name): the final weights", file: file, line: line)
    }

    func testANaNStopResumesExactlyOnTheCPU() throws {
        try assertResumesExactly("cpu") { $0.placement.backends = (CPUBackend(), CPUBackend()) }
    }

    func testANaNStopResumesExactlyOnOpenCL() throws {
        let context = try OpenCLTestSupport.context()
        try assertResumesExactly("opencl") { let b = OpenCLBackend(context: context); $0.placement.backends = (b, b) }
    }

    func testANaNStopResumesExactlyUnderDataParallelism() throws {
        try assertResumesExactly("data parallel cpu + cpu") { $0.placement.dataParallel = DataParallelism(replicas: [CPUBackend(), CPUBackend()], shares: [1, 1]) }
        let context = try OpenCLTestSupport.context()
        try assertResumesExactly("data parallel cpu + opencl", tolerance: 1e-5) {
            $0.placement.dataParallel = DataParallelism(replicas: [CPUBackend(), OpenCLBackend(context: context)], shares: [1, 1])
        }
    }

    /// The poison left in, resumed with the skip policy: the same as a run that skipped from the start.
    /// The resume point also goes through its files (`writeCheckpoint`, `UpdateTask(resumingFrom:)`).
    func testANaNStopResumedWithTheSkipPolicyIsARunThatSkipped() throws {
        let model = try Self.model()
        var skipping = try configuration { $0.placement.backends = (CPUBackend(), CPUBackend()) }
        skipping.nonFinite = .skipBatch
        let (expected, skipped) = try train { UpdateTask(model: model, trainingData: try PoisonedData(fromRead: 2), configuration: skipping, handlers: $0) }
        XCTAssertEqual(skipped.state, .completed)
        XCTAssertEqual(skipped.warnings.filter { $0.contains("skipping the mini-batch") }.count, 2, "epochs 2 and 3: \(skipped.warnings)")

        let data = try PoisonedData(fromRead: 2)
        let (_, stopped) = try train { UpdateTask(model: model, trainingData: data, configuration: try configuration { $0.placement.backends = (CPUBackend(), CPUBackend()) },
                                                  handlers: $0) }
        XCTAssertEqual(stopped.state, .failed)
        let checkpoint = folder.appendingPathComponent("stopped.mlmodel")
        try stopped.writeCheckpoint(to: checkpoint)
        XCTAssertEqual(try TrainingCheckpoint.read(forModel: checkpoint).position.steps, stopped.resumePoint?.position.steps)
        var again = UpdateConfiguration()
        again.placement.backends = (CPUBackend(), CPUBackend())
        again.data.validationData = skipping.data.validationData
        again.nonFinite = .skipBatch
        // The same provider: the poisoned example keeps reading as NaN.
        let (resumed, task) = try train { try UpdateTask(resumingFrom: checkpoint, trainingData: data, configuration: again, handlers: $0) }
        XCTAssertEqual(task.state, .completed)
        XCTAssertEqual(resumed.weights, expected.weights)
        XCTAssertEqual(resumed.history, expected.history)
        XCTAssertEqual(resumed.losses, Array(expected.losses.suffix(resumed.losses.count)))
    }

    /// A completed run, or one that failed for another reason, has no resume point.
    func testOnlyAGuardStopOrACancelKeepsAResumePoint() throws {
        let model = try Self.model()
        let (_, completed) = try train { UpdateTask(model: model, trainingData: try Self.clean(), handlers: $0) }
        XCTAssertEqual(completed.state, .completed)
        XCTAssertNil(completed.resumePoint)
        XCTAssertThrowsError(try completed.writeCheckpoint(to: folder.appendingPathComponent("x.mlmodel"))) {
            XCTAssertTrue("\($0)".contains("after the non-finite guard stopped it"), "\($0)")
        }
        struct Unreadable: BatchProvider {
            var count: Int { 10 }
            func example(at index: Int) throws -> TrainingExample {
                if index == 7 { throw UpdraftError(.io, "example 7 cannot be read") }
                return try HardeningNonFiniteResumeTests.clean().example(at: index)
            }
        }
        let (_, failed) = try train { UpdateTask(model: model, trainingData: Unreadable(), handlers: $0) }
        XCTAssertEqual(failed.state, .failed)
        XCTAssertNil(failed.resumePoint)
    }

    /// `updraft train` stopped by a NaN input writes the last finite step with its resume state;
    /// `--resume` with the input fixed ends with the model of a run that never met it, byte for byte.
    func testTheCommandResumesANaNStopExactly() throws {
        let model = folder.appendingPathComponent("regressor.mlmodel")
        try Self.model().write(to: model)
        func write(_ name: String, poison: Bool) throws -> URL {
            let dir = folder.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let examples = try Self.clean().examples
            var inputs = examples.flatMap(\.input.data)
            if poison { inputs[3 * Self.poisoned + 1] = .nan }
            let targets = examples.flatMap { e -> [Float] in if case let .values(t) = e.target { return t.data }; return [] }
            try NpyArray(shape: [Self.count, 3], descr: "<f4", values: .float(inputs)).serialized().write(to: dir.appendingPathComponent("inputs.npy"))
            try NpyArray(shape: [Self.count, 2], descr: "<f4", values: .float(targets)).serialized().write(to: dir.appendingPathComponent("targets.npy"))
            return dir
        }
        let clean = try write("clean", poison: false), poisoned = try write("poisoned", poison: true)
        let cache = folder.appendingPathComponent("cache")
        let full = folder.appendingPathComponent("full.mlmodel"), run = folder.appendingPathComponent("run.mlmodel")
        let cpu = ["--compute-units", "cpuOnly"]
        let uninterrupted = try runUpdraft(["train", model.path, "--train", clean.path, "--out", full.path] + cpu, cacheDirectory: cache)
        XCTAssertEqual(uninterrupted.status, 0, uninterrupted.stderr)

        let stopped = try runUpdraft(["train", model.path, "--train", poisoned.path, "--out", run.path] + cpu, cacheDirectory: cache)
        XCTAssertEqual(stopped.status, 1, stopped.stderr)
        XCTAssertTrue(stopped.stderr.contains("not a finite number"), stopped.stderr)
        XCTAssertTrue(stopped.stdout.contains("the model of the last finite step; continue with --resume \(run.path)"), stopped.stdout)
        let point = try TrainingCheckpoint.read(forModel: run)
        XCTAssertEqual(point.position.epoch, 0, "example \(Self.poisoned) is first read in epoch 1")

        let resumed = try runUpdraft(["train", "--resume", run.path, "--train", clean.path] + cpu, cacheDirectory: cache)
        XCTAssertEqual(resumed.status, 0, resumed.stderr)
        XCTAssertTrue(resumed.stdout.contains("resuming run.mlmodel at \(point.position.description)"), resumed.stdout)
        XCTAssertEqual(try Data(contentsOf: run), try Data(contentsOf: full), "the resumed model is the clean run's, byte for byte")
    }
}
