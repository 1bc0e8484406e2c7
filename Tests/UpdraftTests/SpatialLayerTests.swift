import XCTest
import Updraft
@testable import UpdraftBackends

/// Padding, upsample, LRN, L2 normalize and instance normalization as layers: the values the
/// NeuralNetwork.proto documentation works out, reading and writing the messages, shape errors, and a
/// model that back-propagates through all of them training alike on the reference, CPU and OpenCL.
final class SpatialLayerTests: XCTestCase {
    /// NeuralNetwork.proto's own example: [1, 3, 4] padded with top = 2, left = 2 in each mode.
    func testPaddingMatchesTheProtoDocumentation() throws {
        let x: [Double] = (1...12).map(Double.init)
        func pad(_ mode: PaddingMode) throws -> [Double] {
            let g = try SpatialOp.padding(PaddingSpec(mode: mode, top: 2, bottom: 0, left: 2, right: 0)).geometry(input: [1, 1, 3, 4])
            XCTAssertEqual(g.outputShape, [1, 1, 5, 6])
            let cpu = CPUBackend(threads: 2)
            let y = try cpu.makeBuffer(count: g.outputShape.count)
            try cpu.spatialForward(g, input: try cpu.makeBuffer(x.map(Float.init)), output: y)
            let reference = try Reference.spatialForward(g, input: x)
            XCTAssertEqual(try cpu.download(y).map(Double.init), reference, "\(mode): CPU vs reference")
            return reference
        }
        XCTAssertEqual(try pad(.constant(0)), [0, 0, 0, 0, 0, 0,
                                               0, 0, 0, 0, 0, 0,
                                               0, 0, 1, 2, 3, 4,
                                               0, 0, 5, 6, 7, 8,
                                               0, 0, 9, 10, 11, 12])
        XCTAssertEqual(try pad(.reflection), [11, 10, 9, 10, 11, 12,
                                              7, 6, 5, 6, 7, 8,
                                              3, 2, 1, 2, 3, 4,
                                              7, 6, 5, 6, 7, 8,
                                              11, 10, 9, 10, 11, 12])
        XCTAssertEqual(try pad(.replication), [1, 1, 1, 2, 3, 4,
                                               1, 1, 1, 2, 3, 4,
                                               1, 1, 1, 2, 3, 4,
                                               5, 5, 5, 6, 7, 8,
                                               9, 9, 9, 10, 11, 12])
    }

    /// [0, 1, 2, 3] upsampled by 2 on each grid of UpsampleLayerParams.LinearUpsampleMode, worked by
    /// hand from its formulas (ALIGN_CORNERS_FALSE is PyTorch's align_corners=False).
    func testUpsampleGridsMatchTheProtoFormulas() throws {
        let x: [Double] = [0, 1, 2, 3]
        func up(_ mode: UpsampleSpec.Mode) throws -> [Double] {
            let g = try SpatialOp.upsample(UpsampleSpec(scaleH: 1, scaleW: 2, mode: mode)).geometry(input: [1, 1, 1, 4])
            return try Reference.spatialForward(g, input: x)
        }
        XCTAssertEqual(try up(.nearest), [0, 0, 1, 1, 2, 2, 3, 3])
        // DEFAULT: spacing (4 - 0.5) / 7 = 0.5, grid i * 0.5 clamped to 3.
        XCTAssertEqual(try up(.bilinear(.default)), [0, 0.5, 1, 1.5, 2, 2.5, 3, 3])
        // ALIGN_CORNERS_TRUE: spacing 3 / 7.
        let t = try up(.bilinear(.alignCornersTrue))
        for (i, v) in t.enumerated() { XCTAssertEqual(v, Double(i) * 3 / 7, accuracy: 1e-12) }
        // ALIGN_CORNERS_FALSE: (i + 0.5) / 2 - 0.5 clamped to [0, 3].
        XCTAssertEqual(try up(.bilinear(.alignCornersFalse)), [0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3])
    }

