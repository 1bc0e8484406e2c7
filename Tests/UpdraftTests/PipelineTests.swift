import Foundation
import XCTest
import Updraft

/// Pipelines run and trained: the networks of a pipeline joined into one (`pipelineNetwork`),
/// checked against the same layers built by coremltools as one network (`network_last_flat`), and
/// a k-NN behind a network extractor checked against the embedding computed here.
final class PipelineTests: XCTestCase {
    private func fixture(_ name: String) throws -> CoreMLModel { try CoreMLModel(contentsOf: Fixtures.url("pipeline/\(name).mlmodel")) }
    private func data(for model: CoreMLModel) throws -> BatchProvider {
        try ModelDataset(model: model, path: Fixtures.url("pipeline/data")).provider
    }

    /// Trains `model` on the fixture data through `UpdateTask` on `backend` and returns the model it ends with.
    private func train(_ model: CoreMLModel, on backend: Backend, cache: Bool = true) throws -> (model: CoreMLModel, losses: [Double], task: UpdateTask) {
        var config = UpdateConfiguration()
        config.placement.backends = (backend, backend)
        config.featureCache.enabled = cache
        let losses = Locked<[Double]>([])
        let task = UpdateTask(model: model, trainingData: try data(for: model), configuration: config, handlers: UpdateHandlers(
            progress: { ctx in if ctx.event == .miniBatchEnd, let m = ctx.metrics { losses.append(m.lossValue) } }))
        let ctx = task.run()
        XCTAssertEqual(ctx.task.state, .completed, "\(ctx.error.map { "\($0)" } ?? "")")
        return (try task.currentModel(), losses.value, task)
    }

    func testJoiningKeepsTheLastModelsNamesAndPrefixesTheOthers() throws {
        let model = try fixture("network_last")
        let joined = try model.pipelineNetwork(through: 1, trainable: true)
        XCTAssertEqual(joined.layerNames, ["embedding/embed", "embedding/embed_relu", "fc", "prob"])
        XCTAssertEqual(joined.updatableLayerNames, ["fc"], "only the last model learns")
        XCTAssertEqual(joined.layers[0].outputs, ["embedding/embed_out"], "a model's inner blobs are its own")
        XCTAssertEqual(joined.layers[1].outputs, ["embedding"], "features keep their names: the next model reads them")
        XCTAssertEqual(joined.classLabels?.asStrings, ["a", "b", "c"])
        XCTAssertTrue(joined.isUpdatable)
        let extractor = try model.pipelineNetwork(through: 0)
        XCTAssertEqual(extractor.updatableLayerNames, [])
        XCTAssertFalse(extractor.isUpdatable)
        XCTAssertThrowsError(try model.pipelineNetwork(through: 2))
        XCTAssertThrowsError(try fixture("network_last_flat").pipelineNetwork(through: 0)) { error in
            XCTAssertTrue("\(error)".contains("not a pipeline"), "\(error)")
        }
    }

    func testReplacingAModelKeepsEveryOtherByte() throws {
        let model = try fixture("network_last")
        let models = try model.pipelineModels()
        XCTAssertEqual(try model.replacingPipelineModel(at: 0, with: models[0]).serializedBytes(), model.serializedBytes())
        var changed = models[1]
        try changed.setBias(Tensor(shape: [3], data: [1, 2, 3]), ofLayer: "fc")
        let replaced = try model.replacingPipelineModel(at: 1, with: changed)
        let reread = try CoreMLModel(serializedBytes: replaced.serializedBytes())
        XCTAssertEqual(try reread.pipelineModels()[0].serializedBytes(), models[0].serializedBytes())
        XCTAssertEqual(try reread.pipelineModels()[1].bias(ofLayer: "fc")?.data, [1, 2, 3])
        XCTAssertEqual(reread.spec, replaced.spec)
    }

