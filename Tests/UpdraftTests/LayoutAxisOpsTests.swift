import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftData
@testable import UpdraftTraining

/// transpose / permute (a permuted copy), softmaxND and concatND on the logical N-D shape.
final class LayoutAxisOpsTests: XCTestCase {
    func testSimplifiedGeometryMergesAxesAndDropsOnes() {
        let g = TransposeGeometry(batch: 2, dims: [2, 1, 3, 4, 5], perm: [0, 3, 4, 1, 2]).simplified
        XCTAssertEqual(g.dims, [2, 3, 20])
        XCTAssertEqual(g.perm, [0, 2, 1])
        XCTAssertTrue(TransposeGeometry(batch: 1, dims: [1, 7, 1], perm: [2, 1, 0]).simplified.isIdentity)
        let inv = TransposeGeometry(batch: 1, dims: [2, 3, 4], perm: [2, 0, 1]).inverse
        XCTAssertEqual(inv.dims, [4, 2, 3])
        XCTAssertEqual(inv.perm, [1, 2, 0])
        // The reference against a hand-written 2x3 transpose, and the inverse undoing it.
        let x: [Double] = [1, 2, 3, 4, 5, 6]
        let t = TransposeGeometry(batch: 1, dims: [2, 3], perm: [1, 0])
        XCTAssertEqual(try Reference.transpose(t, input: x), [1, 4, 2, 5, 3, 6])
        XCTAssertEqual(try Reference.transposeBackward(t, outputGradient: try Reference.transpose(t, input: x)), x)
    }

    func testShapeInferenceOfAxisOps() throws {
        var b = try ModelBuilder(input: .floatArray([1, 4, 3, 2]))
        try b.transpose("t", axes: [0, 3, 1, 2])
        XCTAssertEqual(b.logicalShapes["t"], LogicalShape([1, 2, 4, 3], batchAxis: 0))
        XCTAssertEqual(b.shapes["t"], [1, 2, 4, 3])
        try b.softmaxND("sm", axis: -2, input: "t")
        try b.softmaxND("sm1", axis: 1, input: "t")
        try b.concatND("cat", axis: 2, inputs: ["t", "sm"])
        XCTAssertEqual(b.logicalShapes["cat"], LogicalShape([1, 2, 8, 3], batchAxis: 0))
        try b.layout("perm", .permute(axes: [0, 3, 1, 2]), inputs: ["x"])
        XCTAssertEqual(b.logicalShapes["perm"], LogicalShape([1, 2, 4, 3], batchAxis: 0))
        try b.expandDims("ex", axes: [2], input: "x")             // [1, 4, 1, 3, 2]
        try b.transpose("unit", axes: [0, 2, 1, 3, 4])            // moves only the size-1 axis
        let graph = try NetworkGraph(model: try b.build())
        guard case let .layout(.transpose(g, _)) = graph.layer(named: "t")!.op else { return XCTFail("t is not a transpose") }
        XCTAssertEqual(g.dims, [4, 3, 2])
        XCTAssertEqual(g.perm, [2, 0, 1])
        XCTAssertEqual(graph.layer(named: "sm")!.op, .layout(.softmaxND(outer: 2, axis: 4, inner: 3)))
        XCTAssertEqual(graph.layer(named: "sm1")!.op, .softmax, "a softmax over an example's first axis is the channel softmax")
        XCTAssertEqual(graph.layer(named: "cat")!.op, .layout(.concatND(outer: 2, channels: [4, 4], inner: 3)))
        guard case .layout(.transpose) = graph.layer(named: "perm")!.op else { return XCTFail("perm is not a transpose") }
        XCTAssertEqual(graph.layer(named: "unit")!.op, .layout(.alias(kind: "transpose")), "a transpose that moves no value is an alias")

        // Axis mistakes are named errors.
        func expect(_ params: LayoutLayerParams, inputs: [String] = ["x"], _ words: [String]) {
            var c = b
            XCTAssertThrowsError(try c.layout("bad", params, inputs: inputs)) { e in
                for w in ["layer 'bad'"] + words { XCTAssertTrue("\(e)".contains(w), "\(e) should mention \(w)") }
            }
        }
        expect(.transpose(axes: [0, 1, 2]), ["not a permutation"])
        expect(.transpose(axes: [1, 0, 2, 3]), ["before the batch axis", "outermost"])
        expect(.softmaxND(axis: 0), ["mixes examples"])
        expect(.softmaxND(axis: 4), ["axis 4", "outside"])
        expect(.concatND(axis: 1, interleave: false), inputs: ["x", "t"], ["must match except along axis 1"])
        expect(.concatND(axis: 2, interleave: true), inputs: ["t", "cat"], ["interleave"])
        expect(.concatND(axis: 0, interleave: false), inputs: ["x", "x"], ["mixes examples"])
        expect(.permute(axes: [1, 0, 2, 3]), ["before the batch axis"])
        expect(.permute(axes: [0, 1, 2]), ["not a permutation"])
    }