    /// LRN with a window of 3 over 3 channels at one pixel, and L2 / instance normalization of small
    /// vectors, against the formulas evaluated here.
    func testNormalizationsMatchTheirFormulas() throws {
        let x: [Double] = [1, 2, 3]
        let lrn = try SpatialOp.lrn(LRNSpec(alpha: 0.25, beta: 0.75, k: 2, localSize: 3)).geometry(input: [1, 3, 1, 1])
        let y = try Reference.spatialForward(lrn, input: x)
        let windows: [[Double]] = [[1, 2], [1, 2, 3], [2, 3]]
        for c in 0..<3 {
            let s = 2 + 0.25 / 3 * windows[c].reduce(0) { $0 + $1 * $1 }
            XCTAssertEqual(y[c], x[c] / pow(s, 0.75), accuracy: 1e-12)
        }
        let l2 = try SpatialOp.l2Normalize(epsilon: 1e-6).geometry(input: [1, 2, 1, 1])
        let z = try Reference.spatialForward(l2, input: [3, 4])
        XCTAssertEqual(z[0], 3 / (25 + 1e-6).squareRoot(), accuracy: 1e-12)
        XCTAssertEqual(z[1], 4 / (25 + 1e-6).squareRoot(), accuracy: 1e-12)
        let instance = try SpatialOp.instanceNormalization(epsilon: 1e-5).geometry(input: [1, 1, 1, 4])
        let n = try Reference.spatialForward(instance, input: [1, 2, 3, 6])  // mean 3, variance 3.5
        for (v, e) in zip(n, [-2.0, -1, 0, 3]) { XCTAssertEqual(v, e / (3.5 + 1e-5).squareRoot(), accuracy: 1e-12) }
    }

    /// The reduction kernels (L2 per example, instance normalization per plane) at other work-group
    /// sizes than the device's tuned one.
    func testOpenCLNormalizationsWithOtherWorkGroupSizes() throws {
        let ctx = try OpenCLTestSupport.context()
        let cases = [OpCase].spatialFull.filter { $0.op == "l2normalize" || $0.op == "instanceNormalization" }
        XCTAssertFalse(cases.isEmpty)
        for size in [1, 16, 256] where size <= ctx.device.info.maxWorkGroupSize {
            let b = OpenCLBackend(context: ctx, tuning: OpenCLTuning(workGroupSize: size))
            let failures = BackendComparison(backend: b).run(cases).filter { !$0.ok }
            XCTAssertTrue(failures.isEmpty, "work-group size \(size)\n" + ComparisonRow.table(failures))
        }
    }

    // MARK: Layers in a model

    /// A classifier whose first (updatable) convolution feeds every spatial layer, so its gradient
    /// comes back through all of them.
    static func model() throws -> CoreMLModel {
        let input = FeatureDescription(name: "x", type: .multiArray(.init(shape: [2, 6, 5], dataType: .float32)))
        var b = try ModelBuilder(input: input, seed: 5)
        try b.convolution("conv", outputChannels: 4, kernel: (3, 3), padding: .same(.bottomRightHeavy))
        try b.add(LayerSpec(name: "reflect", inputs: ["conv"], outputs: ["reflect"],
                            params: .padding(PaddingLayerParams(mode: .reflection, top: 1, bottom: 2, left: 2, right: 0))))
        try b.add(LayerSpec(name: "up", inputs: ["reflect"], outputs: ["up"],
                            params: .upsample(UpsampleLayerParams(scalingFactor: [2, 2], mode: 1, linearUpsampleMode: 2))))
        try b.add(LayerSpec(name: "lrn", inputs: ["up"], outputs: ["lrn"],
                            params: .lrn(LRNLayerParams(alpha: 0.5, beta: 0.75, localSize: 3, k: 1))))
        let bn = BatchnormLayerParams(channels: 4, epsilon: 1e-5, gamma: WeightParams(values: [1, 0.5, 2, -1]),
                                      beta: WeightParams(values: [0, 0.1, -0.2, 0.3]), mean: .empty, variance: .empty,
                                      computeMeanVar: true, instanceNormalization: true)
        try b.add(LayerSpec(name: "instance", inputs: ["lrn"], outputs: ["instance"], params: .batchnorm(bn)))
        try b.pooling("pool", .max, kernel: (2, 2), stride: (2, 2))
        try b.add(LayerSpec(name: "replicate", inputs: ["pool"], outputs: ["replicate"],
                            params: .padding(PaddingLayerParams(mode: .replication, top: 0, bottom: 1, left: 1, right: 1))))
        try b.add(LayerSpec(name: "nearest", inputs: ["replicate"], outputs: ["nearest"],
                            params: .upsample(UpsampleLayerParams(scalingFactor: [1, 2], mode: 0))))
        try b.add(LayerSpec(name: "l2", inputs: ["nearest"], outputs: ["l2"], params: .l2normalize(epsilon: 0)))
        try b.pooling("gap", .average, global: true)
        try b.flatten("flatten")
        return try b.buildLayerTestClassifier()
    }

