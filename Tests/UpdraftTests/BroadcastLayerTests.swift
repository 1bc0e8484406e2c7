import Foundation
import XCTest
import Updraft

/// Broadcasting, constants and reductions as layers: a PyTorch squeeze-and-excitation model converted
/// by coremltools trains like PyTorch on the CPU and on OpenCL, and the layers' messages, shapes and
/// errors.
final class BroadcastLayerTests: XCTestCase {
    struct Golden: Decodable {
        var model: String; var layers: [[String]]; var stem: String; var head: String
        var learningRate: Double; var batch: Int
        var inputs: [Float]; var labels: [Int]; var losses: [Double]
        var stemWeights: [Float]; var stemBias: [Float]; var headWeights: [Float]; var headBias: [Float]
    }

    static let folder = CoreMLFixtures.folder.appendingPathComponent("spatial")

    func golden() throws -> Golden {
        try JSONDecoder().decode(Golden.self, from: Data(contentsOf: Self.folder.appendingPathComponent("spatial_se.json")))
    }

    /// Tests/Scripts/make_spatial_fixtures.py: squeeze-and-excitation (global pooling, a broadcast
    /// multiply), loadConstantND + broadcast add, reduceSum / reduceMean over channels, subtract and
    /// divideBroadcastable, reflection padding, bilinear upsampling, instance normalization; the stem
    /// and head convolutions train. Two SGD steps on the CPU and on OpenCL against PyTorch's.
    func testConvertedSqueezeExcitationTrainsLikePyTorch() throws {
        let g = try golden()
        let model = try CoreMLModel(contentsOf: Self.folder.appendingPathComponent(g.model))
        let graph = try NetworkGraph(model: model)
        let types = Set(g.layers.map { $0[1] })
        for t in ["multiply", "loadConstantND", "add", "reduceSum", "reduceMean", "divideBroadcastable", "padding",
                  "upsample", "batchnorm"] {
            XCTAssertTrue(types.contains(t), "the converter no longer emits \(t): \(types.sorted())")
        }
        XCTAssertEqual(graph.layers.count, g.layers.count)
        let perExample = g.inputs.count / g.batch
        let examples = (0..<g.batch).map { i in
            TrainingExample(input: Tensor(shape: [3, 8, 8], data: Array(g.inputs[i * perExample..<(i + 1) * perExample])),
                            target: .classIndex(g.labels[i]))
        }
        let data = try ArrayBatchProvider(examples: examples)
        let openCL = OpenCLBackend(context: try OpenCLTestSupport.context())
        for backend in [CPUBackend() as Backend, openCL] {
            var config = UpdateConfiguration()
            config.placement.backends = (backend, backend)
            let recorded = Locked<[Double]>([])
            let task = UpdateTask(model: model, trainingData: data, configuration: config, handlers: UpdateHandlers(
                events: [.miniBatchEnd], progress: { recorded.append($0.metrics!.lossValue) }))
            let final = task.run()
            let losses = recorded.value
            XCTAssertEqual(final.task.state, .completed, "\(backend.name): \(final.error.map { "\($0)" } ?? "")")
            XCTAssertEqual(losses.count, g.losses.count, backend.name)
            for (i, (a, b)) in zip(losses, g.losses).enumerated() {
                XCTAssertEqual(a, b, accuracy: 1e-4 * abs(b), "\(backend.name): loss of step \(i)")
            }
            let stem = try final.weights(ofLayer: g.stem), head = try final.weights(ofLayer: g.head)
            let before = try model.weights(ofLayer: g.stem).data
            for (what, got, want, start) in [("stem weights", stem.weights.data, g.stemWeights, before),
                                             ("stem bias", stem.bias?.data ?? [], g.stemBias, try model.bias(ofLayer: g.stem)?.data ?? []),
                                             ("head weights", head.weights.data, g.headWeights, try model.weights(ofLayer: g.head).data),
                                             ("head bias", head.bias?.data ?? [], g.headBias, try model.bias(ofLayer: g.head)?.data ?? [])] {
                XCTAssertEqual(got.count, want.count, "\(backend.name): \(what)")
                // Updates (trained - initial) within 1% of PyTorch's, and the values themselves within 1e-5.
                let updates = zip(want, start).map { abs($0 - $1) }
                let scale = updates.max() ?? 0
                XCTAssertGreaterThan(scale, 1e-5, "\(what) must move")
                for (i, (a, b)) in zip(got, want).enumerated() {
                    XCTAssertEqual(a, b, accuracy: max(1e-5, 0.01 * updates[i], 1e-3 * scale), "\(backend.name): \(what)[\(i)]")
                }
            }
        }
    }