    /// softmaxND over the last axis of [1, K] is the channel softmax, so it feeds the fused cross-entropy.
    func testSoftmaxNDFeedingTheLossUsesTheFusedPath() throws {
        var b = try ModelBuilder(input: .floatArray([1, 6]))
        try b.innerProduct("fc", outputChannels: 3)
        try b.softmax("probs")
        try b.makeClassifier(labels: .int64([0, 1, 2]), probabilities: "probs")
        try b.makeUpdatable(["fc"])
        try b.setCrossEntropyLoss(input: "probs")
        b.setOptimizer(.sgd(learningRate: 0.1, miniBatchSize: 2))
        b.setEpochs(1)
        var spec = try b.build().spec
        spec.network.layers[1].params = .layout(.softmaxND(axis: -1))
        let graph = try NetworkGraph(model: CoreMLModel(spec: spec))
        XCTAssertEqual(graph.loss?.logits, "fc")
        XCTAssertEqual(try TrainingGraph(graph: graph).lossBlob, "fc")
    }

    /// A model with every axis op between two updatable layers: the same training on the reference,
    /// the CPU and OpenCL.
    private func axisModel() throws -> CoreMLModel {
        var b = try ModelBuilder(input: .floatArray([1, 3, 5, 7]), seed: 4)
        try b.convolution("conv", outputChannels: 4, kernel: (3, 3), padding: .same(.bottomRightHeavy))
        try b.transpose("t", axes: [0, 2, 3, 1])                 // [1, 5, 7, 4]
        try b.softmaxND("sm", axis: 2)                            // over the 7
        try b.concatND("cat", axis: 3, inputs: ["t", "sm"])       // [1, 5, 7, 8]
        try b.layout("perm", .permute(axes: [0, 2, 3, 1]))        // [1, 7, 8, 5]
        try b.innerProduct("fc", outputChannels: 3)
        try b.softmax("probs")
        try b.makeClassifier(labels: .int64([0, 1, 2]), probabilities: "probs")
        try b.makeUpdatable(["conv", "fc"])
        try b.setCrossEntropyLoss(input: "probs")
        b.setOptimizer(.sgd(learningRate: 0.2, miniBatchSize: 3))
        b.setEpochs(1)
        return try b.build()
    }

