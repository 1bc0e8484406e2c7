import Foundation
import XCTest
import Updraft
@testable import UpdraftCore
@testable import UpdraftModel
@testable import UpdraftTraining

/// The GLM classifier kind (Model field 400) against what we did not make: models coremltools'
/// scikit-learn converter wrote (Fixtures/glm, from Tests/Scripts/make_glm_fixtures.py), scikit-learn's
/// predict_proba, and scikit-learn's SGDClassifier trajectory from the same weights.
final class GLMClassifierTests: XCTestCase {
    private struct Manifest: Decodable {
        struct Case: Decodable {
            struct Split: Decodable { var vectors: [[Double]]; var classes: [Int]?; var probabilities: [[Double]]? }
            struct Update: Decodable { var epochs: Int; var learningRate: Double; var miniBatchSize: Int; var weights: [[Double]]; var offsets: [Double] }
            var model: String
            var labels: [String]
            var encoding: Int
            var train, test: Split
            var update: Update
        }
        var cases: [Case]
    }

    private func manifest() throws -> Manifest {
        try JSONDecoder().decode(Manifest.self, from: Data(contentsOf: Fixtures.url("glm/glm.json")))
    }

    private func model(_ c: Manifest.Case) throws -> CoreMLModel { try CoreMLModel(contentsOf: Fixtures.url("glm/" + c.model)) }

    private func examples(_ split: Manifest.Case.Split) throws -> ArrayBatchProvider {
        try ArrayBatchProvider(inputs: split.vectors.map { Tensor(shape: Shape([$0.count]), data: $0.map(Float.init)) },
                               targets: (split.classes ?? []).map { .classIndex($0) })
    }

    func testReadsWhatTheConverterWroteAndWritesItBackByteForByte() throws {
        for c in try manifest().cases {
            let m = try model(c)
            let glm = try XCTUnwrap(m.spec.glmClassifier, c.model)
            XCTAssertEqual(glm.encoding.rawValue, c.encoding)
            XCTAssertEqual(glm.transform, .logit)
            XCTAssertEqual(glm.labels, .strings(c.labels))
            XCTAssertEqual(glm.inputDimension, 4)
            XCTAssertEqual(m.spec.classLabels, .strings(c.labels))
            XCTAssertEqual(ModelKinds.kind(of: m).name, "GLM classifier")
            XCTAssertEqual(ModelKinds.validate(m, forUpdate: true).errors.map(\.message), [])
            // The typed encoding is coremltools' bytes, and so is the whole file after a replace.
            XCTAssertEqual(m.spec.encoded().last(400)?.payload, m.message.last(400)?.payload, c.model)
            XCTAssertEqual(try m.replacingGLMClassifier(glm).serializedBytes(), try Data(contentsOf: Fixtures.url("glm/" + c.model)).map { $0 })
        }
    }

    func testPredictsScikitLearnsProbabilities() throws {
        for c in try manifest().cases {
            let predictor = try ModelKinds.predictor(model: try model(c), batchSize: 4, warn: { XCTFail($0) })
            XCTAssertEqual(predictor.classLabels, c.labels)
            for (x, expected) in zip(c.test.vectors, try XCTUnwrap(c.test.probabilities)) {
                let p = try predictor.classify(Tensor(shape: Shape([4]), data: x.map(Float.init)), position: "test")
                for (a, b) in zip(p.data, expected) { XCTAssertEqual(Double(a), b, accuracy: 1e-6, c.model) }
            }
            let batch = try predictor.classify(try examples(c.test), range: 0..<c.test.vectors.count, position: "test")
            XCTAssertEqual(batch.probabilities.shape.dims, [c.test.vectors.count, c.labels.count])
            for (a, b) in zip(batch.probabilities.data, try XCTUnwrap(c.test.probabilities).joined()) { XCTAssertEqual(Double(a), b, accuracy: 1e-6) }
            XCTAssertEqual(batch.targets, c.test.classes?.map { .classIndex($0) })
        }
    }