    func testLayersReadBackAsWrittenAndInferTheirShapes() throws {
        let model = try Self.model()
        let reread = try CoreMLModel(serializedBytes: model.serializedBytes())
        for name in ["reflect", "up", "lrn", "instance", "replicate", "nearest", "l2"] {
            XCTAssertEqual(reread.layer(named: name)?.params, model.layer(named: name)?.params, name)
        }
        XCTAssertEqual(reread.serializedBytes(), model.serializedBytes())
        let graph = try NetworkGraph(model: reread)
        XCTAssertEqual(graph.blobShapes["reflect"], [1, 4, 9, 7])
        XCTAssertEqual(graph.blobShapes["up"], [1, 4, 18, 14])
        XCTAssertEqual(graph.blobShapes["nearest"], [1, 4, 10, 18])
        XCTAssertEqual(graph.layer(named: "instance")?.op.name, "instanceNormalization")
        XCTAssertEqual(graph.layer(named: "l2")?.op, .spatial(.l2Normalize(epsilon: 1e-6)), "epsilon 0 reads as 1e-6")
        // every layer has a cost for the planner
        for layer in graph.layers {
            let work = try CostModel.work(for: layer, batch: 2, optimizer: .sgd, backwardData: true, backwardWeights: false)
            XCTAssertFalse(work.forward.isEmpty, layer.name)
        }
    }

    func testShapeErrorsNameTheLayerAndTheWayOut() throws {
        let input = FeatureDescription(name: "x", type: .multiArray(.init(shape: [2, 3, 4], dataType: .float32)))
        func error(_ params: LayerParams) throws -> String {
            var b = try ModelBuilder(input: input)
            do {
                try b.add(LayerSpec(name: "bad", inputs: ["x"], outputs: ["y"], params: params))
            } catch let e as UpdraftError {
                return "\(e.message) \(e.hint ?? "")"
            }
            XCTFail("\(params) was accepted")
            return ""
        }
        let reflection = try error(.padding(PaddingLayerParams(mode: .reflection, top: 3, bottom: 0, left: 0, right: 0)))
        XCTAssertTrue(reflection.contains("layer 'bad' (padding)") && reflection.contains("smaller than the input"), reflection)
        XCTAssertTrue(reflection.contains("replication"), reflection)
        let noMode = try error(.padding(PaddingLayerParams(mode: nil, top: 1, bottom: 1, left: 1, right: 1)))
        XCTAssertTrue(noMode.contains("sets no padding type"), noMode)
        let fractional = try error(.upsample(UpsampleLayerParams(scalingFactor: [], fractionalScalingFactor: [1.5, 1.5], mode: 1)))
        XCTAssertTrue(fractional.contains("fractionalScalingFactor [1.5, 1.5] is not supported"), fractional)
        let zeroScale = try error(.upsample(UpsampleLayerParams(scalingFactor: [0, 2], mode: 0)))
        XCTAssertTrue(zeroScale.contains("must be at least 1"), zeroScale)
        let badMode = try error(.upsample(UpsampleLayerParams(scalingFactor: [2, 2], mode: 1, linearUpsampleMode: 7)))
        XCTAssertTrue(badMode.contains("linearUpsampleMode 7"), badMode)
        let lrn = try error(.lrn(LRNLayerParams(alpha: 1, beta: 1, localSize: 0, k: 1)))
        XCTAssertTrue(lrn.contains("localSize 0"), lrn)
        let batchStatistics = BatchnormLayerParams(channels: 2, epsilon: 0, gamma: WeightParams(values: [1, 1]),
                                                   beta: WeightParams(values: [0, 0]), mean: .empty, variance: .empty,
                                                   computeMeanVar: true, instanceNormalization: false)
        let batch = try error(.batchnorm(batchStatistics))
        XCTAssertTrue(batch.contains("computeMeanVar without instanceNormalization"), batch)
    }

    /// Six steps on the Double reference, the fast CPU path and OpenCL: the same losses (1e-4
    /// relative), and the first convolution's weights move (its gradient came back through every
    /// spatial layer).
    func testTrainsThroughEverySpatialLayerAlikeOnEveryBackend() throws {
        let model = try Self.model()
        let examples = (0..<6).map { i in
            TrainingExample(input: Tensor(shape: [2, 6, 5], uniformIn: -1...1, seed: 40 + UInt64(i)), target: .classIndex(i % 3))
        }
        try assertTrainsAlikeOnEveryBackend(model, try ArrayBatchProvider(examples: examples), steps: 6, firstLayer: "conv",
                                            through: "the spatial layers")
    }
}

extension CoreMLFixtures {
    /// The `unsupported_layer` fixture (coremltools' add_lrn) with its layer's type changed to crop
    /// (field 190), a type Updraft does not run: for the tests of unsupported layers.
    static func lrnAsCrop() throws -> CoreMLModel {
        var message = try ProtoMessage(parsing: try bytes("unsupported_layer"))
        try message.editMessage(500) { net in
            try net.editMessage(1, occurrence: 0) { layer in
                layer.remove(180)
                layer.set(ProtoField(number: 190, message: ProtoMessage()))
            }
        }
        return try CoreMLModel(serializedBytes: message.serialized())
    }
}
