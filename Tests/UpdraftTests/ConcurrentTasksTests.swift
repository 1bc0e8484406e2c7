import Foundation
import XCTest
import Updraft

/// Many `UpdateTask`s at once in one process on one device (issue 26, item 1): 16 tasks of different
/// models (networks of every layer family the golden runs hold, the SqueezeNet-shaped model, dense
/// fixtures, a k-NN), data and hyperparameters start together, and each trained model is byte for
/// byte the model the same task makes alone. A task that fails on bad data or is cancelled leaves the
/// others' results as they are. On PoCL the tasks are pinned to device 0 (`deviceOption = "0"`),
/// and half of them share one context through explicit backends, as a service holding one context
/// would do.
final class ConcurrentTasksTests: XCTestCase {
    /// One task to run: a name for messages, its model and data, and how its configuration differs.
    struct Job {
        var name: String
        var model: CoreMLModel
        var data: BatchProvider
        var configure: (inout UpdateConfiguration) -> Void = { _ in }
        /// Cancel after this mini-batch of the first epoch (nil: run to the end).
        var cancelAfterBatch: Int? = nil
    }

    /// What a finished task left: its state, its model's bytes, its error.
    struct Outcome: Equatable {
        var state: UpdateTaskState
        var bytes: [UInt8]
        var error: String?
    }

    // MARK: The tasks

    /// Overrides of `model`'s parameters: for each key, the first candidate the model allows that
    /// differs from its default (so every job trains with settings of its own).
    static func overrides(_ model: CoreMLModel, _ candidates: [ParameterKey: [ParameterValue]]) -> [ParameterKey: ParameterValue] {
        var chosen: [ParameterKey: ParameterValue] = [:]
        for (key, values) in candidates {
            guard let h = model.hyperparameters.first(where: { $0.key.rawValue == key.rawValue }) else { continue }
            if let v = values.first(where: { h.allows($0) && $0 != h.defaultValue }) { chosen[key] = v }
        }
        return chosen
    }

    /// `count` examples of `shape` with class labels cycling through `classes`, seeded.
    static func classified(shape: [Int], classes: Int, count: Int, seed: UInt64) throws -> ArrayBatchProvider {
        try ArrayBatchProvider(examples: (0..<count).map { i in
            TrainingExample(input: Tensor(shape: Shape(shape), uniformIn: -1...1, seed: seed &+ UInt64(i)), target: .classIndex(i % classes))
        })
    }

    /// Sixteen tasks: the five golden networks twice (their own data, then reversed data with other
    /// learning rates and batch sizes), the SqueezeNet-shaped model with SGD and Adam, the dense SGD,
    /// Adam and MSE fixtures on random data, and a k-NN appending its training rows.
    static func jobs() throws -> [Job] {
        var jobs: [Job] = []
        for name in ["mlp", "branches_sgd", "branches_adam", "flatten_cnn", "layout_cnn"] {
            let (golden, model) = try GoldenRun.load(name)
            jobs.append(Job(name: name, model: model, data: try ArrayBatchProvider(examples: golden.examples)))
            let other = overrides(model, [.learningRate: [.double(0.003), .double(0.02), .double(0.1)],
                                          .miniBatchSize: [.int(2), .int(3), .int(4), .int(1)],
                                          .shuffle: [.bool(true)], .seed: [.int(5)]])
            jobs.append(Job(name: "\(name)-other", model: model, data: try ArrayBatchProvider(examples: golden.examples.reversed())) {
                $0.parameters = other
            })
        }
        jobs.append(Job(name: "squeeze-sgd", model: try SqueezeShaped.model(optimizer: .sgd, batch: 4), data: try SqueezeShaped.data(count: 12, seed: 11)))
        jobs.append(Job(name: "squeeze-adam", model: try SqueezeShaped.model(optimizer: .adam, batch: 2), data: try SqueezeShaped.data(count: 10, seed: 29)))
        let sgd = try CoreMLFixtures.model("dense_sgd_classifier")
        jobs.append(Job(name: "dense_sgd", model: sgd, data: try classified(shape: [4], classes: 3, count: 40, seed: 3)) {
            $0.parameters = overrides(sgd, [.miniBatchSize: [.int(4)], .epochs: [.int(10)]])
        })
        let adam = try CoreMLFixtures.model("dense_adam_classifier")
        jobs.append(Job(name: "dense_adam", model: adam,
                        data: try classified(shape: adam.inputArrayShape ?? [4], classes: 3, count: 24, seed: 41)))
        let mse = try CoreMLFixtures.model("mse_regressor")
        jobs.append(Job(name: "mse", model: mse, data: try ArrayBatchProvider(examples: (0..<20).map { i in
            TrainingExample(input: Tensor(shape: [3], uniformIn: -1...1, seed: 100 &+ UInt64(i)),
                            target: .values(Tensor(shape: [2], uniformIn: -1...1, seed: 500 &+ UInt64(i))))
        })))
        let knn = try CoreMLModel(contentsOf: Fixtures.url("knn/update_strings.mlmodel"))
        jobs.append(Job(name: "knn", model: knn, data: try ModelDataset(model: knn, path: Fixtures.url("knn/update_strings_train")).provider) {
            $0.parameters[.miniBatchSize] = .int(4)
        })
        precondition(jobs.count == 16)
        return jobs
    }