    // MARK: Layers built in Swift

    /// Every broadcasting layer type, a loadConstant, the old reduce and reduceMax, in a model whose
    /// first convolution trains (so gradients pass through all of them): the layers read back as
    /// written and train alike on the reference, CPU and OpenCL.
    static func model() throws -> CoreMLModel {
        let input = FeatureDescription(name: "x", type: .multiArray(.init(shape: [3, 5, 6], dataType: .float32)))
        var b = try ModelBuilder(input: input, seed: 9)
        try b.convolution("conv", outputChannels: 4, kernel: (3, 3), padding: .same(.bottomRightHeavy))
        func add(_ name: String, _ inputs: [String], _ params: LayerParams) throws {
            try b.add(LayerSpec(name: name, inputs: inputs, outputs: [name], params: params))
        }
        try add("gain", [], .loadConstant(LoadConstantLayerParams(shape: [4, 1, 6], data: WeightParams(values: (0..<24).map { 0.5 + Float($0) / 24 }),
                                                                   isND: false)))
        try add("scaled", ["conv", "gain"], .broadcastable(.multiply))
        try add("channelMean", ["scaled"], .reduce(ReduceLayerParams(mode: 1, axis: 2)))                 // AVG over C
        try add("centred", ["scaled", "channelMean"], .broadcastable(.subtract))
        try add("rowMax", ["centred"], .reduceND(ReduceNDLayerParams(kind: .max, axes: [-1], keepDims: true)))
        try add("offset", ["rowMax"], .add(alpha: 3))
        try add("ratio", ["centred", "offset"], .broadcastable(.divide))
        try add("planeSum", ["ratio"], .reduceND(ReduceNDLayerParams(kind: .sum, axes: [-2, -1], keepDims: true)))
        try add("gated", ["ratio", "planeSum"], .multiply(alpha: 0))
        try add("biased", ["gated", "gain"], .broadcastable(.add))
        try add("pooled", ["biased"], .reduceND(ReduceNDLayerParams(kind: .mean, axes: [-2, -1], keepDims: false)))
        return try b.buildLayerTestClassifier()
    }

    func testLayersReadBackAndInferTheirShapes() throws {
        let model = try Self.model()
        let reread = try CoreMLModel(serializedBytes: model.serializedBytes())
        XCTAssertEqual(reread.serializedBytes(), model.serializedBytes())
        for name in ["gain", "scaled", "channelMean", "centred", "rowMax", "offset", "ratio", "planeSum", "gated", "biased", "pooled"] {
            XCTAssertEqual(reread.layer(named: name)?.params, model.layer(named: name)?.params, name)
        }
        let graph = try NetworkGraph(model: reread)
        XCTAssertEqual(graph.blobShapes["gain"], [1, 4, 1, 6])
        XCTAssertEqual(graph.blobShapes["channelMean"], [1, 1, 5, 6])
        XCTAssertEqual(graph.blobShapes["rowMax"], [1, 4, 5, 1])
        XCTAssertEqual(graph.blobShapes["planeSum"], [1, 4, 1, 1])
        XCTAssertEqual(graph.blobShapes["pooled"], [1, 4, 1, 1], "keepDims false: [4] per example")
        XCTAssertEqual(graph.logicalShape(of: "scaled"), LogicalShape([1, 1, 4, 5, 6], batchAxis: 1), "loadConstant is rank 5")
        XCTAssertEqual(graph.logicalShape(of: "pooled"), LogicalShape([1, 1, 4], batchAxis: 1))
        XCTAssertEqual(graph.logicalShape(of: "rowMax"), LogicalShape([1, 1, 4, 5, 1], batchAxis: 1))
        XCTAssertEqual(graph.layer(named: "offset")?.op, .activation(.linear(alpha: 1, beta: 3)))
        for layer in graph.layers {
            let work = try CostModel.work(for: layer, batch: 2, optimizer: .sgd, backwardData: true, backwardWeights: false)
            XCTAssertFalse(work.forward.isEmpty, layer.name)
        }
    }