    func testAxisOpsTrainTheSameOnEveryBackend() throws {
        let model = try axisModel()
        let graph = try NetworkGraph(model: model)
        let examples = (0..<3).map { i in
            TrainingExample(input: Tensor(shape: [1, 3, 5, 7], uniformIn: -1...1, seed: UInt64(20 + i)), target: .classIndex(i))
        }
        let batch = try ArrayBatchProvider(examples: examples).batch(at: 0..<3)
        func run(_ backend: Backend) throws -> ([Double], [Float]) {
            let executor = try Executor(training: try TrainingGraph(graph: graph), optimizer: .sgd, backend: backend)
            let hyper = try TrainingParameters(optimizer: .sgd, hyperparameters: graph.hyperparameters)
            var losses: [Double] = []
            for _ in 0..<2 { losses.append(try executor.trainStep(batch, parameters: hyper).loss) }
            return (losses, try executor.weights(ofLayer: "conv").weights.data)
        }
        let (refLoss, refConv) = try run(ReferenceBackend())
        XCTAssertNotEqual(refConv, graph.layer(named: "conv")!.weights!.data, "the conv trains through the axis ops")
        for backend: Backend in [CPUBackend(), OpenCLBackend(context: try OpenCLTestSupport.context())] {
            let (loss, conv) = try run(backend)
            for (a, b) in zip(loss, refLoss) { XCTAssertEqual(a, b, accuracy: 1e-5, "\(backend.name)") }
            XCTAssertLessThan(zip(conv, refConv).map { abs($0 - $1) }.max()!, 1e-5, backend.name)
        }
    }
}

/// The reshapes converters emit besides reshapeStatic, and the old softmax on rank-5 blobs.
final class LayoutMoreReshapesTests: XCTestCase {
    func testRankPreservingReshapeReshapeLikeAndSoftmaxOverAxisMinus3() throws {
        var b = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(ArrayFeatureType(shape: [1, 4, 3, 2], dataType: .float32))))
        try b.layout("rp", .rankPreservingReshape(targetShape: [0, 2, -1, 3]))
        XCTAssertEqual(b.logicalShapes["rp"], LogicalShape([1, 2, 4, 3], batchAxis: 0))
        try b.reshapeStatic("flat", targetShape: [1, 24], input: "x")
        try b.layout("like", .reshapeLike, inputs: ["flat", "rp"])
        XCTAssertEqual(b.logicalShapes["like"], LogicalShape([1, 2, 4, 3], batchAxis: 0))
        try b.reshapeStatic("r5", targetShape: [1, 2, 2, 3, 2], input: "x")
        try b.softmax("sm5", input: "r5")
        XCTAssertEqual(b.logicalShapes["sm5"], LogicalShape([1, 2, 2, 3, 2], batchAxis: 0))
        let graph = try NetworkGraph(model: try b.build())
        XCTAssertEqual(graph.layer(named: "rp")!.op, .layout(.alias(kind: "rankPreservingReshape")))
        XCTAssertEqual(graph.layer(named: "like")!.op, .layout(.alias(kind: "reshapeLike")))
        XCTAssertEqual(graph.layer(named: "sm5")!.op, .layout(.softmaxND(outer: 2, axis: 2, inner: 6)),
                       "Core ML's softmax over axis -3 of [1, 2, 2, 3, 2] is over the second 2, not the folded channels")
        var c = b
        XCTAssertThrowsError(try c.layout("bad", .rankPreservingReshape(targetShape: [0, 24]), inputs: ["x"])) { e in
            XCTAssertTrue("\(e)".contains("has rank 4"), "\(e)")
        }
        XCTAssertThrowsError(try c.layout("bad2", .reshapeLike, inputs: ["x"])) { e in
            XCTAssertTrue("\(e)".contains("expected 2"), "\(e)")
        }
        // Values: reshapeLike aliases input 0 and gives no gradient to input 1.
        let executor = try Executor(training: .inference(graph: graph), optimizer: .sgd, backend: CPUBackend())
        let x = Tensor(shape: [2, 1, 4, 3, 2], uniformIn: -1...1, seed: 3)
        XCTAssertEqual(try executor.predict(x, blob: "like").data, x.data)
        let sm = try executor.predict(x, blob: "sm5").data
        let expected = try Reference.softmaxForward(SoftmaxGeometry(batch: 4, channels: 2, spatial: 6), input: x.data.map(Double.init))
        XCTAssertLessThan(zip(sm, expected).map { abs(Double($0) - $1) }.max()!, 1e-6)
    }
}
