import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftModel
@testable import UpdraftChecks
@testable import UpdraftData
@testable import UpdraftTraining

/// Every problem of a model at once: `NetworkGraph(model:)`, the validator, `inspect`, `plan`,
/// `train` and `UpdateTask` all give the same full list, unsupported layers grouped by type.
final class GraphProblemsTests: XCTestCase {
    static func dense(_ name: String, _ input: String, _ output: String, inputs: Int, outputs: Int) -> LayerSpec {
        LayerSpec(name: name, inputs: [input], outputs: [output], params: .innerProduct(InnerProductLayerParams(
            inputChannels: inputs, outputChannels: outputs, hasBias: false,
            weights: WeightParams(values: [Float](repeating: 0.1, count: inputs * outputs)), bias: nil)))
    }

    /// x [4] -> fc1 -> emb1 (embedding) -> fc2 -> emb2 (embedding) -> topk (topK) -> softmax,
    /// and fc1 -> fcBad (expects 7 inputs, gets 6) -> fc3.
    static func troubledModel() -> CoreMLModel {
        let layers = [
            dense("fc1", "x", "h1", inputs: 4, outputs: 6),
            LayerSpec(name: "emb1", inputs: ["h1"], outputs: ["e1"], params: .unsupported(field: 150, name: "embedding")),
            dense("fc2", "e1", "h2", inputs: 6, outputs: 5),
            LayerSpec(name: "emb2", inputs: ["h2"], outputs: ["e2"], params: .unsupported(field: 150, name: "embedding")),
            LayerSpec(name: "topk", inputs: ["e2"], outputs: ["t"], params: .unsupported(field: 1015, name: "topK")),
            dense("fcBad", "h1", "hb", inputs: 7, outputs: 2),
            dense("fc3", "hb", "h3", inputs: 2, outputs: 2),
            LayerSpec(name: "softmax", inputs: ["t"], outputs: ["probs"], params: .softmax),
        ]
        let description = ModelDescription(
            inputs: [FeatureDescription(name: "x", type: .multiArray(.init(shape: [4], dataType: .double)))],
            outputs: [FeatureDescription(name: "probs", type: .multiArray(.init(shape: [5], dataType: .double))),
                      FeatureDescription(name: "h3", type: .multiArray(.init(shape: [2], dataType: .double)))])
        return CoreMLModel(spec: ModelSpec(specificationVersion: 4, description: description, isUpdatable: false,
                                           network: NeuralNetworkSpec(kind: .plain, layers: layers)))
    }

    func testEveryProblemIsCollectedAndDownstreamLayersAreOnlyCounted() throws {
        let (graph, problems) = NetworkGraph.checked(Self.troubledModel())
        XCTAssertEqual(problems.problems.compactMap(\.layer), ["emb1", "emb2", "topk", "fcBad"])
        XCTAssertEqual(problems.unchecked.map(\.layer), ["fc2", "fc3", "softmax"])
        XCTAssertEqual(problems.unchecked.map(\.cause), ["emb1", "fcBad", "topk"])
        XCTAssertEqual(graph.layers.map(\.name), ["fc1"], "the layers that could be built keep their shapes")
        let groups = problems.groups
        XCTAssertEqual(groups.map(\.layers), [["emb1", "emb2"], ["topk"], ["fcBad"]])
        XCTAssertEqual(groups[0].message,
                       "embedding: 2 layers ('emb1', 'emb2'), not supported: Updraft cannot run this layer type (NeuralNetworkLayer field 150)")
        XCTAssertTrue(groups[2].message.contains("layer 'fcBad' (innerProduct): expects 7 inputs per example"), groups[2].message)
        XCTAssertNotNil(groups[0].hint)
    }

    func testTheGraphThrowsTheWholeListInOneError() {
        do {
            _ = try NetworkGraph(model: Self.troubledModel())
            XCTFail("the graph built")
        } catch let e as UpdraftError {
            XCTAssertEqual(e.kind, .unsupported)
            for fragment in ["4 problems", "embedding: 2 layers ('emb1', 'emb2')", "topK: 1 layer ('topk')", "'fcBad'",
                             "3 layers after them not checked", "'fc2', 'fc3', 'softmax'", "updraft inspect"] {
                XCTAssertTrue(e.description.contains(fragment), "\(fragment) missing from: \(e.description)")
            }
        } catch {
            XCTFail("\(error)")
        }
        // One problem alone is thrown as the layer reported it.
        var one = Self.troubledModel().spec
        one.network.layers = [Self.dense("fc1", "x", "h1", inputs: 4, outputs: 6),
                              LayerSpec(name: "emb1", inputs: ["h1"], outputs: ["probs"], params: .unsupported(field: 150, name: "embedding"))]
        one.description.outputs.removeLast()
        assertErrorMentions(try NetworkGraph(model: CoreMLModel(spec: one)), containing: ["layer 'emb1' is a embedding layer"])
    }