    /// Updraft's update with one example a step, in order, equals scikit-learn's SGDClassifier(log_loss)
    /// started from the same weights; the written model still reads as the converter's kind.
    func testUpdateFollowsScikitLearnsSGDTrajectory() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("glm-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        for c in try manifest().cases {
            var config = UpdateConfiguration()
            config.parameters = [.epochs: .int(Int64(c.update.epochs)), .learningRate: .double(c.update.learningRate),
                                 .miniBatchSize: .int(Int64(c.update.miniBatchSize)), .shuffle: .bool(false)]
            let board = dir.appendingPathComponent("tb-" + c.model)
            config.reporting.tensorboardDirectory = board
            let recorded = Locked<[(UpdateProgressEvent, TrainingMetrics)]>([])
            let task = UpdateTask(model: try model(c), trainingData: try examples(c.train), configuration: config,
                                  handlers: UpdateHandlers(events: [.miniBatchEnd, .epochEnd], progress: { ctx in
                                      recorded.append((ctx.event, ctx.metrics!))
                                  }))
            let ctx = task.run()
            let events = recorded.value
            XCTAssertEqual(ctx.task.state, .completed, "\(ctx.error.map { "\($0)" } ?? "")")
            XCTAssertEqual(events.filter { $0.0 == .epochEnd }.count, c.update.epochs)
            XCTAssertEqual(events.filter { $0.0 == .miniBatchEnd }.count, c.update.epochs * c.train.vectors.count)
            let epochs = events.filter { $0.0 == .epochEnd }.map(\.1)
            XCTAssertLessThan(epochs.last!.meanLoss!, epochs.first!.meanLoss!, "the log loss falls")
            XCTAssertEqual(epochs[0].lossValue, events[c.train.vectors.count - 1].1.lossValue, "lossValue is the last batch's, as Core ML")

            // TensorBoard gets a network run's loss tags.
            let logs = try FileManager.default.contentsOfDirectory(at: board, includingPropertiesForKeys: nil)
            XCTAssertEqual(logs.count, 1)
            let bytes = try Data(contentsOf: XCTUnwrap(logs.first))
            for tag in ["batch/loss", "train/loss", "learning_rate"] { XCTAssertNotNil(bytes.range(of: Data(tag.utf8)), tag) }

            let url = dir.appendingPathComponent(c.model)
            try task.write(to: url)
            let trained = try XCTUnwrap(try CoreMLModel(contentsOf: url).spec.glmClassifier)
            for (row, expected) in zip(trained.weights, c.update.weights) {
                for (a, b) in zip(row, expected) { XCTAssertEqual(a, b, accuracy: 1e-5, c.model) }
            }
            for (a, b) in zip(trained.offsets, c.update.offsets) { XCTAssertEqual(a, b, accuracy: 1e-5, c.model) }
            XCTAssertNotEqual(trained.weights, try model(c).spec.glmClassifier?.weights, "the update changed the weights")
        }
    }

    func testRefusesWhatAGLMUpdateCannotDoByName() throws {
        let c = try manifest().cases[1]
        var adam = UpdateConfiguration()
        adam.optimizer = .adam
        XCTAssertThrowsError(try ModelKinds.resolve(model: try model(c), configuration: adam)) {
            XCTAssertTrue("\($0)".contains("trains with SGD"), "\($0)")
        }
        var probit = try XCTUnwrap(try model(c).spec.glmClassifier)
        probit.transform = .probit
        XCTAssertTrue(GLMClassifierValidator.validate(try model(c).spec, probit).errors.contains { $0.message.contains("probit") })
        // A label the model does not have is named before any step.
        let foreign = try ArrayBatchProvider(inputs: [Tensor(shape: Shape([4]), data: [0, 0, 0, 0])], targets: [.classIndex(7)])
        let ctx = UpdateTask(model: try model(c), trainingData: foreign, configuration: UpdateConfiguration()).run()
        XCTAssertEqual(ctx.task.state, .failed)
        XCTAssertTrue("\(ctx.error.map { "\($0)" } ?? "")".contains("class index"), "\(ctx.error.map { "\($0)" } ?? "")")
    }

    func testValidatorNamesEveryProblem() throws {
        let m = try model(try manifest().cases[1])
        var glm = try XCTUnwrap(m.spec.glmClassifier)
        glm.weights[2].removeLast()
        glm.offsets.removeLast()
        var spec = m.spec
        spec.isUpdatable = true
        let messages = GLMClassifierValidator.validate(spec, glm).errors.map(\.message)
        XCTAssertTrue(messages.contains { $0.contains("rows differ in length") }, "\(messages)")
        XCTAssertTrue(messages.contains { $0.contains("2 offsets for 3 weight rows") }, "\(messages)")
        XCTAssertTrue(messages.contains { $0.contains("marked updatable") }, "\(messages)")
        let report = ModelKinds.report(m)
        XCTAssertEqual(report.kind, "glmClassifier")
        XCTAssertTrue(report.details.contains { $0.contains("3 weight rows over 4 inputs") }, "\(report.details)")
        XCTAssertTrue(try ModelKinds.plannedNetwork(m).note?.contains("host CPU") == true)
    }
}
