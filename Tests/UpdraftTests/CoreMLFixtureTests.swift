import Foundation
import XCTest
@testable import UpdraftModel
@testable import UpdraftChecks

/// The coremltools-made fixtures (Tests/Scripts/make_fixtures.py) and what coremltools itself
/// reads from them (Fixtures/expected.json), located next to this file.
enum CoreMLFixtures {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
    static let names = ["dense_sgd_classifier", "dense_adam_classifier", "mse_regressor", "conv_image_classifier",
                        "concat_branches", "float16_frozen", "quantized_weights", "unsupported_layer"]
    /// Fixtures whose graphs Updraft can build.
    static let runnable = ["dense_sgd_classifier", "dense_adam_classifier", "mse_regressor", "conv_image_classifier",
                           "concat_branches", "float16_frozen"]

    static func url(_ name: String) -> URL { folder.appendingPathComponent(name + ".mlmodel") }
    static func bytes(_ name: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: url(name))) }
    static func model(_ name: String) throws -> CoreMLModel { try CoreMLModel(contentsOf: url(name)) }

    struct ExpectedValues: Decodable { var count: Int; var crc32: UInt32; var first: [Double]; var isUpdatable: Bool }
    struct ExpectedLayer: Decodable {
        var name: String; var type: String; var isUpdatable: Bool
        var weights: ExpectedValues?; var bias: ExpectedValues?
    }
    struct ExpectedModel: Decodable {
        var kind: String; var specificationVersion: Int; var isUpdatable: Bool
        var layers: [ExpectedLayer]; var inputs: [String]; var outputs: [String]; var trainingInputs: [String]
    }
    static func expected() throws -> [String: ExpectedModel] {
        try JSONDecoder().decode([String: ExpectedModel].self, from: Data(contentsOf: folder.appendingPathComponent("expected.json")))
    }
}

/// Asserts that `body` throws an error whose description contains every one of `fragments`.
func assertErrorMentions<T>(_ body: @autoclosure () throws -> T, containing fragments: [String],
                     file: StaticString = #filePath, line: UInt = #line) {
    do {
        _ = try body()
        XCTFail("expected an error containing \(fragments)", file: file, line: line)
    } catch {
        let text = "\(error)"
        for f in fragments where !text.contains(f) {
            XCTFail("error \"\(text)\" does not mention \"\(f)\"", file: file, line: line)
        }
    }
}

final class CoreMLFixtureTests: XCTestCase {
    func testEveryFixtureLoads() throws {
        for name in CoreMLFixtures.names {
            XCTAssertNoThrow(try CoreMLFixtures.model(name), name)
        }
    }

    /// Updraft reads the same model, layers, flags and weight values as coremltools does.
    func testUpdraftReadsWhatCoremltoolsReads() throws {
        let expected = try CoreMLFixtures.expected()
        XCTAssertEqual(Set(expected.keys), Set(CoreMLFixtures.names.map { $0 + ".mlmodel" }))
        for name in CoreMLFixtures.names {
            let e = try XCTUnwrap(expected[name + ".mlmodel"])
            let model = try CoreMLFixtures.model(name)
            XCTAssertEqual(model.kind.rawValue, e.kind, name)
            XCTAssertEqual(model.specificationVersion, e.specificationVersion, name)
            XCTAssertEqual(model.isUpdatable, e.isUpdatable, name)
            XCTAssertEqual(model.modelDescription.inputs.map(\.name), e.inputs, name)
            XCTAssertEqual(model.modelDescription.outputs.map(\.name), e.outputs, name)
            XCTAssertEqual(model.modelDescription.trainingInputs.map(\.name), e.trainingInputs, name)
            XCTAssertEqual(model.layers.map(\.name), e.layers.map(\.name), name)
            for (layer, el) in zip(model.layers, e.layers) {
                XCTAssertEqual(layer.typeName, el.type, "\(name) \(layer.name)")
                XCTAssertEqual(layer.isUpdatable, el.isUpdatable, "\(name) \(layer.name)")
                guard let (w, b) = layer.weightParams else { continue }
                func check(_ p: WeightParams?, _ ev: CoreMLFixtures.ExpectedValues?, _ what: String) {
                    guard let ev else {
                        XCTAssertTrue(p == nil || !p!.isReadable || p!.values.isEmpty, "\(name) \(layer.name) \(what)")
                        return
                    }
                    guard let p else { return XCTFail("\(name) \(layer.name) \(what) missing") }
                    XCTAssertEqual(p.values.count, ev.count, "\(name) \(layer.name) \(what)")
                    XCTAssertEqual(InteropSidecar.crc32(floats: p.values), ev.crc32, "\(name) \(layer.name) \(what)")
                    XCTAssertEqual(p.values.prefix(ev.first.count).map(Double.init), ev.first, "\(name) \(layer.name) \(what)")
                    XCTAssertEqual(p.isUpdatable, ev.isUpdatable, "\(name) \(layer.name) \(what)")
                }
                check(w, el.weights, "weights")
                check(b, el.bias, "bias")
            }
        }
    }

