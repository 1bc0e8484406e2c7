import XCTest
import Updraft

/// Issue 13, finding 4: a NaN or infinite loss or weight stops training with a named error (or
/// skips the batch), the last finite state is kept, the validator reports non-finite weights, the
/// log writes non-finite numbers as null and the history always writes.
final class HardeningNonFiniteTests: XCTestCase {
    private func golden() throws -> (CoreMLModel, ArrayBatchProvider) {
        let (g, m) = try GoldenRun.load("branches_sgd")
        return (m, try ArrayBatchProvider(examples: g.examples))
    }

    /// x [3] -> inner product "fc" [2], mean squared error, SGD in batches of 2; learning rates up to 1e30.
    private func regressor(learningRate: Double, epochs: Int64) throws -> CoreMLModel {
        var r = try ModelBuilder.denseRegressor()
        r.setOptimizer(.sgd(learningRate: learningRate, learningRateRange: DoubleBounds(min: 0, max: 1e30), miniBatchSize: 2))
        r.setEpochs(epochs)
        return try r.build()
    }

    private func regressionData(poisonFirst: Bool = false) throws -> ArrayBatchProvider {
        try ArrayBatchProvider(examples: (0..<6).map { i in
            TrainingExample(input: Tensor(shape: [3, 1, 1], uniformIn: -1...1, seed: UInt64(i)),
                            target: .values(Tensor(shape: [2], data: i == 0 && poisonFirst ? [.nan, 1] : [0.5, -0.5])))
        })
    }

    private func allFinite(_ task: UpdateTask, _ model: CoreMLModel) throws -> Bool {
        let trained = try task.currentModel()
        for name in model.layers.filter(\.isUpdatable).map(\.name) {
            let w = try trained.weights(ofLayer: name).data + (try trained.bias(ofLayer: name)?.data ?? [])
            if w.contains(where: { !$0.isFinite }) { return false }
        }
        return true
    }

    /// A learning rate of 1e29 used to print -nan and train on, writing NaN checkpoints.
    func testDivergingTrainingStopsWithTheLastFiniteWeights() throws {
        let model = try regressor(learningRate: 1e29, epochs: 20)
        let data = try regressionData()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-nan-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var config = UpdateConfiguration()
        config.checkpoints.everyEpochs = 1
        config.checkpoints.url = folder.appendingPathComponent("checkpoint.mlmodel")
        let losses = Locked<[Double]>([])
        let task = UpdateTask(model: model, trainingData: data, configuration: config, handlers: UpdateHandlers(progress: {
            if $0.event == .miniBatchEnd, let m = $0.metrics { losses.append(m.lossValue) }
        }))
        let context = task.run()
        XCTAssertEqual(context.task.state, .failed, "losses: \(losses.value)")
        let message = "\(context.error.map { "\($0)" } ?? "")"
        XCTAssertTrue(message.contains("not a finite number") && message.contains("training stopped at"), message)
        XCTAssertEqual((context.error as? UpdraftError)?.kind, .data)
        XCTAssertTrue(try allFinite(task, model), "the model keeps finite weights")
        // Whatever checkpoints were written hold finite weights, and the model and history write.
        if FileManager.default.fileExists(atPath: config.checkpoints.url!.path) {
            let checkpoint = try CoreMLModel(contentsOf: config.checkpoints.url!)
            XCTAssertTrue(ModelValidator.validate(checkpoint).errors.isEmpty)
        }
        let out = folder.appendingPathComponent("out.mlmodel")
        try task.write(to: out)
        XCTAssertNoThrow(try TrainingHistory.read(from: TrainingHistory.url(forModel: out)))
    }

    func testSkipPolicySkipsNonFiniteBatches() throws {
        // A regressor whose first target is NaN: the first batch's loss is NaN; the others train.
        let model = try regressor(learningRate: 0.01, epochs: 2)
        let poisoned = try regressionData(poisonFirst: true)
        var config = UpdateConfiguration()
        config.parameters = [.shuffle: .bool(false)]
        config.nonFinite = .skipBatch
        let task = UpdateTask(model: model, trainingData: poisoned, configuration: config)
        let context = task.run()
        XCTAssertEqual(context.task.state, .completed, "\(context.error.map { "\($0)" } ?? "")")
        XCTAssertEqual(task.warnings.count, 2, "one per epoch: \(task.warnings)")
        XCTAssertTrue(task.warnings.allSatisfy { $0.contains("skipping the mini-batch") }, "\(task.warnings)")
        XCTAssertTrue(try allFinite(task, model))
        // The default policy stops at the same batch.
        config.nonFinite = .stop
        let stopped = UpdateTask(model: model, trainingData: poisoned, configuration: config).run()
        XCTAssertEqual(stopped.task.state, .failed)
        XCTAssertTrue("\(stopped.error!)".contains("epoch 1 mini-batch 1"), "\(stopped.error!)")
    }

