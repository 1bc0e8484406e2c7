import Foundation
import XCTest
import Updraft

/// A pipeline's k-NN updated through the models before it: each appended sample is the embedding
/// of its example (computed here independently), its label the data's, every other byte kept.
final class PipelineNearestNeighborsUpdateTests: FolderTestCase {
    private func update(_ model: CoreMLModel, data: BatchProvider, configure: (inout UpdateConfiguration) -> Void = { _ in })
        throws -> (model: CoreMLModel, events: Int) {
        var config = UpdateConfiguration()
        configure(&config)
        let events = Locked<Int>(0)
        let task = UpdateTask(model: model, trainingData: data, configuration: config, handlers: UpdateHandlers(
            progress: { ctx in if ctx.event == .miniBatchEnd { events.mutate { $0 += 1 } } }))
        let ctx = task.run()
        XCTAssertEqual(ctx.task.state, .completed, "\(ctx.error.map { "\($0)" } ?? "")")
        return (try task.currentModel(), events.value)
    }

    private func knn(of pipeline: CoreMLModel) throws -> KNearestNeighborsSpec {
        try XCTUnwrap(try pipeline.pipelineModels().last?.kNearestNeighbors)
    }

    /// The fixture of coremltools' builders: an inner-product embedding (6 -> 4, zero bias) and a
    /// k-NN with string labels; rows with labels.txt, one label new to the k-NN.
    func testAppendsTheEmbeddingOfEachRow() throws {
        struct Made: Decodable { var samples: [[Float]]; var labels: [String]; var embeddingWeights: [[Float]] }
        let made = try JSONDecoder().decode(Made.self, from: Data(contentsOf: Fixtures.url("knn/pipeline_embedding_knn.json")))
        let model = try CoreMLModel(contentsOf: Fixtures.url("knn/pipeline_embedding_knn.mlmodel"))
        var rng = SplitMix64(seed: 9)
        let rows = (0..<7).map { _ in (0..<6).map { _ in rng.nextFloat(in: -2...2) } }
        let labels = ["left", "up", "right", "up", "left", "left", "right"]
        try NpyArray(shape: [7, 6], descr: "<f4", values: .float(rows.flatMap { $0 })).serialized()
            .write(to: folder.appendingPathComponent("inputs.npy"))
        try Data(labels.map { $0 + "\n" }.joined().utf8).write(to: folder.appendingPathComponent("labels.txt"))
        let data = try ModelDataset(model: model, path: folder).provider

        for units in [ComputeUnits.cpuOnly, .cpuAndGPU] {
            let (updated, events) = try update(model, data: data) { $0.placement.computeUnits = units; $0.parameters[.miniBatchSize] = .int(3) }
            XCTAssertEqual(events, 3, "7 rows in batches of 3")
            let knn = try knn(of: updated)
            XCTAssertEqual(knn.samples.count, made.samples.count + 7)
            XCTAssertEqual(Array(knn.samples.prefix(made.samples.count)), made.samples, "the stored samples stay")
            XCTAssertEqual(knn.labels?.asStrings, made.labels + labels)
            for (row, sample) in zip(rows, knn.samples.suffix(7)) {
                let e = made.embeddingWeights.map { w in zip(w, row).reduce(0.0) { $0 + Double($1.0) * Double($1.1) } }
                for (a, b) in zip(sample, e) { XCTAssertEqual(Double(a), b, accuracy: 1e-5, "\(units)") }
            }
            XCTAssertEqual(knn.distinctLabels, ["left", "right", "up"], "a label the k-NN did not know is added")
            XCTAssertEqual(try updated.pipelineModels()[0].serializedBytes(), try model.pipelineModels()[0].serializedBytes())
            XCTAssertEqual(ModelKinds.validate(updated), [])
        }
    }

