import XCTest
@testable import UpdraftCore
@testable import UpdraftModel
@testable import UpdraftPlacement
@testable import UpdraftChecks
@testable import UpdraftData
@testable import UpdraftTraining

/// Issue 13, finding 1: sizes from a model field or a command-line number never trap (integer
/// overflow); they are named errors, and the validator runs the same checks as `plan`.
final class HardeningSizeTests: XCTestCase {
    private static let folder = temporaryFolder("updraft-sizes")
    override class func tearDown() { try? FileManager.default.removeItem(at: folder) }

    /// A small convolutional image classifier (16x16 RGB, labels "no" and "yes") whose default
    /// mini-batch size is `batch`; learning rates up to 1e30 and any epoch count in `epochs` allowed.
    static func imageModel(batch: Int64, learningRate: Double = 0.01, epochs: Int64 = 1) throws -> CoreMLModel {
        let image = ImageFeatureType(width: 16, height: 16, colorSpace: .rgb)
        var b = try ModelBuilder(input: FeatureDescription(name: "image", type: .image(image)), seed: 3)
        try b.convolution("conv", outputChannels: 4, kernel: (3, 3))
        try b.activation("relu", .relu)
        try b.globalPoolClassifierHead(pool: "pool", dense: "dense", labels: .strings(["no", "yes"]), softmax: "probabilities")
        try b.makeUpdatable(["conv", "dense"])
        try b.setCrossEntropyLoss(input: "probabilities")
        b.setOptimizer(.sgd(learningRate: learningRate, learningRateRange: DoubleBounds(min: 0, max: 1e30), miniBatchSize: batch))
        b.setEpochs(epochs)
        return try b.build()
    }

    func testHugeBatchSizesAreNamedErrorsNotTraps() throws {
        let graph = try NetworkGraph(model: try Self.imageModel(batch: 4))
        for huge in [100_000_000_000_000, 4_611_686_018_427_387_904, Int.max] {
            XCTAssertThrowsError(try GraphAnalysis(graph: graph, batch: huge)) { e in
                XCTAssertTrue("\(e)".contains("too large"), "\(e)")
            }
            XCTAssertThrowsError(try SizeLimits.checkBatchSize(huge, graph: graph, source: "--batch-size")) { e in
                XCTAssertTrue("\(e)".contains("--batch-size \(huge) is too large"), "\(e)")
            }
        }
        // The largest admitted batch plans without overflowing anything.
        let largest = SizeLimits.largestBatchSize(graph)
        XCTAssertGreaterThan(largest, 1_000_000)
        let host = DeviceProfile(name: "host", kind: .cpu, openCLIndex: nil, fmaGFLOPS: 10, bandwidthGBps: 10,
                                 launchLatencyMicroseconds: 1, memoryBytes: 1 << 34, transferGBps: 10)
        let plan = try Scheduler.plan(graph: graph, batchSize: largest, computeUnits: .cpuOnly, devices: [host])
        XCTAssertTrue(plan.totalMs.isFinite)
        XCTAssertThrowsError(try GraphAnalysis(graph: graph, batch: largest + 1))
        XCTAssertThrowsError(try SizeLimits.checkBatchSize(0, graph: graph, source: "--batch-size"))
    }

    /// A model whose default mini-batch is 2^62 passed `inspect` with no problems, then trapped in
    /// `plan` and `train`.
    func testValidatorRejectsADefaultBatchThatPlanCannotUse() throws {
        let model = try Self.imageModel(batch: 1 << 62)
        let errors = ModelValidator.validate(model).errors.map(\.message)
        XCTAssertTrue(errors.contains { $0.contains("default mini-batch size") && $0.contains("too large") }, "\(errors)")
        XCTAssertTrue(ModelValidator.validate(try Self.imageModel(batch: 8)).errors.isEmpty)
        // The library refuses it at the start of training with the same named error.
        let data = try ArrayBatchProvider(examples: [TrainingExample(input: Tensor(shape: [3, 16, 16], uniformIn: 0...1, seed: 1),
                                                                     target: .classIndex(0))])
        let context = UpdateTask(model: model, trainingData: data).run()
        XCTAssertEqual(context.task.state, .failed)
        XCTAssertTrue("\(context.error!)".contains("miniBatchSize") && "\(context.error!)".contains("too large"), "\(context.error!)")
    }

    /// The command lines from the issue, as a user runs them.
    func testCommandLinesWithHugeBatchSizesFailCleanly() throws {
        let fm = FileManager.default
        try fm.createDirectory(at: Self.folder, withIntermediateDirectories: true)
        let small = Self.folder.appendingPathComponent("small.mlmodel")
        try Self.imageModel(batch: 4).write(to: small)
        let huge = Self.folder.appendingPathComponent("huge-default.mlmodel")
        try Self.imageModel(batch: 1 << 62).write(to: huge)
        let zero = Self.folder.appendingPathComponent("zero-default.mlmodel")
        try Self.imageModel(batch: 0).write(to: zero)
        let data = Self.folder.appendingPathComponent("data")
        for label in ["no", "yes"] {
            let dir = data.appendingPathComponent(label)
            try fm.createDirectory(at: dir, withIntermediateDirectories: true)
            let png = try ImageEncoder.png(width: 16, height: 16, colorType: .rgb, samples: [UInt8](repeating: label == "no" ? 20 : 220, count: 768))
            XCTAssertTrue(fm.createFile(atPath: dir.appendingPathComponent("a.png").path, contents: Data(png)))
        }
        let cache = Self.folder.appendingPathComponent("cache")
        func run(_ args: [String]) throws -> CommandRun { try runUpdraft(args, cacheDirectory: cache) }

        let plan = try run(["plan", small.path, "--batch-size", "100000000000000", "--compute-units", "cpuOnly"])
        XCTAssertEqual(plan.status, 1, plan.stderr)
        XCTAssertTrue(plan.stderr.contains("--batch-size 100000000000000 is too large"), plan.stderr)

        // Evaluation never needs a batch larger than the data: it runs.
        let evaluate = try run(["evaluate", small.path, "--data", data.path, "--batch-size", "4611686018427387904",
                                "--compute-units", "cpuOnly"])
        XCTAssertEqual(evaluate.status, 0, evaluate.stderr)

        let inspect = try run(["inspect", huge.path, "--strict"])
        XCTAssertEqual(inspect.status, 1, "inspect must not call it valid: \(inspect.stdout)")
        XCTAssertTrue(inspect.stdout.contains("too large"), inspect.stdout)
        let planHuge = try run(["plan", huge.path, "--compute-units", "cpuOnly"])
        XCTAssertEqual(planHuge.status, 1, planHuge.stderr)
        XCTAssertTrue(planHuge.stderr.contains("the model's default miniBatchSize"), planHuge.stderr)
        let train = try run(["train", huge.path, "--train", data.path, "--compute-units", "cpuOnly",
                             "--out", Self.folder.appendingPathComponent("t.mlmodel").path])
        XCTAssertEqual(train.status, 1, train.stderr)
        XCTAssertFalse(train.stderr.contains("Fatal error"), train.stderr)

        // Finding 10: a default batch of 0 is the model's, not a --batch-size nobody gave.
        let planZero = try run(["plan", zero.path, "--compute-units", "cpuOnly"])
        XCTAssertEqual(planZero.status, 1, planZero.stderr)
        XCTAssertTrue(planZero.stderr.contains("the model's default miniBatchSize is 0"), planZero.stderr)
        XCTAssertFalse(planZero.stderr.contains("option '--batch-size'"), planZero.stderr)
    }
}
