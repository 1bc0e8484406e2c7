import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftTraining

/// `NearestNeighborsPipeline` (`updraft create knn`): a network cut at its embedding, then an empty
/// k-NN, as one pipeline; the embedding it computes is the network's own blob.
final class NearestNeighborsPipelineTests: XCTestCase {
    /// The blob `blob` of `model`'s network for `input`, run by the network itself.
    private func blob(_ blob: String, of model: CoreMLModel, input: Tensor) throws -> [Float] {
        let runner = try InferenceRunner(graph: NetworkGraph(model: model), prefix: CPUBackend(), tail: CPUBackend(), warn: { _ in })
        return try runner.run(position: "") { try $0.predict(input, blob: blob) }.data
    }

    private func images(_ model: CoreMLModel, count: Int) throws -> Tensor {
        let shape = try NetworkGraph(model: model).input.shape
        var rng = SplitMix64(seed: 3)
        return Tensor(shape: shape.withBatch(count), data: (0..<count * shape.itemCount).map { _ in rng.nextFloat(in: 0...255) })
    }

    func testTheDefaultEmbeddingIsWhatTheClassifierHeadReads() throws {
        let network = try SqueezeShaped.model()
        let pipeline = try NearestNeighborsPipeline(neighbors: 3).make(featureExtractor: network)
        XCTAssertEqual(ModelKinds.validate(pipeline), [])
        let parts = try pipeline.pipelineModels()
        XCTAssertEqual(parts.count, 2)
        guard case let .kNearestNeighbors(knn) = parts[1].spec.body else { return XCTFail("the last model is not a k-NN") }
        let head = try XCTUnwrap(network.layers.last { if case .innerProduct = $0.params { return true } else { return false } })
        let headInput = head.inputs[0]
        let width = try NetworkGraph(model: network).blobShapes[headInput]!.itemCount
        XCTAssertEqual(Int(knn.dimension), width)
        XCTAssertEqual(knn.samples.count, 0)
        XCTAssertEqual(knn.numberOfNeighbors?.defaultValue, 3)
        XCTAssertFalse(parts[0].layerNames.contains(head.name), "the head is cut off")
        XCTAssertEqual(parts[0].updatableLayerNames, [], "the extractor is frozen")
        XCTAssertEqual(parts[0].imageScaler, network.imageScaler, "the image preprocessing is the network's")

        // Read back as written, the extractor computes the network's own blob.
        let reread = try CoreMLModel(serializedBytes: pipeline.serializedBytes())
        let x = try images(network, count: 2)
        let joined = try reread.pipelineNetwork(through: 0)
        XCTAssertEqual(try blob("embedding", of: joined, input: x), try blob(headInput, of: network, input: x))

        // An empty k-NN answers its default label.
        let predictor = try ModelKinds.predictor(model: reread, batchSize: 2, warn: { _ in })
        XCTAssertEqual(predictor.classLabels, ["unknown"])
        XCTAssertEqual(try predictor.classify(Tensor(shape: Shape(Array(x.shape.dims.dropFirst())), data: Array(x.data.prefix(x.count / 2))),
                                              position: "").data, [1])
    }

    func testANamedLayerAndL2Normalisation() throws {
        let network = try SqueezeShaped.model()
        let graph = try NetworkGraph(model: network)
        // The first layer of the network whose output is not the input: a convolution's feature map.
        let layer = graph.layers[0]
        let options = NearestNeighborsPipeline(layer: layer.name, neighbors: 1, weighting: .inverseDistance, index: .kdTree(leafSize: 4),
                                               l2Normalize: true, defaultLabel: "nobody")
        let pipeline = try options.make(featureExtractor: network)
        let parts = try pipeline.pipelineModels()
        XCTAssertEqual(parts[0].layers.count, 2, "the layer and the l2normalize after it")
        guard case let .kNearestNeighbors(knn) = parts[1].spec.body else { return XCTFail("the last model is not a k-NN") }
        XCTAssertEqual(Int(knn.dimension), layer.outputShape.itemCount)
        XCTAssertEqual(knn.weighting, .inverseDistance)
        XCTAssertEqual(knn.index, .kdTree(leafSize: 4))
        XCTAssertEqual(knn.defaultLabel, .string("nobody"))

        let x = try images(network, count: 1)
        let raw = try blob(layer.output, of: network, input: x)
        let normed = try blob("embedding", of: pipeline.pipelineNetwork(through: 0), input: x)
        let norm = raw.reduce(0.0) { $0 + Double($1) * Double($1) }.squareRoot()
        XCTAssertGreaterThan(norm, 0)
        for (a, b) in zip(normed, raw) { XCTAssertEqual(Double(a), Double(b) / norm, accuracy: 1e-5) }
    }

    func testBadOptionsAreNamed() throws {
        let network = try SqueezeShaped.model()
        let cases: [(NearestNeighborsPipeline, String)] = [
            (NearestNeighborsPipeline(layer: "nope", neighbors: 1), "no layer named 'nope'"),
            (NearestNeighborsPipeline(neighbors: 0), "outside the allowed 1...1000"),
            (NearestNeighborsPipeline(neighbors: 20, allowedNeighbors: 1...10), "outside the allowed 1...10"),
            (NearestNeighborsPipeline(neighbors: 1, index: .kdTree(leafSize: 0)), "leaf size must be at least 1"),
        ]
        for (options, fragment) in cases {
            XCTAssertThrowsError(try options.make(featureExtractor: network)) { XCTAssertTrue("\($0)".contains(fragment), "\($0)") }
        }
        let knn = try CoreMLModel(contentsOf: Fixtures.url("knn/knn_empty.mlmodel"))
        XCTAssertThrowsError(try NearestNeighborsPipeline(neighbors: 1).make(featureExtractor: knn)) {
            XCTAssertTrue("\($0)".contains("must be a neural network"), "\($0)")
        }
    }

    func testTheCommandWritesThePipeline() throws {
        let folder = try makeTemporaryFolder("create-knn")
        let source = folder.appendingPathComponent("net.mlmodel"), out = folder.appendingPathComponent("knn.mlmodel")
        try SqueezeShaped.model().write(to: source)
        let run = try runUpdraft(["create", "knn", "--feature-extractor", source.path, "--neighbors", "5", "--weighting", "distance",
                                  "--index", "kdtree", "--leaf-size", "8", "--out", out.path], cacheDirectory: folder)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("-> k-NN (k = 5, inverseDistance, kd-tree (leaf size 8))"), run.stdout)
        let model = try CoreMLModel(contentsOf: out)
        XCTAssertEqual(model.spec.modelType, .pipelineClassifier)
        XCTAssertTrue(model.isUpdatable)
        let bad = try runUpdraft(["create", "knn", "--feature-extractor", source.path, "--neighbors", "5", "--weighting", "cosine",
                                  "--out", out.path], cacheDirectory: folder)
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("--weighting is uniform or distance"), bad.stderr)
    }
}