    /// Examples whose `bad`-th one has an input of the wrong shape: the mini-batch holding it fails.
    struct BadExample: BatchProvider {
        var base: BatchProvider
        var bad: Int
        var count: Int { base.count }
        func example(at index: Int) throws -> TrainingExample {
            var e = try base.example(at: index)
            if index == bad { e.input = Tensor(shape: Shape([e.input.count + 1]), data: Array(repeating: 0, count: e.input.count + 1)) }
            return e
        }
        func target(at index: Int) throws -> TrainingExample.Target { try base.target(at: index) }
    }

    // MARK: Running them

    /// Makes the task for `job` on `device` (plus the test's own settings); `begun` is called at
    /// `trainingBegin` (the concurrent runs hold there until every task has begun).
    func task(_ job: Job, device: (inout UpdateConfiguration) -> Void, begun: (@Sendable () -> Void)? = nil) -> UpdateTask {
        var config = UpdateConfiguration()
        device(&config)
        job.configure(&config)
        let cancelAfter = job.cancelAfterBatch
        return UpdateTask(model: job.model, trainingData: job.data, configuration: config, handlers: UpdateHandlers(progress: { ctx in
            if ctx.event == .trainingBegin { begun?() }
            if let cancelAfter, ctx.event == .miniBatchEnd, ctx.metrics?.epochIndex == 0, ctx.metrics?.miniBatchIndex == cancelAfter {
                ctx.task.cancel()
            }
        }))
    }

    func outcome(_ task: UpdateTask) -> Outcome {
        let bytes = (try? task.currentModel().serializedBytes()) ?? []
        return Outcome(state: task.state, bytes: bytes, error: task.wait().error.map { "\($0)" })
    }

    /// Each job alone, one after another.
    func solo(_ jobs: [Job], device: @escaping (inout UpdateConfiguration) -> Void) -> [Outcome] {
        solo(jobs, devices: { _ in device })
    }

    /// Each job alone, one after another, job i on `devices(i)`.
    func solo(_ jobs: [Job], devices: (Int) -> (inout UpdateConfiguration) -> Void) -> [Outcome] {
        jobs.enumerated().map { i, job in
            let t = task(job, device: devices(i))
            t.run()
            return outcome(t)
        }
    }

    /// Every job at once, each on its own thread (`resume()`); the tasks that reach `trainingBegin`
    /// wait there (up to 20 s) until all `starters` have, so they really train at the same time.
    func together(_ jobs: [Job], starters: Int, device: @escaping (inout UpdateConfiguration) -> Void) -> [Outcome] {
        together(jobs, starters: starters, devices: { _ in device })
    }

    /// As `together(_:starters:device:)`, job i on `devices(i)`.
    func together(_ jobs: [Job], starters: Int, devices: (Int) -> (inout UpdateConfiguration) -> Void) -> [Outcome] {
        let begun = Locked(0)
        let gate = { @Sendable in
            begun.mutate { $0 += 1 }
            let deadline = Date().addingTimeInterval(20)
            while begun.value < starters, Date() < deadline { usleep(500) }
        }
        let tasks = jobs.enumerated().map { i, job in task(job, device: devices(i), begun: gate) }
        tasks.forEach { $0.resume() }
        tasks.forEach { $0.wait() }
        XCTAssertEqual(begun.value, starters, "every task that starts reached trainingBegin")
        return tasks.map(outcome)
    }

    func assertIdentical(_ concurrent: [Outcome], _ alone: [Outcome], _ jobs: [Job], _ what: String,
                         file: StaticString = #filePath, line: UInt = #line) {
        for (i, job) in jobs.enumerated() {
            XCTAssertEqual(concurrent[i].state, alone[i].state, "\(what) \(job.name): \(concurrent[i].error ?? "")", file: file, line: line)
            XCTAssertFalse(concurrent[i].bytes.isEmpty, "\(what) \(job.name) has a model", file: file, line: line)
            XCTAssertTrue(concurrent[i].bytes == alone[i].bytes, "\(what) \(job.name): the model differs from its solo run", file: file, line: line)
        }
    }

    /// The CPU, as a service with `computeUnits = .cpuOnly` gets it.
    static func cpu(_ config: inout UpdateConfiguration) { config.placement.computeUnits = .cpuOnly }

    // MARK: Tests

