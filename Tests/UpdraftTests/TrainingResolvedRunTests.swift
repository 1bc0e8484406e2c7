import Foundation
import XCTest
import Updraft
@testable import UpdraftTraining

/// Issue 22, item 4: one run request. `ResolvedRun.resolve` checks the hyperparameters, takes the
/// resume point and schedules the devices once; `UpdateTask`, `updraft train`, `updraft plan` and
/// `updraft-bench epochs` use what it resolved.
final class TrainingResolvedRunTests: XCTestCase {
    private static let folder = temporaryFolder("updraft-resolved")
    private static var cache: URL { folder.appendingPathComponent("cache") }
    override class func tearDown() { try? FileManager.default.removeItem(at: folder) }

    private var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        for key in [DevicePin.environmentVariable, DataParallelMode.environmentVariable] { env.removeValue(forKey: key) }
        env[CalibrationCache.directoryVariable] = Self.cache.path
        return env
    }

    /// The small image classifier of the size tests (16x16, "no"/"yes", allowed mini-batch sizes {4})
    /// written to disk, with an image folder of two examples per class.
    private func modelAndData() throws -> (model: URL, data: URL) {
        let fm = FileManager.default
        try fm.createDirectory(at: Self.folder, withIntermediateDirectories: true)
        let model = Self.folder.appendingPathComponent("small.mlmodel")
        try HardeningSizeTests.imageModel(batch: 4).write(to: model)
        let data = Self.folder.appendingPathComponent("data")
        for label in ["no", "yes"] {
            let dir = data.appendingPathComponent(label)
            try fm.createDirectory(at: dir, withIntermediateDirectories: true)
            for (i, level) in [20, 60].enumerated() {
                let value = UInt8(label == "no" ? level : 255 - level)
                let png = try ImageEncoder.png(width: 16, height: 16, colorType: .rgb, samples: [UInt8](repeating: value, count: 768))
                XCTAssertTrue(fm.createFile(atPath: dir.appendingPathComponent("\(i).png").path, contents: Data(png)))
            }
        }
        return (model, data)
    }

    func testAResolvedRunIsTrainedAsResolvedWithoutASecondSchedule() throws {
        var config = UpdateConfiguration()
        config.placement.computeUnits = .cpuOnly
        config.parameters = [.learningRate: .double(0.01)]
        let run = try ResolvedRun.resolve(model: try SqueezeShaped.model(batch: 4), configuration: config, environment: environment)
        let schedule = try XCTUnwrap(run.schedule, "no backends given: the run is scheduled")
        XCTAssertEqual(run.parameters.learningRate, 0.01)
        XCTAssertEqual(run.parameters.miniBatchSize, 4)
        XCTAssertEqual(schedule.plan.batchSize, 4, "scheduled at the resolved mini-batch size")
        XCTAssertEqual(run.description, schedule.description)
        let (prefix, tail) = try XCTUnwrap(run.configuration.placement.backends)
        XCTAssertTrue(prefix === schedule.backends.prefix && tail === schedule.backends.tail)
        XCTAssertTrue(run.report.contains("device: \(run.description)"), run.report)
        XCTAssertTrue(run.report.contains(schedule.plan.text()), run.report)
        XCTAssertNil(run.resume)

        // The task trains on the very backends the run opened: nothing scheduled them again.
        let onResolved = Locked<[Bool]>([])
        let (resolvedPrefix, resolvedTail, parameters) = (ObjectIdentifier(prefix), ObjectIdentifier(tail), run.parameters)
        let task = UpdateTask(run: run, trainingData: try SqueezeShaped.data(count: 4), handlers: UpdateHandlers(progress: { ctx in
            guard ctx.event == .miniBatchEnd, let session = ctx.task.session else { return }
            onResolved.append(ObjectIdentifier(session.executor.tailBackend) == resolvedTail
                              && ObjectIdentifier(session.executor.prefixBackend) == resolvedPrefix)
            XCTAssertEqual(ctx.parameters, parameters)
        }))
        let final = task.run()
        XCTAssertNil(final.error)
        XCTAssertEqual(onResolved.value, [true, true])
    }

    func testGivenBackendsAreNotScheduled() throws {
        let cpu = CPUBackend()
        var config = UpdateConfiguration()
        config.placement.backends = (cpu, cpu)
        let run = try ResolvedRun.resolve(model: try SqueezeShaped.model(batch: 4), configuration: config, environment: environment)
        XCTAssertNil(run.schedule)
        XCTAssertTrue(run.configuration.placement.backends?.tail === cpu)
        XCTAssertEqual(run.description, cpu.name)
        XCTAssertTrue(run.warnings.isEmpty)
        XCTAssertTrue(run.report.contains("not scheduled"), run.report)
    }

    func testABadHyperparameterIsReportedOnceByNameWithItsAllowedValues() throws {
        let expected = "miniBatchSize = 3 is not allowed by this model: allowed values are"
        var config = UpdateConfiguration()
        config.placement.computeUnits = .cpuOnly
        config.parameters = [.miniBatchSize: .int(3)]
        let model = try HardeningSizeTests.imageModel(batch: 4)
        XCTAssertThrowsError(try ResolvedRun.resolve(model: model, configuration: config, environment: environment)) { e in
            XCTAssertTrue("\(e)".contains(expected), "\(e)")
        }
        // A task resolves its configuration when it starts: the same error, from the same place.
        let data = try ArrayBatchProvider(examples: [TrainingExample(input: Tensor(shape: [3, 16, 16], uniformIn: 0...1, seed: 1),
                                                                     target: .classIndex(0))])
        let failed = UpdateTask(model: model, trainingData: data, configuration: config).run()
        XCTAssertEqual(failed.task.state, .failed)
        XCTAssertTrue("\(failed.error!)".contains(expected), "\(failed.error!)")

        let (url, folder) = try modelAndData()
        let cli = try runUpdraft(["train", url.path, "--train", folder.path, "--batch-size", "3", "--compute-units", "cpuOnly",
                                  "--out", Self.folder.appendingPathComponent("never.mlmodel").path], cacheDirectory: Self.cache)
        XCTAssertEqual(cli.status, 1, cli.stderr)
        XCTAssertEqual(cli.stderr.components(separatedBy: expected).count - 1, 1, "reported once: \(cli.stderr)")
        XCTAssertTrue(cli.stderr.contains("allowed-batch-sizes"), "the way to widen them: \(cli.stderr)")
        XCTAssertFalse(cli.stdout.contains("training data:"), "checked before any data is loaded: \(cli.stdout)")
    }

    func testPlanPlacesAsResolveDoesWithoutCheckingHyperparametersOrOpeningBackends() throws {
        let model = try HardeningSizeTests.imageModel(batch: 4)
        var config = UpdateConfiguration()
        config.placement.computeUnits = .cpuOnly
        let run = try ResolvedRun.resolve(model: model, configuration: config, environment: environment)
        let planned = try ResolvedRun.plan(network: model, configuration: config, environment: environment)
        XCTAssertEqual(planned.plan.text(), try XCTUnwrap(run.schedule).plan.text(), "the placement resolve opened")
        XCTAssertEqual([planned.batchSize, planned.perRankBatchSize], [4, 4], "the model's default mini-batch")

        // A size the model does not allow is planned (resolve refuses it); ranks place their share, rounded up.
        XCTAssertThrowsError(try ResolvedRun.resolve(model: model, configuration: { var c = config; c.parameters[.miniBatchSize] = .int(3); return c }(),
                                                     environment: environment))
        let shared = try ResolvedRun.plan(network: model, batchSize: 3, ranks: 2, configuration: config, environment: environment)
        XCTAssertEqual([shared.batchSize, shared.perRankBatchSize], [3, 2])
        XCTAssertEqual(shared.plan.batchSize, 2)

        // What the network cannot hold is refused as resolve refuses it, naming the size's source.
        XCTAssertThrowsError(try ResolvedRun.plan(network: model, batchSize: 1 << 62, batchSizeSource: "--batch-size",
                                                  configuration: config, environment: environment)) { error in
            XCTAssertTrue("\(error)".contains("--batch-size 4611686018427387904 is too large"), "\(error)")
        }
        // Backends given by the configuration are not placed: there is nothing to plan.
        let cpu = CPUBackend()
        config.placement.backends = (cpu, cpu)
        XCTAssertThrowsError(try ResolvedRun.plan(network: model, configuration: config, environment: environment)) { error in
            XCTAssertTrue("\(error)".contains("no placement to plan"), "\(error)")
        }
    }

    func testTrainAndPlanShowTheLibrarysPlan() throws {
        let (url, folder) = try modelAndData()
        var config = UpdateConfiguration()
        config.placement.computeUnits = .cpuOnly
        let run = try ResolvedRun.resolve(model: try CoreMLModel(contentsOf: url), configuration: config, environment: environment)
        let schedule = try XCTUnwrap(run.schedule)

        let plan = try runUpdraft(["plan", url.path, "--compute-units", "cpuOnly"], cacheDirectory: Self.cache)
        XCTAssertEqual(plan.status, 0, plan.stderr)
        XCTAssertEqual(plan.stdout, "Model: \(url.path)\n" + schedule.plan.text(), "plan prints the plan the library resolved")

        let trained = Self.folder.appendingPathComponent("trained.mlmodel")
        let train = try runUpdraft(["train", url.path, "--train", folder.path, "--compute-units", "cpuOnly", "--out", trained.path],
                                   cacheDirectory: Self.cache)
        XCTAssertEqual(train.status, 0, train.stderr)
        XCTAssertTrue(train.stdout.contains("device: \(run.description); \(run.parameters)"), train.stdout)
    }
}
