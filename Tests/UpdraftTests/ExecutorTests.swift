import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftData
@testable import UpdraftTraining

final class ExecutorTests: XCTestCase {
    /// PyTorch's losses and updated weights for a few SGD / Adam steps, with gradients through
    /// concat and pooling, are reproduced by the executor on `backend`.
    func checkGolden(_ name: String, backend: Backend, file: StaticString = #filePath, line: UInt = #line) throws {
        let (golden, model) = try GoldenRun.load(name)
        let graph = try NetworkGraph(model: model)
        let training = try TrainingGraph(graph: graph)
        let optimizer: OptimizerKind = golden.optimizer == "sgd" ? .sgd : .adam
        let hyper = try TrainingParameters(optimizer: optimizer, hyperparameters: graph.hyperparameters)
        let executor = try Executor(training: training, optimizer: optimizer, backend: backend)
        let losses = try golden.trainLosses(executor, parameters: hyper)
        XCTAssertEqual(losses.count, golden.losses.count, file: file, line: line)
        for (a, b) in zip(losses, golden.losses) {
            XCTAssertEqual(a, b, accuracy: 1e-5 * max(1, abs(b)), "losses \(losses) vs PyTorch \(golden.losses)", file: file, line: line)
        }
        for (layer, expected) in golden.final {
            let (w, b) = try executor.weights(ofLayer: layer)
            let maxW = zip(w.data, expected.weights).map { abs($0 - $1) }.max() ?? 0
            let maxB = zip(b!.data, expected.bias).map { abs($0 - $1) }.max() ?? 0
            XCTAssertLessThan(maxW, 2e-5, "\(layer) weights differ from PyTorch by \(maxW)", file: file, line: line)
            XCTAssertLessThan(maxB, 2e-5, "\(layer) bias differs from PyTorch by \(maxB)", file: file, line: line)
        }
    }

    func testGoldenSGDOnReference() throws { try checkGolden("branches_sgd", backend: ReferenceBackend()) }
    func testGoldenAdamOnReference() throws { try checkGolden("branches_adam", backend: ReferenceBackend()) }

    func testTrainingGraphSplitsPrefixAndTail() throws {
        let (_, model) = try GoldenRun.load("branches_sgd")
        let t = try TrainingGraph(graph: try NetworkGraph(model: model))
        XCTAssertEqual(t.prefix.map(\.name), ["conv1", "relu1"])
        XCTAssertEqual(t.boundary, ["relu1_out"])
        XCTAssertEqual(t.lossBlob, "logits")
        XCTAssertEqual(Set(t.fusedReLU.keys), ["conv1", "conv2a", "conv2b"])
        XCTAssertFalse(t.gradientBlobs.contains("relu1_out"), "no gradient flows into the frozen prefix")
    }

    /// The work per image of the product's workload, from the op descriptions: the frozen forward
    /// pass plus conv10's and fullyconnected0's forward and weight gradients (14x14 before conv10 at
    /// 227x227 with ceil-mode pools).
    func testSqueezeNetStepWorkPerImage() throws {
        let model = try SqueezeNet.build(SqueezeNet.Options(classes: 10))
        let t = try TrainingGraph(graph: try NetworkGraph(model: model))
        XCTAssertEqual(t.boundary, ["fire9/concat"])
        let cost = try t.stepCost(batch: 64)
        let perImage = { (c: OpCost) in c.flops / 64 / 1e9 }
        XCTAssertEqual(perImage(cost.prefixForward), 0.582, accuracy: 0.01)
        XCTAssertEqual(perImage(cost.weightGradients), 0.201, accuracy: 0.01)
        XCTAssertEqual(perImage(cost.fullStep), 0.985, accuracy: 0.01)
        XCTAssertEqual(perImage(cost.cachedStep), 0.403, accuracy: 0.01)
        XCTAssertEqual(cost.tailBackwardData.flops, 0, accuracy: 1e9, "no input gradient is computed for conv10")
    }
}

/// Frozen convolutions that feed a concat write their slices of its output, and the concat is skipped.
final class ExecutorConcatSliceTests: XCTestCase {
    func testSqueezeNetFireConcatsAreWrittenBySlices() throws {
        let model = try SqueezeNet.build(SqueezeNet.Options(classes: 10))
        let training = try TrainingGraph(graph: try NetworkGraph(model: model))
        XCTAssertEqual(training.slicedConcats, Set((2...9).map { "fire\($0)/concat" }))
        XCTAssertEqual(training.concatSlices.count, 16)
        let fire9 = try XCTUnwrap(training.concatSlices["fire9/expand3x3"])
        XCTAssertEqual(fire9.offset, 256)
        XCTAssertEqual(fire9.channels, 512)
        XCTAssertEqual(training.concatSlices["fire9/expand1x1"]?.offset, 0)
        // Training the expands puts the concats in the tail, which needs them for backward.
        let shaped = try TrainingGraph(graph: try NetworkGraph(model: try SqueezeShaped.model()))
        XCTAssertTrue(shaped.concatSlices.isEmpty)
    }

    /// A small SqueezeNet (conv10 and the classifier trained): slices and concats give the same steps,
    /// on the CPU and on OpenCL.
    func testSlicesTrainExactlyLikeTheConcat() throws {
        let model = try SqueezeNet.build(SqueezeNet.Options(labels: ["a", "b", "c"], inputSize: 67))
        let training = try TrainingGraph(graph: try NetworkGraph(model: model))
        XCTAssertFalse(training.slicedConcats.isEmpty)
        let hyper = try TrainingParameters(optimizer: .sgd, hyperparameters: training.graph.hyperparameters)
        let batch = try ArrayBatchProvider(examples: (0..<3).map {
            TrainingExample(input: Tensor(shape: [3, 67, 67], uniformIn: 0...255, seed: UInt64($0)), target: .classIndex($0))
        }).batch(at: 0..<3)
        func steps(_ inner: Backend, slices: Bool) throws -> (losses: [Double], concats: Int, weights: [Float]) {
            let backend = FailingBackend(inner)
            backend.slices = slices
            let executor = try Executor(training: training, optimizer: .sgd, backend: backend)
            let losses = try (0..<2).map { _ in try executor.trainStep(batch, parameters: hyper).loss }
            return (losses, backend.calls[.concatForward] ?? 0, try executor.weights(ofLayer: "conv10").weights.data)
        }
        for inner in [CPUBackend(), OpenCLBackend(context: try OpenCLTestSupport.context())] as [Backend] {
            let sliced = try steps(inner, slices: true), concatenated = try steps(inner, slices: false)
            XCTAssertEqual(sliced.concats, 0, "\(inner.name): no concat runs")
            XCTAssertEqual(concatenated.concats, 2 * 8)
            XCTAssertEqual(sliced.losses, concatenated.losses, inner.name)
            XCTAssertEqual(sliced.weights, concatenated.weights, inner.name)
        }
    }
}
