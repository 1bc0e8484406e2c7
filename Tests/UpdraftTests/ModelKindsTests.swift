import XCTest
@testable import UpdraftModel
@testable import UpdraftChecks
@testable import UpdraftTraining

/// The model-kind seam: which kind updates a model, and that the task, the validator, inspect and
/// the run resolution go through it.
final class ModelKindsTests: XCTestCase {
    func testEachModelTypeHasAtMostOneKind() {
        var seen: [CoreMLModelType: String] = [:]
        for kind in ModelKinds.all {
            for type in kind.modelTypes {
                XCTAssertNil(seen[type], "\(type.name) is claimed by \(seen[type] ?? "") and \(kind.name)")
                seen[type] = kind.name
            }
        }
        XCTAssertEqual(Set(ModelKinds.modelTypeNames), ["neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor"])
    }

    func testNetworksOfEveryCaseAreTheNetworkKind() throws {
        for name in ["dense_sgd_classifier", "mse_regressor", "conv_image_classifier"] {
            let model = try CoreMLModel(contentsOf: Fixtures.url("\(name).mlmodel"))
            XCTAssertEqual(model.spec.modelType, model.kind.modelType, name)
            XCTAssertTrue(ModelKinds.kind(of: model) == NeuralNetworkModelKind.self, name)
        }
        // Core ML's other updatable kinds have no kind yet: the k-NN and pipeline issue adds them.
        XCTAssertNil(ModelKinds.kind(for: .kNearestNeighborsClassifier))
        XCTAssertNil(ModelKinds.kind(for: .pipelineClassifier))
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
        config.computeUnits = .cpuOnly
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
}