    /// The guard on every device setting: OpenCL (PoCL in CI) and data parallelism over two replicas
    /// stop at the same mini-batch as one CPU with the same last finite weights, and skip the same
    /// poisoned batches.
    func testTheGuardActsAlikeOnOpenCLAndUnderDataParallelism() throws {
        let settings: [(String, (inout UpdateConfiguration) throws -> Void)] = [
            ("cpu", { $0.placement.backends = (CPUBackend(), CPUBackend()) }),
            ("opencl", { let b = OpenCLBackend(context: try OpenCLTestSupport.context()); $0.placement.backends = (b, b) }),
            ("data parallel cpu + opencl", { $0.placement.dataParallel = DataParallelism(replicas: [CPUBackend(), OpenCLBackend(context: try OpenCLTestSupport.context())]) }),
            ("data parallel cpu + cpu", { $0.placement.dataParallel = DataParallelism(replicas: [CPUBackend(), CPUBackend()]) }),
        ]
        var stops: [(String, String, [Float])] = []
        for (name, configure) in settings {
            // Diverging: a named stop, the last finite weights kept.
            var config = UpdateConfiguration()
            config.parameters = [.shuffle: .bool(false)]
            try configure(&config)
            let model = try regressor(learningRate: 1e29, epochs: 20)
            let task = UpdateTask(model: model, trainingData: try regressionData(), configuration: config)
            let context = task.run()
            XCTAssertEqual(context.task.state, .failed, name)
            let message = "\(context.error.map { "\($0)" } ?? "")"
            XCTAssertTrue(message.contains("not a finite number") && message.contains("training stopped at"), "\(name): \(message)")
            XCTAssertTrue(try allFinite(task, model), name)
            let at = message.components(separatedBy: "training stopped at").last ?? ""
            stops.append((name, at, try task.currentModel().weights(ofLayer: "fc").data))

            // A poisoned batch under the skip policy: one warning per epoch, finite weights.
            config.nonFinite = .skipBatch
            let skipping = UpdateTask(model: try regressor(learningRate: 0.01, epochs: 2), trainingData: try regressionData(poisonFirst: true),
                                      configuration: config)
            XCTAssertEqual(skipping.run().task.state, .completed, name)
            XCTAssertEqual(skipping.warnings.filter { $0.contains("skipping the mini-batch") }.count, 2, "\(name): \(skipping.warnings)")
            XCTAssertTrue(try allFinite(skipping, model), name)
        }
        for (name, at, weights) in stops.dropFirst() {
            XCTAssertEqual(at, stops[0].1, "\(name) stops where one CPU stops")
            for (a, b) in zip(weights, stops[0].2) { XCTAssertEqual(a, b, accuracy: 1e-3 * max(1, abs(b)), "\(name): the kept weights") }
        }
    }

    func testValidatorReportsNonFiniteWeights() throws {
        var (model, _) = try golden()
        let name = model.layers.first(where: \.isUpdatable)!.name
        var w = try model.weights(ofLayer: name)
        w.data[1] = .nan
        w.data[2] = .infinity
        try model.setWeights(w, ofLayer: name)
        let errors = ModelValidator.validate(model).errors.map(\.message)
        XCTAssertTrue(errors.contains { $0.contains("layer '\(name)' has 2 non-finite weights values") && $0.contains("index 1") }, "\(errors)")
        // Training refuses to start from them.
        let (_, data) = try golden()
        let context = UpdateTask(model: model, trainingData: data).run()
        XCTAssertEqual(context.task.state, .failed)
        XCTAssertTrue("\(context.error!)".contains("before training starts"), "\(context.error!)")
    }

    /// The JSON Lines log dropped every event whose loss was NaN; the history failed with
    /// EncodingError.invalidValue.
    func testLogAndHistoryWriteNonFiniteNumbersAsNull() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-null-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = folder.appendingPathComponent("log.jsonl")
        let log = try JSONLinesLog(url: url)
        log.write(event: "miniBatchEnd", ["loss": Double.nan, "batch": 1])
        log.write(event: "epochEnd", ["loss": -Double.infinity, "nested": ["x": Double.nan]])
        let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(lines.count, 2)
        let untimed = lines.first.map { $0.replacingOccurrences(of: #","time":"[^"]*""#, with: "", options: .regularExpression) }
        XCTAssertEqual(untimed, #"{"event":"miniBatchEnd","batch":1,"loss":null}"#)
        XCTAssertTrue(lines[1].contains(#""loss":null"#) && lines[1].contains(#""nested":{"x":null}"#), String(lines[1]))

        var m = TrainingMetrics(epochIndex: 0, lossValue: .nan)
        m.meanLoss = .infinity
        m.miniBatchLosses = [1, .nan]
        let history = TrainingHistory(model: "m", parameters: [:], epochs: [m])
        let historyURL = folder.appendingPathComponent("m.history.json")
        try history.write(to: historyURL)
        let back = try TrainingHistory.read(from: historyURL)
        XCTAssertTrue(back.epochs[0].lossValue.isNaN)
        XCTAssertNil(back.epochs[0].meanLoss)
        XCTAssertEqual(back.epochs[0].miniBatchLosses?.count, 2)
        XCTAssertTrue(try String(contentsOf: historyURL, encoding: .utf8).contains("null"))
    }
}