    func testManyLayersOfOneTypeAreOneLineWithACount() {
        var spec = Self.troubledModel().spec
        var layers = [Self.dense("fc1", "x", "b0", inputs: 4, outputs: 6)]
        for i in 0..<35 {
            layers.append(LayerSpec(name: "features.\(i).2", inputs: ["b\(i)"], outputs: ["b\(i + 1)"], params: .unsupported(field: 150, name: "embedding")))
        }
        layers.append(LayerSpec(name: "softmax", inputs: ["b35"], outputs: ["probs"], params: .softmax))
        spec.network.layers = layers
        spec.description.outputs.removeLast()
        let (_, problems) = NetworkGraph.checked(CoreMLModel(spec: spec))
        XCTAssertEqual(problems.groups.count, 1)
        XCTAssertTrue(problems.groups[0].message.hasPrefix("embedding: 35 layers ('features.0.2', 'features.1.2',"), problems.groups[0].message)
        XCTAssertTrue(problems.groups[0].message.contains("… 27 more)"), problems.groups[0].message)
        XCTAssertEqual(problems.groups[0].layers.count, 35)
        XCTAssertEqual(problems.unchecked.map(\.layer), ["softmax"])
    }

    func testValidatorAndReportListTheGroups() throws {
        let model = Self.troubledModel()
        let findings = ModelValidator.validate(model)
        let grouped = try XCTUnwrap(findings.first { $0.message.hasPrefix("embedding: 2 layers") })
        XCTAssertEqual(grouped.layers, ["emb1", "emb2"])
        XCTAssertTrue(findings.contains { $0.message.contains("'fcBad'") })
        let notUpdatable = try XCTUnwrap(findings.first { $0.message.contains("not updatable") })
        XCTAssertTrue(notUpdatable.hint?.contains("updraft make-updatable MODEL --layers fc3 --out OUT") == true, "\(notUpdatable)")
        XCTAssertTrue(notUpdatable.hint?.contains("fc1, fc2, fcBad, fc3") == true, "\(notUpdatable)")
        let report = ModelReport(model: model)
        let text = report.text()
        XCTAssertTrue(text.contains("error: embedding: 2 layers ('emb1', 'emb2')"), text)
        XCTAssertTrue(text.contains("note: 3 layers after them not checked"), text)
        XCTAssertEqual(report.uncheckedLayers, ["fc2", "fc3", "softmax"])
        XCTAssertTrue(try report.json().contains("\"layers\" : ["), "grouped findings list their layers in JSON")
        // fc1's shape is known, the failed ones' not.
        XCTAssertEqual(report.layers.first { $0.name == "fc1" }?.outputShape, [6, 1, 1])
        XCTAssertNil(report.layers.first { $0.name == "fcBad" }?.outputShape)
    }

    func testHyperparameterProblemsNameTheOptionThatFixesThem() throws {
        var spec = try CoreMLModel(contentsOf: Fixtures.url("dense_sgd_classifier.mlmodel")).spec
        spec.network.updateParameters?.epochs = Int64Parameter(defaultValue: 3, allowed: .set([1, 5]))
        let findings = ModelValidator.validate(CoreMLModel(spec: spec))
        let epochs = try XCTUnwrap(findings.first { $0.message.contains("epochs default 3") })
        XCTAssertTrue(epochs.hint?.contains("updraft make-updatable MODEL --epochs N --allowed-epochs") == true, "\(epochs)")
    }

    func testCommandsRefuseWithTheSameList() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-problems-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("troubled.mlmodel")
        try Self.troubledModel().write(to: path)

        let inspect = try runUpdraft(["inspect", path.path], cacheDirectory: dir)
        XCTAssertEqual(inspect.status, 0, "without --strict inspect only reports")
        XCTAssertTrue(inspect.stdout.contains("embedding: 2 layers ('emb1', 'emb2')"), inspect.stdout)
        XCTAssertTrue(inspect.stdout.contains("topK: 1 layer ('topk')"), inspect.stdout)
        let strict = try runUpdraft(["inspect", "--strict", path.path], cacheDirectory: dir)
        XCTAssertEqual(strict.status, 1)
        let plan = try runUpdraft(["plan", path.path, "--compute-units", "cpuOnly"], cacheDirectory: dir)
        XCTAssertNotEqual(plan.status, 0)
        for fragment in ["embedding: 2 layers ('emb1', 'emb2')", "topK: 1 layer ('topk')", "'fcBad'"] {
            XCTAssertTrue(plan.stderr.contains(fragment), "plan: \(fragment) missing from \(plan.stderr)")
        }
        let data = dir.appendingPathComponent("data")
        let train = try runUpdraft(["train", path.path, "--train", data.path, "--compute-units", "cpuOnly"], cacheDirectory: dir)
        XCTAssertNotEqual(train.status, 0)
        for fragment in ["embedding: 2 layers ('emb1', 'emb2')", "topK: 1 layer ('topk')", "'fcBad'", "not updatable"] {
            XCTAssertTrue(train.stderr.contains(fragment), "train: \(fragment) missing from \(train.stderr)")
        }
    }

    func testUpdateTaskFailsWithTheList() throws {
        let examples = [TrainingExample(input: Tensor(shape: [4], data: [0, 1, 2, 3]), target: .classIndex(0))]
        var config = UpdateConfiguration()
        config.placement.computeUnits = .cpuOnly
        let task = UpdateTask(model: Self.troubledModel(), trainingData: try ArrayBatchProvider(examples: examples),
                              configuration: config)
        let final = task.run()
        XCTAssertEqual(final.task.state, .failed)
        let text = final.error.map { "\($0)" } ?? ""
        XCTAssertTrue(text.contains("embedding: 2 layers ('emb1', 'emb2')") && text.contains("'fcBad'"), text)
    }
}
