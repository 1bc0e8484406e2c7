import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftTraining

/// Core ML's mvn layer (MeanVarianceNormalizeLayerParams), added to the spatial family in 4 source files
/// (issue 36's proof of a new layer in an existing family): a classifier coremltools built with it trains
/// as PyTorch does with F.instance_norm in its place, it writes back as it was read, and the forms Updraft
/// does not run are refused by name. Fixtures: Tests/Scripts/make_mvn_fixtures.py.
final class MVNLayerTests: XCTestCase {
    func testAClassifierWithMVNTrainsAsPyTorchDoes() throws {
        let (golden, model) = try GoldenRun.load("mvn_cnn")
        let graph = try NetworkGraph(model: model)
        guard case let .instanceNormalization(epsilon, scale, shift)? = graph.layers.first(where: { $0.name == "mvn" })?.op else {
            return XCTFail("mvn should run as instance normalization")
        }
        XCTAssertEqual(epsilon, 1e-5)
        XCTAssertEqual(scale, [1, 1, 1, 1])
        XCTAssertEqual(shift, [0, 0, 0, 0])
        var backends: [Backend] = [ReferenceBackend(), CPUBackend(threads: 2)]
        if let shared = try? OpenCLTestSupport.context() { backends.append(OpenCLBackend(context: shared)) }
        let hyper = try TrainingParameters(optimizer: .sgd, hyperparameters: graph.hyperparameters)
        for backend in backends {
            let executor = try Executor(training: try TrainingGraph(graph: graph), optimizer: .sgd, backend: backend)
            let losses = try golden.trainLosses(executor, parameters: hyper)
            XCTAssertEqual(losses.count, golden.losses.count)
            for (a, b) in zip(losses, golden.losses) {
                XCTAssertEqual(a, b, accuracy: 5e-5 * max(1, abs(b)), "\(backend.name): \(losses) vs PyTorch \(golden.losses)")
            }
            for (layer, expected) in golden.final {
                let (w, b) = try executor.weights(ofLayer: layer)
                let worst = zip(w.data + b!.data, expected.weights + expected.bias).map { abs($0 - $1) }.max()!
                XCTAssertLessThan(worst, 5e-5, "\(backend.name) \(layer) differs from PyTorch by \(worst)")
            }
        }
    }

    func testMVNIsWrittenBackAsItWasRead() throws {
        let (_, model) = try GoldenRun.load("mvn_cnn")
        let layer = try XCTUnwrap(model.spec.network.layers.first { $0.name == "mvn" })
        guard case let .mvn(acrossChannels, normalizeVariance, epsilon) = layer.params else { return XCTFail("\(layer.params)") }
        XCTAssertFalse(acrossChannels)
        XCTAssertTrue(normalizeVariance)
        XCTAssertEqual(epsilon, 1e-5)
        let rewritten = try CoreMLModel(serializedBytes: CoreMLModel(spec: model.spec).serializedBytes())
        XCTAssertEqual(rewritten.spec.network.layers.first { $0.name == "mvn" }?.params, layer.params)
        XCTAssertEqual(try NetworkGraph(model: rewritten).layers.map(\.name), try NetworkGraph(model: model).layers.map(\.name))
    }

    func testTheFormsUpdraftDoesNotRunAreRefusedByName() throws {
        for (file, needle) in [("mvn_across_channels", "acrossChannels (statistics over C, H and W together) is not supported"),
                               ("mvn_mean_only", "normalizeVariance false (the mean subtracted, the variance left) is not supported")] {
            let model = try CoreMLModel(contentsOf: Fixtures.url("golden/\(file).mlmodel"))
            XCTAssertThrowsError(try NetworkGraph(model: model), file) {
                let message = "\($0)"
                XCTAssertTrue(message.contains("layer 'mvn' (mvn): " + needle), message)
                XCTAssertTrue(message.contains("layer_norm"), "the hint says which form runs: \(message)")
            }
        }
    }
}
