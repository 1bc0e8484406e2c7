import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftData
@testable import UpdraftTraining

/// The first layers of the frozen prefix run a few images at a time on the CPU (`PrefixChunking`).
final class ExecutorChunkingTests: XCTestCase {
    /// SqueezeNet 1.1 at 227x227: conv1 (3.3 MiB an image), pool1 and fires 2-3 (1.6 MiB concats)
    /// up to pool3 run in chunks of 2 images with an 8 MiB budget; fire4 on sees whole batches.
    func testSqueezeNetPlan() throws {
        let training = try TrainingGraph(graph: try NetworkGraph(model: try SqueezeNet.build(SqueezeNet.Options(classes: 10))))
        let plan = try XCTUnwrap(training.prefixChunking(layers: training.prefix, batch: 64, cacheBytes: 8 << 20))
        XCTAssertEqual(training.prefix[plan.layerCount - 1].name, "pool3")
        XCTAssertEqual(plan.images, 2)
        // A bigger cache, bigger chunks; a chunk as large as the batch is no chunking.
        XCTAssertEqual(training.prefixChunking(layers: training.prefix, batch: 64, cacheBytes: 32 << 20)?.images, 8)
        XCTAssertNil(training.prefixChunking(layers: training.prefix, batch: 2, cacheBytes: 8 << 20))
        // Small blobs everywhere: nothing to gain.
        XCTAssertNil(training.prefixChunking(layers: training.prefix, batch: 64, largeBlobBytes: 64 << 20))
        // A run that starts in the tail (the feature cache's steps) is not chunked.
        XCTAssertNil(training.prefixChunking(layers: training.tail, batch: 64, cacheBytes: 8 << 20))
        var half = training
        half.halfPrecisionPrefix = true
        XCTAssertNil(half.prefixChunking(layers: half.prefix, batch: 64, cacheBytes: 8 << 20))
    }

    /// The cache size as sysfs writes it ("32768K"), or in other forms.
    func testCacheSizes() {
        XCTAssertEqual(PrefixChunking.parseCacheSize("32768K\n"), 32 << 20)
        XCTAssertEqual(PrefixChunking.parseCacheSize("8M"), 8 << 20)
        XCTAssertEqual(PrefixChunking.parseCacheSize("1048576"), 1 << 20)
        XCTAssertNil(PrefixChunking.parseCacheSize("lots"))
        XCTAssertNil(PrefixChunking.parseCacheSize("0K"))
        XCTAssertGreaterThan(PrefixChunking.cacheBudgetBytes, 0)
    }

    /// A plan never ends between a convolution and the activation fused into it, or the concat it writes into.
    func testPlanKeepsFusedPartnersTogether() throws {
        let model = try SqueezeNet.build(SqueezeNet.Options(labels: ["a", "b", "c"], inputSize: 67))
        let training = try TrainingGraph(graph: try NetworkGraph(model: model))
        // pool3 reads the last blob over 64 KiB an image (fire3's concat, 128 x 16 x 16: 128 KiB); fire2's
        // and fire3's expands (64 KiB) come along as the concats' inputs, with their fused ReLUs.
        let plan = try XCTUnwrap(training.prefixChunking(layers: training.prefix, batch: 8, cacheBytes: 1, largeBlobBytes: (64 << 10) + 4))
        let names = training.prefix.prefix(plan.layerCount).map(\.name)
        XCTAssertEqual(plan.images, 1)
        XCTAssertEqual(names.last, "pool3")
        let upToExpand = try XCTUnwrap(training.prefixChunking(layers: training.prefix, batch: 8, cacheBytes: 1, largeBlobBytes: 200 << 10))
        let short = training.prefix.prefix(upToExpand.layerCount).map(\.name)
        XCTAssertEqual(short.last, "pool1", "conv1's 64 x 33 x 33 output is read by pool1: \(short)")
        XCTAssertTrue(names.contains("fire2/concat"), "\(names)")
        for l in training.prefix.prefix(plan.layerCount) {
            if let fused = training.fusedActivations[l.name] { XCTAssertTrue(names.contains(fused.name), fused.name) }
        }
    }

