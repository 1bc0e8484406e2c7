import XCTest
import Updraft
@testable import UpdraftTraining

/// The model-kind seam: which kind updates a model, and that the task, the validator, inspect,
/// the run resolution and forward work (evaluate, predict) go through it.
final class ModelKindsTests: XCTestCase {
    func testEachModelTypeHasAtMostOneKind() {
        var seen: [CoreMLModelType: String] = [:]
        for kind in ModelKinds.all {
            for type in kind.modelTypes {
                XCTAssertNil(seen[type], "\(type.name) is claimed by \(seen[type] ?? "") and \(kind.name)")
                seen[type] = kind.name
            }
        }
        XCTAssertEqual(Set(ModelKinds.modelTypeNames), ["neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor",
                                                         "kNearestNeighborsClassifier", "pipeline", "pipelineClassifier", "pipelineRegressor",
                                                         "glmClassifier"])
    }

    func testNetworksOfEveryCaseAreTheNetworkKind() throws {
        for name in ["dense_sgd_classifier", "mse_regressor", "conv_image_classifier"] {
            let model = try CoreMLModel(contentsOf: Fixtures.url("\(name).mlmodel"))
            XCTAssertEqual(model.spec.modelType, model.kind.modelType, name)
            XCTAssertTrue(ModelKinds.kind(of: model) == NeuralNetworkModelKind.self, name)
        }
        // Core ML's other updatable kinds are kinds of their own.
        XCTAssertTrue(ModelKinds.kind(for: .kNearestNeighborsClassifier) == KNearestNeighborsModelKind.self)
        XCTAssertTrue(ModelKinds.kind(for: .pipelineClassifier) == PipelineModelKind.self)
        // A kind past Core ML's updatable ones, through the open model-body family.
        XCTAssertTrue(ModelKinds.kind(for: .glmClassifier) == GLMClassifierModelKind.self)
        XCTAssertNil(ModelKinds.kind(for: .treeEnsembleClassifier))
    }

    /// A pipeline hands its work to its last model's kind (`PipelineLastModelKind`): a network and a k-NN
    /// can end one; a last model of another kind (here a pipeline) is refused by name, and planned with a note.
    func testAPipelineDispatchesToItsLastModelsKind() throws {
        XCTAssertTrue(NeuralNetworkModelKind.self is any PipelineLastModelKind.Type)
        XCTAssertTrue(KNearestNeighborsModelKind.self is any PipelineLastModelKind.Type)
        XCTAssertFalse(PipelineModelKind.self is any PipelineLastModelKind.Type)
        let inner = try CoreMLModel(contentsOf: Fixtures.url("pipeline/network_last.mlmodel"))
        guard case let .pipeline(p) = inner.spec.body else { return XCTFail("not a pipeline") }
        var outer = inner.spec
        outer.body = .pipeline(PipelineSpec(kind: p.kind, models: [p.models[0], inner.spec]))
        let nested = CoreMLModel(spec: outer)
        XCTAssertThrowsError(try PipelineModelKind.makePredictor(model: nested, configuration: UpdateConfiguration(), batchSize: 1,
                                                                 batchSource: "the batch size", environment: [:], warn: { _ in })) {
            XCTAssertTrue("\($0)".contains("last model is a pipeline"), "\($0)")
        }
        let planned = try PipelineModelKind.plannedNetwork(nested)
        XCTAssertNil(planned.network)
        XCTAssertTrue(planned.note?.contains("not planned") ?? false, "\(planned)")
    }

    func testValidationAndInspectGoThroughTheKind() throws {
        for name in ["dense_sgd_classifier", "unsupported_layer", "quantized_weights"] {
            let model = try CoreMLModel(contentsOf: Fixtures.url("\(name).mlmodel"))
            XCTAssertEqual(ModelKinds.validate(model), ModelValidator.validate(model), name)
            XCTAssertEqual(ModelKinds.report(model, file: name).text(), ModelReport(model: model, file: name).text(), name)
        }
        let bad = try CoreMLModel(contentsOf: Fixtures.url("unsupported_layer.mlmodel"))
        XCTAssertFalse(ModelKinds.validate(bad).filter { $0.severity == .error }.isEmpty)
    }

    func testATaskTrainsThroughItsKindsSession() throws {
        let (golden, model) = try GoldenRun.load("branches_sgd")
        let data = try ArrayBatchProvider(examples: golden.examples)
        var config = UpdateConfiguration()
        config.placement.computeUnits = .cpuOnly
        // Resolved through the kind, the run trains the same as one resolved directly.
        let viaKind = try ModelKinds.resolve(model: model, configuration: config)
        let direct = try ResolvedRun.resolve(model: model, configuration: config)
        XCTAssertEqual(viaKind.parameters, direct.parameters)
        let sessionType = Locked<String>("")
        let task = UpdateTask(run: viaKind, trainingData: data, handlers: UpdateHandlers(events: [.trainingBegin], progress: { ctx in
            sessionType.mutate { $0 = ctx.task.session.map { "\(type(of: $0))" } ?? "none" }
        }))
        let final = task.run()
        XCTAssertNil(final.error)
        XCTAssertEqual(sessionType.value, "TrainingSession")
        XCTAssertEqual(task.history.epochs.count, golden.epochs)
        // The same losses and weights as the run resolved directly.
        let directTask = UpdateTask(run: direct, trainingData: data)
        XCTAssertNil(directTask.run().error)
        XCTAssertEqual(task.history.epochs.map(\.lossValue), directTask.history.epochs.map(\.lossValue))
        XCTAssertEqual(try task.currentModel().serializedBytes(), try directTask.currentModel().serializedBytes())
    }