    func testUnmodifiedModelsWriteIdenticalBytes() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-roundtrip-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for name in CoreMLFixtures.names {
            let original = try CoreMLFixtures.bytes(name)
            let model = try CoreMLModel(serializedBytes: original)
            XCTAssertEqual(model.serializedBytes(), original, name)
            XCTAssertEqual([UInt8](model.serializedData()), original, name)
            let out = folder.appendingPathComponent(name + ".mlmodel")
            try model.write(to: out)
            XCTAssertEqual([UInt8](try Data(contentsOf: out)), original, name)
        }
        // The atomic write leaves nothing else behind.
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted(),
                       CoreMLFixtures.names.map { $0 + ".mlmodel" }.sorted())
    }

    func testDescriptionAndClassLabels() throws {
        let sgd = try CoreMLFixtures.model("dense_sgd_classifier")
        XCTAssertEqual(sgd.kind, .classifier)
        XCTAssertEqual(sgd.classLabels, .strings(["cat", "dog", "bird"]))
        XCTAssertEqual(sgd.inputArrayShape, [4])
        XCTAssertNil(sgd.inputImage)
        XCTAssertEqual(sgd.modelDescription.predictedFeatureName, "label")
        XCTAssertEqual(sgd.modelDescription.predictedProbabilitiesName, "labelProbability")
        XCTAssertEqual(sgd.modelDescription.metadata.author, "Updraft tests")
        XCTAssertEqual(sgd.modelDescription.output(named: "label")?.type, .string)
        XCTAssertEqual(sgd.modelDescription.output(named: "labelProbability")?.type, .dictionary(.string))
        XCTAssertEqual(sgd.layerNames, ["dense1", "relu1", "dense2", "softmax"])
        XCTAssertEqual(sgd.updatableLayerNames, ["dense1", "dense2"])

        let adam = try CoreMLFixtures.model("dense_adam_classifier")
        XCTAssertEqual(adam.classLabels, .int64([10, 20, 30]))
        XCTAssertEqual(adam.classLabels?.index(of: "20"), 1)
        XCTAssertEqual(adam.lossTargetFeature?.type, .int64)

        let conv = try CoreMLFixtures.model("conv_image_classifier")
        XCTAssertEqual(conv.inputImage, ImageFeatureType(width: 16, height: 16, colorSpace: .rgb))
        let scaler = try XCTUnwrap(conv.imageScaler)
        XCTAssertEqual(scaler.channelScale, Float(1.0 / 255.0), accuracy: 1e-9)
        XCTAssertEqual(scaler.biases(for: .rgb), [-0.5, -0.5, -0.5])
        XCTAssertEqual(conv.loss?.kind, .categoricalCrossEntropy)
        XCTAssertEqual(conv.loss?.input, "classLabelProbs")
        XCTAssertEqual(conv.loss?.target, "classLabelProbs_true")
        XCTAssertEqual(conv.lossTargetFeature?.name, "classLabel")
        guard case let .convolution(c)? = conv.layer(named: "conv")?.params else { return XCTFail("conv is not a convolution") }
        XCTAssertEqual(c.padding, .same(.bottomRightHeavy))
        XCTAssertEqual(c.kernelSize, [3, 3])
        guard case let .pooling(p)? = conv.layer(named: "pool")?.params else { return XCTFail("pool is not a pooling") }
        XCTAssertEqual(p.padding, .valid(top: 0, bottom: 0, left: 0, right: 0))
        XCTAssertEqual(p.kernelSize, [2, 2])

        let mse = try CoreMLFixtures.model("mse_regressor")
        XCTAssertEqual(mse.kind, .regressor)
        XCTAssertNil(mse.classLabels)
        XCTAssertEqual(mse.loss?.kind, .meanSquaredError)
        XCTAssertEqual(mse.lossTargetFeature?.name, "y_true")
    }

    func testHyperparametersWithDefaultsAndAllowedValues() throws {
        let sgd = try CoreMLFixtures.model("dense_sgd_classifier")
        XCTAssertEqual(sgd.optimizer?.kind, .sgd)
        let h = Dictionary(uniqueKeysWithValues: sgd.hyperparameters.map { ($0.key, $0) })
        XCTAssertEqual(h[.learningRate]?.defaultValue, .double(0.01))
        XCTAssertEqual(h[.learningRate]?.constraint, .doubleRange(DoubleBounds(min: 0.0001, max: 1)))
        XCTAssertEqual(h[.miniBatchSize]?.defaultValue, .int(8))
        XCTAssertEqual(h[.miniBatchSize]?.constraint, .int(.set([1, 2, 4, 8, 16])))
        XCTAssertEqual(h[.momentum]?.defaultValue, .double(0.9))
        XCTAssertEqual(h[.epochs]?.defaultValue, .int(5))
        XCTAssertEqual(h[.epochs]?.constraint, .int(.set([1, 5, 10])))
        XCTAssertEqual(h[.shuffle]?.defaultValue, .bool(true))
        XCTAssertEqual(h[.seed]?.defaultValue, .int(42))
        XCTAssertNil(h[.beta1])
        XCTAssertTrue(h[.miniBatchSize]!.allows(.int(16)))
        XCTAssertFalse(h[.miniBatchSize]!.allows(.int(32)))
        XCTAssertFalse(h[.learningRate]!.allows(.double(2)))
        XCTAssertFalse(h[.learningRate]!.allows(.int(1)))

        let adam = try CoreMLFixtures.model("dense_adam_classifier")
        XCTAssertEqual(adam.optimizer?.kind, .adam)
        let a = Dictionary(uniqueKeysWithValues: adam.hyperparameters.map { ($0.key, $0) })
        XCTAssertEqual(a[.beta1]?.defaultValue, .double(0.9))
        XCTAssertEqual(a[.beta1]?.constraint, .doubleRange(DoubleBounds(min: 0.5, max: 0.99)))
        XCTAssertEqual(a[.beta2]?.defaultValue, .double(0.999))
        XCTAssertEqual(a[.eps]?.defaultValue, .double(1e-8))
        XCTAssertEqual(a[.epochs]?.constraint, .int(.set([3])))
        XCTAssertNil(a[.momentum])
        XCTAssertEqual(a[.seed]?.inModel, false)
    }

    func testInspectReportNamesTheLayers() throws {
        for name in CoreMLFixtures.names {
            let model = try CoreMLFixtures.model(name)
            let report = ModelReport(model: model, file: name)
            let text = report.text()
            for layer in model.layerNames { XCTAssertTrue(text.contains(layer), "\(name): \(layer) missing from\n\(text)") }
            let json = try report.json()
            let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
            let layers = parsed?["layers"] as? [[String: Any]]
            XCTAssertEqual(layers?.compactMap { $0["name"] as? String }, model.layerNames, name)
        }
        let text = ModelReport(model: try CoreMLFixtures.model("conv_image_classifier")).text()
        XCTAssertTrue(text.contains("4x16x16"), text)       // conv output shape
        XCTAssertTrue(text.contains("allowed {1, 4, 16}"), text)
        XCTAssertTrue(text.contains("validation: no problems"), text)
        let unsupported = ModelReport(model: try CoreMLFixtures.model("unsupported_layer")).text()
        XCTAssertTrue(unsupported.contains("lrn"), unsupported)
    }
}