    func testSixteenConcurrentTasksOnTheCPUMatchTheirSoloRuns() throws {
        let jobs = try Self.jobs()
        let alone = solo(jobs, device: Self.cpu)
        for (o, job) in zip(alone, jobs) { XCTAssertEqual(o.state, .completed, "\(job.name): \(o.error ?? "")") }
        XCTAssertNotEqual(alone[0].bytes, jobs[0].model.serializedBytes(), "training changed the model")
        assertIdentical(together(jobs, starters: jobs.count, device: Self.cpu), alone, jobs, "cpu")
    }

    /// PoCL for job i: even jobs pin the device (each task opening its own context), odd jobs get
    /// explicit backends on the one `shared` context (a backend per task).
    static func pocl(_ shared: OpenCLContext) -> (Int) -> (inout UpdateConfiguration) -> Void {
        { index in
            if index % 2 == 0 { return { $0.placement.deviceOption = "\(shared.device.info.index)" } }
            return { config in
                let backend = OpenCLBackend(context: shared)
                config.placement.backends = (backend, backend)
                config.placement.fallbacks = []
            }
        }
    }

    func testSixteenConcurrentTasksOnPoCLMatchTheirSoloRuns() throws {
        let shared = try OpenCLTestSupport.context()
        let jobs = try Self.jobs()
        let alone = solo(jobs, devices: Self.pocl(shared))
        for (o, job) in zip(alone, jobs) { XCTAssertEqual(o.state, .completed, "\(job.name): \(o.error ?? "")") }
        assertIdentical(together(jobs, starters: jobs.count, devices: Self.pocl(shared)), alone, jobs, "pocl")
        XCTAssertEqual(shared.liveBufferCount, 0, "the finished tasks gave back every buffer of the shared context")
    }

    /// One task fails on a bad example and one is cancelled mid-run; the other fourteen finish with
    /// their solo models, and the cancelled one keeps what it trained, as it would alone.
    func assertAFailingAndACancelledTaskLeaveTheOthersIdentical(devices: (Int) -> (inout UpdateConfiguration) -> Void,
                                                                file: StaticString = #filePath, line: UInt = #line) throws {
        var jobs = try Self.jobs()
        jobs[2].data = BadExample(base: jobs[2].data, bad: 1)
        jobs[7].cancelAfterBatch = 0
        let alone = solo(jobs, devices: devices)
        XCTAssertEqual(alone[2].state, .failed, file: file, line: line)
        XCTAssertTrue(alone[2].error?.contains("input shape") ?? false, alone[2].error ?? "no error", file: file, line: line)
        XCTAssertEqual(alone[7].state, .cancelled, file: file, line: line)
        let concurrent = together(jobs, starters: jobs.count, devices: devices)
        XCTAssertEqual(concurrent[2].state, .failed, file: file, line: line)
        XCTAssertEqual(concurrent[2].error, alone[2].error, file: file, line: line)
        XCTAssertEqual(concurrent[7].state, .cancelled, file: file, line: line)
        assertIdentical(concurrent, alone, jobs, "with a failure and a cancellation", file: file, line: line)
        // The untouched others are also exactly the plain runs' models.
        let plain = solo([try Self.jobs()[0]], devices: devices)
        XCTAssertTrue(concurrent[0].bytes == plain[0].bytes, file: file, line: line)
    }

    func testAFailingAndACancelledTaskLeaveTheOthersIdenticalOnTheCPU() throws {
        try assertAFailingAndACancelledTaskLeaveTheOthersIdentical(devices: { _ in Self.cpu })
    }

    func testAFailingAndACancelledTaskLeaveTheOthersIdenticalOnPoCL() throws {
        let shared = try OpenCLTestSupport.context()
        try assertAFailingAndACancelledTaskLeaveTheOthersIdentical(devices: Self.pocl(shared))
        XCTAssertEqual(shared.liveBufferCount, 0, "the failed and cancelled tasks gave back their buffers too")
    }

    /// The same sixteen through Swift concurrency: `try await task.run()` in a task group.
    func testSixteenSwiftTasksMatchTheirSoloRuns() async throws {
        let jobs = try Self.jobs()
        let alone = solo(jobs, device: Self.cpu)
        let tasks = jobs.map { task($0, device: Self.cpu) }
        let models = try await withThrowingTaskGroup(of: (Int, [UInt8]).self) { group in
            for (i, t) in tasks.enumerated() {
                group.addTask { (i, try await t.run().serializedBytes()) }
            }
            var out = [[UInt8]](repeating: [], count: tasks.count)
            for try await (i, bytes) in group { out[i] = bytes }
            return out
        }
        for (i, job) in jobs.enumerated() {
            XCTAssertTrue(models[i] == alone[i].bytes, "\(job.name): the model differs from its solo run")
        }
    }
}