    /// The article's model from `updraft create knn`, personalised from an image folder whose classes
    /// it has never seen: each sample is the network's own blob for its image.
    func testAnImageFolderPersonalisesACreatedPipeline() throws {
        let network = try SqueezeShaped.model()
        let pipeline = try NearestNeighborsPipeline(neighbors: 1).make(featureExtractor: network)
        let data = folder.appendingPathComponent("images")
        writeNoisyImageFolder(data, perLabel: 3, seed: 4)
        let dataset = try ModelDataset(model: pipeline, path: data).provider
        let (updated, _) = try update(pipeline, data: dataset) { $0.placement.computeUnits = .cpuOnly }
        let knn = try knn(of: updated)
        XCTAssertEqual(knn.labels?.asStrings.sorted(), ["no", "no", "no", "yes", "yes", "yes"])
        XCTAssertEqual(knn.distinctLabels.sorted(), ["no", "unknown", "yes"])

        // The network's own blob for each image, run by the network itself.
        let head = try XCTUnwrap(network.layers.last { if case .innerProduct = $0.params { return true } else { return false } })
        let runner = try InferenceRunner(graph: NetworkGraph(model: network), prefix: CPUBackend(), tail: CPUBackend(), warn: { _ in })
        let batch = try dataset.batch(at: 0..<dataset.count)
        let blob = try runner.run(position: "") { try $0.predict(batch.inputs, blob: head.inputs[0]) }
        let width = Int(knn.dimension)
        for i in 0..<dataset.count {
            for (a, b) in zip(knn.samples[i], blob.data[i * width..<(i + 1) * width]) { XCTAssertEqual(a, b, accuracy: 1e-4 * max(1, abs(b))) }
        }
        // Each training image is its own nearest sample: the personalised model answers its label.
        let predictor = try ModelKinds.predictor(model: updated, batchSize: dataset.count, warn: { _ in })
        let (p, targets) = try predictor.classify(dataset, range: 0..<dataset.count, position: "")
        let labels = try XCTUnwrap(predictor.classLabels)
        for (i, t) in targets.enumerated() {
            guard case let .classIndex(c) = t else { return XCTFail("class targets expected") }
            let row = Array(p.data[i * labels.count..<(i + 1) * labels.count])
            XCTAssertEqual(labels[row.firstIndex(of: row.max()!)!], (dataset as! ImageFolderDataset).classLabels[c])
        }
    }

    /// A PyTorch CNN converted by coremltools, then an empty k-NN (Tests/Scripts/make_knn_torch_fixtures.py):
    /// the stored samples are PyTorch's embeddings of the images, and the answers scikit-learn's.
    func testAConvertedPyTorchEmbeddingStoresWhatPyTorchComputes() throws {
        struct Made: Decodable {
            var trainEmbeddings: [[Float]]; var trainLabels: [String]; var queryLabels: [String]
            var predicted: [String]; var probabilities: [[Double]]; var classes: [String]
        }
        let made = try JSONDecoder().decode(Made.self, from: Data(contentsOf: Fixtures.url("knn/torch_pipeline.json")))
        let model = try CoreMLModel(contentsOf: Fixtures.url("knn/torch_pipeline.mlmodel"))
        XCTAssertEqual(ModelKinds.validate(model), [])
        let train = try ModelDataset(model: model, path: Fixtures.url("knn/torch_train")).provider
        for pin in [nil, "0"] {
            let (updated, _) = try update(model, data: train) { $0.placement.deviceOption = pin; $0.placement.computeUnits = pin == nil ? .cpuOnly : .all }
            let knn = try knn(of: updated)
            XCTAssertEqual(knn.labels?.asStrings, made.trainLabels)
            XCTAssertEqual(knn.samples.count, made.trainEmbeddings.count)
            for (mine, torch) in zip(knn.samples, made.trainEmbeddings) {
                for (a, b) in zip(mine, torch) { XCTAssertEqual(a, b, accuracy: 1e-4, "device \(pin ?? "cpu")") }
            }
            let queries = try ModelDataset(model: updated, path: Fixtures.url("knn/torch_queries")).provider
            var config = UpdateConfiguration()
            config.placement.deviceOption = pin
            let predictor = try ModelKinds.predictor(model: updated, configuration: config, batchSize: queries.count, warn: { _ in })
            let (p, _) = try predictor.classify(queries, range: 0..<queries.count, position: "")
            let labels = try XCTUnwrap(predictor.classLabels)
            for i in 0..<queries.count {
                let row = Array(p.data[i * labels.count..<(i + 1) * labels.count])
                XCTAssertEqual(labels[row.firstIndex(of: row.max()!)!], made.predicted[i], "query \(i)")
                for (c, label) in made.classes.enumerated() {
                    XCTAssertEqual(Double(row[labels.firstIndex(of: label)!]), made.probabilities[i][c], accuracy: 1e-5, "query \(i) \(label)")
                }
            }
        }
    }