    /// Training steps and predictions with the stem in chunks (2 + 2 + 1 images) match the whole batch's,
    /// and the stem's layers ran once per chunk.
    func testChunkedStemMatchesWholeBatch() throws {
        let model = try SqueezeNet.build(SqueezeNet.Options(labels: ["a", "b", "c"], inputSize: 67))
        let training = try TrainingGraph(graph: try NetworkGraph(model: model))
        let hyper = try TrainingParameters(optimizer: .sgd, hyperparameters: training.graph.hyperparameters)
        let examples = (0..<5).map {
            TrainingExample(input: Tensor(shape: [3, 67, 67], uniformIn: 0...255, seed: UInt64($0)), target: .classIndex($0 % 3))
        }
        let batch = try ArrayBatchProvider(examples: examples).batch(at: 0..<5)
        let limits = (largeBlobBytes: (64 << 10) + 4, cacheBytes: 2 * 400 << 10)
        let plan = try XCTUnwrap(training.prefixChunking(layers: training.prefix, batch: 5, cacheBytes: limits.cacheBytes,
                                                         largeBlobBytes: limits.largeBlobBytes))
        XCTAssertEqual(plan.images, 2)
        func run(chunked: Bool) throws -> (losses: [Double], weights: [Float], predicted: [Float], convolutionCalls: Int) {
            let backend = FailingBackend(CPUBackend())
            let executor = try Executor(training: training, optimizer: .sgd, backend: backend)
            executor.chunksPrefix = chunked
            executor.prefixChunkingLimits = limits
            let losses = try (0..<2).map { _ in try executor.trainStep(batch, parameters: hyper).loss }
            let calls = (backend.calls[.convolutionForward] ?? 0) + (backend.calls[.convolutionSliceForward] ?? 0)
            let predicted = try executor.predict(batch.inputs).data
            return (losses, try executor.weights(ofLayer: "conv10").weights.data, predicted, calls)
        }
        let chunked = try run(chunked: true), whole = try run(chunked: false)
        // Per step: conv1 and fires 2 and 3 (seven convolutions) once per chunk (3) instead of once.
        XCTAssertEqual(chunked.convolutionCalls - whole.convolutionCalls, 2 * 7 * (3 - 1))
        for (a, b) in zip(chunked.losses, whole.losses) { XCTAssertEqual(a, b, accuracy: 1e-5 * max(1, abs(b))) }
        XCTAssertEqual(chunked.weights.count, whole.weights.count)
        XCTAssertLessThan(zip(chunked.weights, whole.weights).map { abs($0 - $1) }.max() ?? 1, 1e-5)
        XCTAssertLessThan(zip(chunked.predicted, whole.predicted).map { abs($0 - $1) }.max() ?? 1, 1e-5)
    }

    /// A convolution with a fused residual add runs in the same chunks as its add (ResNet's blocks:
    /// `TrainingGraph.fusedResiduals`), and chunked steps match whole ones.
    func testResidualBlocksChunkWithTheirAdds() throws {
        let training = try TrainingGraph(graph: try NetworkGraph(model: try ResidualFusionTests.model()))
        XCTAssertNotNil(training.fusedResiduals["down"])
        // "down" (1x1/2 reading the first block's 4 x 10 x 10 output, 1600 bytes) is the last layer with
        // a blob that large; the add it is fused into, and that add's ReLU, come along.
        let plan = try XCTUnwrap(training.prefixChunking(layers: training.prefix, batch: 4, cacheBytes: 1, largeBlobBytes: 1600))
        XCTAssertEqual(training.prefix[plan.layerCount - 1].name, "sum2_relu")
        let hyper = try TrainingParameters(optimizer: .sgd, hyperparameters: training.graph.hyperparameters)
        let batch = try ArrayBatchProvider(examples: (0..<4).map {
            TrainingExample(input: Tensor(shape: [3, 10, 10], uniformIn: 0...255, seed: UInt64(20 + $0)), target: .classIndex($0 % 3))
        }).batch(at: 0..<4)
        func steps(chunked: Bool) throws -> (losses: [Double], weights: [Float]) {
            let executor = try Executor(training: training, optimizer: .sgd, backend: CPUBackend(threads: 2))
            executor.chunksPrefix = chunked
            executor.prefixChunkingLimits = (largeBlobBytes: 1600, cacheBytes: 1)
            let losses = try (0..<2).map { _ in try executor.trainStep(batch, parameters: hyper).loss }
            return (losses, try executor.weights(ofLayer: "dense").weights.data)
        }
        let chunked = try steps(chunked: true), whole = try steps(chunked: false)
        for (a, b) in zip(chunked.losses, whole.losses) { XCTAssertEqual(a, b, accuracy: 1e-5 * max(1, abs(b))) }
        XCTAssertLessThan(zip(chunked.weights, whole.weights).map { abs($0 - $1) }.max() ?? 1, 1e-5)
    }

    /// Backends whose buffers are not host memory run the batch whole.
    func testReferenceRunsWhole() throws {
        let model = try SqueezeNet.build(SqueezeNet.Options(labels: ["a", "b", "c"], inputSize: 67))
        let training = try TrainingGraph(graph: try NetworkGraph(model: model))
        let backend = FailingBackend(ReferenceBackend())
        let executor = try Executor(training: training, optimizer: .sgd, backend: backend)
        executor.prefixChunkingLimits = (largeBlobBytes: (64 << 10) + 4, cacheBytes: 400 << 10)
        let inputs = Tensor(shape: [4, 3, 67, 67], uniformIn: 0...255, seed: 1)
        _ = try executor.predict(inputs)
        // One call per convolution (a slice of a concat or not): none ran per chunk.
        XCTAssertEqual((backend.calls[.convolutionForward] ?? 0) + (backend.calls[.convolutionSliceForward] ?? 0), training.graph.layers.filter {
            if case .convolution = $0.op { return true } else { return false }
        }.count)
    }
}
