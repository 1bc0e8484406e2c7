import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftData
@testable import UpdraftTraining

/// ResNet's basic blocks in the frozen prefix: conv -> add(conv, shortcut) -> relu runs as one
/// convolution whose epilogue adds the shortcut and applies the ReLU (`TrainingGraph.fusedResiduals`),
/// the add and the ReLU skipped; not when the convolution's output has another reader. Every blob,
/// fused away or not, and a training step come out as the Double reference computes them.
final class ResidualFusionTests: XCTestCase {
    static let classes = 3

    /// stem -> [a -> b] + stem -> relu -> [c (stride 2) -> d] + down (1x1 stride 2, after d) -> relu -> head.
    /// `peek`: b's output is also read by a second add, so b cannot fuse.
    /// `trainB`: b is updatable too, so the first block's add lies in the trained tail.
    static func model(peek: Bool = false, trainB: Bool = false) throws -> CoreMLModel {
        let image = ImageFeatureType(width: 10, height: 10, colorSpace: .rgb)
        var b = try ModelBuilder(input: FeatureDescription(name: "image", type: .image(image)), seed: 5)
        try b.convolution("stem", outputChannels: 4, kernel: (3, 3), padding: .same(.bottomRightHeavy))
        let stem = try b.activation("stem_relu", .relu)
        try b.convolution("a", outputChannels: 4, kernel: (3, 3), padding: .same(.bottomRightHeavy))
        try b.activation("a_relu", .relu)
        try b.convolution("b", outputChannels: 4, kernel: (3, 3), padding: .same(.bottomRightHeavy))
        try b.add("sum", inputs: ["b", stem])
        var block = try b.activation("sum_relu", .relu)
        if peek { block = try b.add("peek", inputs: [block, "b"]) }
        try b.convolution("c", input: block, outputChannels: 8, kernel: (3, 3), stride: (2, 2), padding: .same(.bottomRightHeavy))
        try b.activation("c_relu", .relu)
        try b.convolution("d", outputChannels: 8, kernel: (3, 3), padding: .same(.bottomRightHeavy))
        try b.convolution("down", input: block, outputChannels: 8, kernel: (1, 1), stride: (2, 2))
        try b.add("sum2", inputs: ["d", "down"])
        try b.activation("sum2_relu", .relu)
        try b.globalPoolClassifierHead(pool: "pool", dense: "dense", labels: .numbered(classes))
        try b.makeUpdatable(trainB ? ["b", "dense"] : ["dense"])
        try b.setCrossEntropyLoss(input: "probabilities")
        b.setOptimizer(.sgd(learningRate: 0.05, miniBatchSize: 4, momentum: 0.9))
        b.setEpochs(1)
        return try b.build()
    }

    let inputs = Tensor(shape: [3, 3, 10, 10], uniformIn: 0...1, seed: 9)

    func testTheResNetPatternFusesInTheTrainingPrefix() throws {
        let training = try TrainingGraph(graph: try NetworkGraph(model: try Self.model()))
        XCTAssertEqual(Set(training.fusedResiduals.keys), ["b", "down"])
        let b = try XCTUnwrap(training.fusedResiduals["b"])
        XCTAssertEqual(b.add.name, "sum")
        XCTAssertEqual(b.residual, "stem_relu")
        XCTAssertEqual(b.activation?.name, "sum_relu")
        XCTAssertEqual(b.output, "sum_relu")
        // d comes first, so the later convolution (the shortcut's) adds d's output.
        let down = try XCTUnwrap(training.fusedResiduals["down"])
        XCTAssertEqual(down.residual, "d")
        XCTAssertEqual(down.activation?.name, "sum2_relu")
        XCTAssertEqual(training.fusedResidualNames, ["sum", "sum_relu", "sum2", "sum2_relu"])
        XCTAssertTrue(training.fusedForwardNames.isSuperset(of: training.fusedResidualNames))
        // The shortcut blobs stay written; the convolution's own output and the sum are not.
        XCTAssertFalse(training.fusionSkips("stem_relu"))
        XCTAssertTrue(training.fusionSkips("b"))
        XCTAssertTrue(training.fusionSkips("sum"))
        XCTAssertFalse(training.fusionSkips("sum_relu"))
        // Half-stored prefixes keep the adds as they are.
        var half = training
        half.halfPrecisionPrefix = true
        XCTAssertTrue(half.fusedResiduals.isEmpty)
    }