    /// A k-NN whose dimension is not the extractor's output width: a loud error naming both, before any work.
    func testADimensionThatIsNotTheExtractorsIsRefused() throws {
        let model = try CoreMLModel(contentsOf: Fixtures.url("knn/torch_pipeline.mlmodel"))
        guard case var .pipeline(p) = model.spec.body, case var .kNearestNeighbors(inner) = p.models[1].body else { return XCTFail("fixture") }
        inner.dimension = 11
        p.models[1].body = .kNearestNeighbors(inner)
        var spec = model.spec
        spec.body = .pipeline(p)
        let bad = CoreMLModel(spec: spec)
        let train = try ModelDataset(model: bad, path: Fixtures.url("knn/torch_train")).provider
        let task = UpdateTask(model: bad, trainingData: train, configuration: {
            var c = UpdateConfiguration(); c.placement.computeUnits = .cpuOnly; return c }())
        let ctx = task.run()
        XCTAssertEqual(ctx.task.state, .failed)
        let message = "\(ctx.error.map { "\($0)" } ?? "")"
        XCTAssertTrue(message.contains("11-dimensional") && message.contains("12 values"), message)
        XCTAssertEqual(try knn(of: task.currentModel()).samples.count, 0, "nothing appended")
        XCTAssertThrowsError(try ModelKinds.predictor(model: bad, batchSize: 1, warn: { _ in }))
    }

    func testTheCommandPersonalisesAPipelineAndLeavesTheInputAlone() throws {
        let source = folder.appendingPathComponent("net.mlmodel"), created = folder.appendingPathComponent("knn.mlmodel")
        let out = folder.appendingPathComponent("personal.mlmodel")
        try SqueezeShaped.model().write(to: source)
        XCTAssertEqual(try runUpdraft(["create", "knn", "--feature-extractor", source.path, "--neighbors", "1", "--out", created.path],
                                      cacheDirectory: folder).status, 0)
        let before = try Data(contentsOf: created)
        let data = folder.appendingPathComponent("images")
        writeNoisyImageFolder(data, perLabel: 2, seed: 5)
        let run = try runUpdraft(["train", created.path, "--train", data.path, "--out", out.path, "--compute-units", "cpuOnly"],
                                 cacheDirectory: folder)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(try Data(contentsOf: created), before, "the input model is never touched")
        XCTAssertEqual(try knn(of: CoreMLModel(contentsOf: out)).samples.count, 4)
        // predict --json keeps its shape and names the neighbours (an image it stored is its own nearest, at distance 0).
        let image = data.appendingPathComponent("yes/0.png")
        let predicted = try runUpdraft(["predict", out.path, image.path, "--json", "--compute-units", "cpuOnly"], cacheDirectory: folder)
        XCTAssertEqual(predicted.status, 0, predicted.stderr)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(predicted.stdout.utf8)) as? [String: Any])
        let top = try XCTUnwrap(object["top"] as? [[String: Any]])
        XCTAssertEqual(top.first?["label"] as? String, "yes")
        let neighbors = try XCTUnwrap(object["neighbors"] as? [[String: Any]])
        XCTAssertEqual(neighbors.first?["label"] as? String, "yes")
        XCTAssertEqual(try XCTUnwrap(neighbors.first?["distance"] as? Double), 0, accuracy: 1e-3)
        let wrong = try runUpdraft(["train", created.path, "--train", data.path, "--out", out.path, "--neighbors", "5000"],
                                   cacheDirectory: folder)
        XCTAssertNotEqual(wrong.status, 0)
        XCTAssertTrue(wrong.stderr.contains("5000"), wrong.stderr)
    }
}