    func testTrainsThroughEveryLayerAlikeOnEveryBackend() throws {
        let model = try Self.model()
        let examples = (0..<6).map { i in
            TrainingExample(input: Tensor(shape: [3, 5, 6], uniformIn: -1...1, seed: 70 + UInt64(i)), target: .classIndex(i % 3))
        }
        try assertTrainsAlikeOnEveryBackend(model, try ArrayBatchProvider(examples: examples), steps: 6, firstLayer: "conv",
                                            through: "the broadcasting layers")
    }

    func testErrorsNameTheLayerAndTheWayOut() throws {
        let input = FeatureDescription(name: "x", type: .multiArray(.init(shape: [1, 2, 3, 4], dataType: .float32)))
        func error(_ inputs: [String], _ params: LayerParams, extra: ((inout ModelBuilder) throws -> Void)? = nil) throws -> String {
            var b = try ModelBuilder(input: input)
            try extra?(&b)
            do {
                try b.add(LayerSpec(name: "bad", inputs: inputs, outputs: ["y"], params: params))
            } catch let e as UpdraftError {
                return "\(e.message) \(e.hint ?? "")"
            }
            XCTFail("\(params) was accepted")
            return ""
        }
        let constant = { (b: inout ModelBuilder) in
            try b.add(LayerSpec(name: "c", inputs: [], outputs: ["c"], params: .loadConstant(LoadConstantLayerParams(
                shape: [1, 2, 2, 1], data: WeightParams(values: [Float](repeating: 1, count: 4)), isND: true))))
            return ()
        }
        let mismatch = try error(["x", "c"], .broadcastable(.add), extra: constant)
        XCTAssertTrue(mismatch.contains("layer 'bad' (addBroadcastable)") && mismatch.contains("do not broadcast"), mismatch)
        let batchAxis = try error(["x"], .reduceND(ReduceNDLayerParams(kind: .sum, axes: [0], keepDims: true)))
        XCTAssertTrue(batchAxis.contains("axis 0 (the batch of"), batchAxis)
        // every ReduceOperation code runs now; an unknown one is refused, naming the modes that run
        let unknown = try error(["x"], .reduce(ReduceLayerParams(mode: 10, axis: 1)))
        XCTAssertTrue(unknown.contains("mode 10 reduction is not supported") && unknown.contains("SUM, AVG, MAX, MIN, PROD") && unknown.contains("ARGMAX"), unknown)
        let shortData = try error([], .loadConstant(LoadConstantLayerParams(shape: [2, 2, 2], data: WeightParams(values: [1, 2]), isND: false)))
        XCTAssertTrue(shortData.contains("data"), shortData)
        let acrossBatch = try error(["x", "c"], .broadcastable(.multiply), extra: { b in
            try b.add(LayerSpec(name: "c", inputs: [], outputs: ["c"], params: .loadConstant(LoadConstantLayerParams(
                shape: [2, 1, 1, 1], data: WeightParams(values: [1, 2]), isND: true))))
        })
        XCTAssertTrue(acrossBatch.contains("across the batch axis"), acrossBatch)
        let outOfRange = try error(["x"], .reduceND(ReduceNDLayerParams(kind: .mean, axes: [4], keepDims: true)))
        XCTAssertTrue(outOfRange.contains("axis 4 is outside -4...3"), outOfRange)
    }
}