    func testAConvolutionWhoseOutputHasAnotherReaderDoesNotFuse() throws {
        let training = try TrainingGraph(graph: try NetworkGraph(model: try Self.model(peek: true)))
        XCTAssertNil(training.fusedResiduals["b"], "b's output is read by sum and by peek")
        XCTAssertFalse(training.fusionSkips("b"))
        XCTAssertEqual(Set(training.fusedResiduals.keys), ["down"])
    }

    /// A trained add (its output depends on an updatable layer) is never fused: it runs backward.
    func testAnAddInTheTrainedTailDoesNotFuse() throws {
        let training = try TrainingGraph(graph: try NetworkGraph(model: try Self.model(trainB: true)))
        XCTAssertNil(training.fusedResiduals["b"])
        XCTAssertNil(training.fusedResiduals["down"], "down's add reads d, which depends on b")
        XCTAssertTrue(training.backwardLayers.contains("sum"))
    }

    func testEveryBlobMatchesTheReferenceWithNoAddOfItsOwn() throws {
        let graph = try NetworkGraph(model: try Self.model())
        XCTAssertEqual(Set(TrainingGraph.inference(graph: graph).fusedResiduals.keys), ["b", "down"])
        try assertFusedForwardMatchesReference(graph, inputs: inputs) { backend, counted, _ in
            XCTAssertEqual(counted.calls[.elementwise] ?? 0, 0, "\(backend.name): both adds run in their convolutions")
            XCTAssertEqual(counted.calls[.activationForward] ?? 0, 0, "\(backend.name): every ReLU fused")
        }
    }

    /// Training steps with the fused prefix give the reference's losses and weights.
    func testTrainingStepsMatchTheReference() throws {
        let graph = try NetworkGraph(model: try Self.model())
        let training = try TrainingGraph(graph: graph)
        let hyper = try TrainingParameters(optimizer: .sgd, hyperparameters: graph.hyperparameters)
        let batch = try ArrayBatchProvider(examples: (0..<4).map {
            TrainingExample(input: Tensor(shape: [3, 10, 10], uniformIn: 0...255, seed: UInt64(20 + $0)), target: .classIndex($0 % Self.classes))
        }).batch(at: 0..<4)
        func steps(_ backend: Backend) throws -> (losses: [Double], weights: [Float]) {
            let executor = try Executor(training: training, optimizer: .sgd, backend: backend)
            let losses = try (0..<2).map { _ in try executor.trainStep(batch, parameters: hyper).loss }
            return (losses, try executor.weights(ofLayer: "dense").weights.data)
        }
        let want = try steps(ReferenceBackend())
        var backends: [Backend] = [CPUBackend(threads: 2)]
        if let ctx = try? OpenCLTestSupport.context() { backends.append(OpenCLBackend(context: ctx)) }
        for backend in backends {
            let counted = FailingBackend(backend)
            let got = try steps(counted)
            XCTAssertEqual(counted.calls[.elementwise] ?? 0, 0, "\(backend.name): the prefix's adds are fused")
            for (a, b) in zip(got.losses, want.losses) { XCTAssertEqual(a, b, accuracy: 1e-5 * max(1, abs(b)), backend.name) }
            assertWithin(got.weights, want.weights.map(Double.init), atol: 1e-5, rtol: 1e-4, "\(backend.name) dense weights")
        }
    }
}