    /// A network's predictor, made by its kind within cpuOnly, gives what `InferenceRunner` on the
    /// CPU backend gives: the same probabilities (image tensors and one input alone) and loss.
    func testPredictionGoesThroughTheKind() throws {
        let model = try CoreMLModel(contentsOf: Fixtures.url("conv_image_classifier.mlmodel"))
        let data = try ArrayBatchProvider(examples: (0..<5).map {
            TrainingExample(input: Tensor(shape: [3, 16, 16], uniformIn: 0...255, seed: UInt64($0)), target: .classIndex($0 % 2))
        })
        var config = UpdateConfiguration()
        config.placement.computeUnits = .cpuOnly
        let predictor = try ModelKinds.predictor(model: model, configuration: config, batchSize: 5, warn: { XCTFail("no warning: \($0)") })
        XCTAssertTrue(predictor is NeuralNetworkPredictor)
        XCTAssertEqual(predictor.deviceName, "cpu")
        XCTAssertEqual(predictor.classLabels, ["no", "yes"])
        XCTAssertNoThrow(try predictor.checkMemory(batchSize: 5, work: .evaluation))

        let runner = try InferenceRunner(graph: try NetworkGraph(model: model), prefix: CPUBackend(), tail: CPUBackend(),
                                         warn: { XCTFail("no warning: \($0)") })
        let batch = try data.batch(at: 0..<5)
        let (probabilities, targets) = try predictor.classify(data, range: 0..<5, position: "examples 1-5")
        XCTAssertEqual(probabilities, try runner.run(position: "") { try $0.predict(batch.inputs) })
        XCTAssertEqual(targets, batch.targets)
        XCTAssertEqual(probabilities.shape.dims, [5, 2, 1, 1])
        let one = try predictor.classify(try data.example(at: 3).input, position: "example 4")
        // One example against the batch of five: OpenBLAS may pick another kernel for another row
        // count (on AVX-512 hosts it does), so the sums may round differently in the last bit.
        for (a, b) in zip(one.data, probabilities.data[6..<8]) { XCTAssertEqual(a, b, accuracy: 1e-6) }
        let loss = try predictor.loss(data, range: 1..<4, position: "examples 2-4")
        XCTAssertEqual(loss.count, 3)
        XCTAssertEqual(loss.loss, try runner.run(position: "") { try $0.evaluate(try data.batch(at: 1..<4)) }.loss)

        // The batch the network cannot hold is refused by the kind, naming what set it.
        XCTAssertThrowsError(try ModelKinds.predictor(model: model, configuration: config, batchSize: 0, batchSource: "--batch-size",
                                                      warn: { _ in })) { error in
            XCTAssertTrue("\(error)".contains("--batch-size"), "\(error)")
        }
    }

    /// `updraft evaluate` and `updraft predict`, which run through the kind's predictor, agree with
    /// each other on the same images: evaluate's accuracy is the share of images whose predicted
    /// top label is their folder's, and its confusion matrix counts the same predictions.
    func testEvaluateAndPredictCommandsAgree() throws {
        let files = CommandTestFiles("updraft-kinds-cli")
        defer { files.remove() }
        writeNoisyImageFolder(files.data, perLabel: 3, seed: 5)
        let evaluate = try runUpdraft(["evaluate", files.model, "--data", files.data.path, "--batch-size", "4",
                                       "--compute-units", "cpuOnly", "--json"], cacheDirectory: files.cache)
        XCTAssertEqual(evaluate.status, 0, evaluate.stderr)
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(evaluate.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(summary["examples"] as? Int, 6)
        XCTAssertEqual(summary["device"] as? String, "cpu")
        let confusion = try XCTUnwrap(summary["confusion"] as? [[Int]])

        var images: [(label: Int, path: String)] = []
        for (label, name) in ["no", "yes"].enumerated() {
            for i in 0..<3 { images.append((label, files.data.appendingPathComponent("\(name)/\(i).png").path)) }
        }
        let predict = try runUpdraft(["predict", files.model] + images.map(\.path) + ["--top", "2", "--compute-units", "cpuOnly", "--json"],
                                     cacheDirectory: files.cache)
        XCTAssertEqual(predict.status, 0, predict.stderr)
        let lines = predict.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, images.count)
        var counted = [[0, 0], [0, 0]]
        for (line, image) in zip(lines, images) {
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            XCTAssertEqual(object["image"] as? String, image.path)
            let top = try XCTUnwrap(object["top"] as? [[String: Any]])
            XCTAssertEqual(top.count, 2)
            let probabilities = top.compactMap { $0["probability"] as? Double }
            XCTAssertEqual(probabilities.reduce(0, +), 1, accuracy: 1e-5)
            XCTAssertGreaterThanOrEqual(probabilities[0], probabilities[1])
            let predicted = ["no", "yes"].firstIndex(of: top[0]["label"] as? String ?? "")!
            counted[image.label][predicted] += 1
        }
        XCTAssertEqual(confusion, counted)
        let accuracy = try XCTUnwrap(summary["accuracy"] as? Double)
        XCTAssertEqual(accuracy, Double(counted[0][0] + counted[1][1]) / 6, accuracy: 1e-12)
    }
}