    /// The pipeline runs as the same layers built as one network do, on every device.
    func testAPipelineEvaluatesAsItsFlatTwin() throws {
        let pipeline = try fixture("network_last"), flat = try fixture("network_last_flat")
        let data = try data(for: pipeline)
        for units in [ComputeUnits.cpuOnly, .cpuAndGPU] {
            var config = UpdateConfiguration()
            config.placement.computeUnits = units
            let a = try ModelKinds.predictor(model: pipeline, configuration: config, batchSize: 8, warn: { _ in })
            let b = try ModelKinds.predictor(model: flat, configuration: config, batchSize: 8, warn: { _ in })
            XCTAssertEqual(a.classLabels, ["a", "b", "c"])
            let pa = try a.classify(data, range: 0..<8, position: "test"), pb = try b.classify(data, range: 0..<8, position: "test")
            XCTAssertEqual(pa.probabilities.data, pb.probabilities.data, "\(units)")
            XCTAssertEqual(pa.targets, pb.targets)
        }
    }

    /// Training a pipeline whose last model is a network trains that network with the models before
    /// it frozen: the same losses and weights as the flat twin, the extractor's bytes untouched, and
    /// the extractor run once per example (the feature cache holds its output from epoch 2 on).
    func testTrainingAPipelineTrainsItsLastNetworkAsTheFlatTwin() throws {
        let pipeline = try fixture("network_last"), flat = try fixture("network_last_flat")
        for backend in [CPUBackend() as Backend, OpenCLBackend(context: try OpenCLTestSupport.context())] {
            let p = try train(pipeline, on: backend), f = try train(flat, on: backend)
            XCTAssertEqual(p.losses.count, 12, "16 examples, batches of 4, 3 epochs")
            XCTAssertEqual(p.losses, f.losses, backend.name)
            let trained = try p.model.pipelineModels()
            XCTAssertEqual(try trained[1].weights(ofLayer: "fc").data, try f.model.weights(ofLayer: "fc").data, backend.name)
            XCTAssertEqual(try trained[1].bias(ofLayer: "fc")?.data, try f.model.bias(ofLayer: "fc")?.data, backend.name)
            XCTAssertNotEqual(try trained[1].weights(ofLayer: "fc").data, try pipeline.pipelineModels()[1].weights(ofLayer: "fc").data)
            XCTAssertEqual(trained[0].serializedBytes(), try pipeline.pipelineModels()[0].serializedBytes(), "the extractor is frozen")
            XCTAssertEqual(p.model.spec.modelType, .pipelineClassifier)
            let stats = try XCTUnwrap(p.task.featureCacheStatistics)
            XCTAssertEqual(stats.misses, 16, "the extractor runs once per example: \(stats)")
            XCTAssertEqual(stats.hits, 32, "epochs 2 and 3 read the cache: \(stats)")
        }
    }

    /// The written pipeline reads back as a pipeline whose trained model is the task's.
    func testATrainedPipelineIsWrittenAndReadBack() throws {
        let folder = try makeTemporaryFolder("pipeline")
        let pipeline = try fixture("network_last")
        let url = folder.appendingPathComponent("trained.mlmodel")
        let run = try train(pipeline, on: CPUBackend())
        try run.task.write(to: url)
        let back = try CoreMLModel(contentsOf: url)
        XCTAssertEqual(back.serializedBytes(), run.model.serializedBytes())
        XCTAssertEqual(ModelKinds.validate(back), [])
    }

    /// A k-NN behind a network: the extractor's output is the embedding (W x + b, computed here) and
    /// the answer is the label of the nearest stored sample.
    func testAKNearestNeighborsPipelineSearchesTheEmbedding() throws {
        struct Made: Decodable { var samples: [[Float]]; var labels: [String]; var embeddingWeights: [[Float]] }
        let made = try JSONDecoder().decode(Made.self, from: Data(contentsOf: Fixtures.url("knn/pipeline_embedding_knn.json")))
        let model = try CoreMLModel(contentsOf: Fixtures.url("knn/pipeline_embedding_knn.mlmodel"))
        let predictor = try ModelKinds.predictor(model: model, batchSize: 4, warn: { _ in })
        XCTAssertEqual(predictor.classLabels, ["left", "right"])
        var rng = SplitMix64(seed: 5)
        for _ in 0..<20 {
            let x = (0..<6).map { _ in Float(rng.nextDouble() * 4 - 2) }
            let e = made.embeddingWeights.map { row in zip(row, x).reduce(0.0) { $0 + Double($1.0) * Double($1.1) } }
            let distances = made.samples.map { s in zip(s, e).reduce(0.0) { $0 + (Double($1.0) - $1.1) * (Double($1.0) - $1.1) } }
            let nearest = distances.indices.min { distances[$0] < distances[$1] }!
            let p = try predictor.classify(Tensor(shape: [6], data: x), position: "test")
            let expected = ["left", "right"].firstIndex(of: made.labels[nearest])!
            XCTAssertEqual(p.data[expected], 1, "k = 1: the nearest sample's label takes every vote; distances \(distances)")
        }
    }

    /// `updraft plan` places what the kind runs on a device and says what else it does.
    func testPlanShowsWhatEachKindRuns() throws {
        let pipeline = try fixture("network_last")
        let (network, note) = try ModelKinds.plannedNetwork(pipeline)
        XCTAssertEqual(network?.updatableLayerNames, ["fc"])
        XCTAssertEqual(note, "pipeline: the model before the last run frozen (the feature cache holds their output); the last trains")
        let knn = try CoreMLModel(contentsOf: Fixtures.url("knn/knn_strings_linear.mlmodel"))
        XCTAssertNil(try ModelKinds.plannedNetwork(knn).network)
        let cache = try makeTemporaryFolder("plan-kinds")
        let run = try runUpdraft(["plan", Fixtures.url("knn/pipeline_embedding_knn.mlmodel").path, "--compute-units", "cpuOnly"], cacheDirectory: cache)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("pipeline: the networks compute 'embedding' (forward only), then k-NN: 4 samples of dimension 4"), run.stdout)
        XCTAssertTrue(run.stdout.contains("\nembed "), run.stdout)
        let bare = try runUpdraft(["plan", Fixtures.url("knn/knn_strings_linear.mlmodel").path], cacheDirectory: cache)
        XCTAssertEqual(bare.status, 0, bare.stderr)
        XCTAssertTrue(bare.stdout.contains("no device plan"), bare.stdout)
    }

    /// A k-NN's batches on a pinned OpenCL device (PoCL in CI) answer as on the CPU.
    func testAKNearestNeighborsOnAPinnedDeviceAnswersAsOnTheCPU() throws {
        _ = try OpenCLTestSupport.context()
        let model = try CoreMLModel(contentsOf: Fixtures.url("knn/oracle_uniform.mlmodel"))
        let data = try ModelDataset(model: model, path: Fixtures.url("knn/oracle_uniform_data")).provider
        var onDevice = UpdateConfiguration()
        onDevice.placement.deviceOption = "0"
        var onHost = UpdateConfiguration()
        onHost.placement.computeUnits = .cpuOnly
        let a = try ModelKinds.predictor(model: model, configuration: onDevice, batchSize: data.count, warn: { XCTFail("no warning: \($0)") })
        let b = try ModelKinds.predictor(model: model, configuration: onHost, batchSize: data.count, warn: { XCTFail("no warning: \($0)") })
        XCTAssertTrue(a.deviceName.hasPrefix("opencl"), a.deviceName)
        XCTAssertEqual(b.deviceName, "cpu")
        XCTAssertEqual(try a.classify(data, range: 0..<data.count, position: "").probabilities.data,
                       try b.classify(data, range: 0..<data.count, position: "").probabilities.data)
    }

    /// Only networks run before a pipeline's last model; anything else is named.
    func testAKNearestNeighborsBeforeTheLastModelIsRefusedByName() throws {
        let knnPipeline = try CoreMLModel(contentsOf: Fixtures.url("knn/pipeline_embedding_knn.mlmodel"))
        guard case var .pipeline(p) = knnPipeline.spec.body else { return XCTFail("not a pipeline") }
        p.models.reverse()
        var spec = knnPipeline.spec
        spec.body = .pipeline(p)
        spec.isUpdatable = false
        p.models = p.models.map { var m = $0; m.isUpdatable = false; return m }
        spec.body = .pipeline(p)
        XCTAssertThrowsError(try ModelKinds.predictor(model: CoreMLModel(spec: spec), batchSize: 1, warn: { _ in })) { error in
            XCTAssertTrue("\(error)".contains("kNearestNeighborsClassifier; Updraft runs only neural networks before a pipeline's last model"), "\(error)")
        }
    }
}
