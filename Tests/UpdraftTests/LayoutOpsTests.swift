import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftPlacement
@testable import UpdraftChecks
@testable import UpdraftData
@testable import UpdraftTraining

/// Logical N-D shapes, multi-array inputs of every rank, and the shape re-labelling layers
/// (reshapeStatic, reshape, flattenTo2D, squeeze, expandDims, copy), which the executor runs as aliases.
final class LayoutShapeTests: XCTestCase {
    func testMultiArrayInputsOfEveryRank() throws {
        let cases: [([Int], [Int], Int?)] = [
            ([7], [1, 7, 1, 1], nil),
            ([1, 7], [1, 7, 1, 1], 0),
            ([3, 5, 6], [1, 3, 5, 6], nil),
            ([1, 3, 5, 6], [1, 3, 5, 6], 0),
            ([1, 1, 3, 5, 6], [1, 3, 5, 6], 1),
            ([1, 2, 3, 5, 6], [1, 2, 3, 30], 0),
        ]
        for (declared, canonical, batchAxis) in cases {
            let b = try ModelBuilder(input: .floatArray(declared))
            XCTAssertEqual(b.shapes["x"], Shape(canonical), "\(declared)")
            XCTAssertEqual(b.logicalShapes["x"], LogicalShape(declared, batchAxis: batchAxis), "\(declared)")
        }
        for bad in [[3, 7], [2, 3, 5, 6], [1, 2, 3, 4, 5, 6], [3, 1, 2, 4, 5]] {
            XCTAssertThrowsError(try ModelBuilder(input: .floatArray(bad))) { e in
                XCTAssertTrue("\(e)".contains("\(bad)"), "\(e)")
            }
        }
    }

    func testShapeInferenceOfTheReshapeFamily() throws {
        var b = try ModelBuilder(input: .floatArray([1, 4, 3, 2]))
        try b.reshapeStatic("flat", targetShape: [1, -1])
        XCTAssertEqual(b.logicalShapes["flat"], LogicalShape([1, 24], batchAxis: 0))
        XCTAssertEqual(b.shapes["flat"], [1, 24, 1, 1])
        try b.expandDims("e", axes: [-1, 2])
        XCTAssertEqual(b.logicalShapes["e"], LogicalShape([1, 24, 1, 1], batchAxis: 0))
        try b.squeeze("s", axes: [], squeezeAll: true)
        XCTAssertEqual(b.logicalShapes["s"], LogicalShape([24], batchAxis: nil))
        try b.reshapeStatic("r3", targetShape: [2, 3, 4])
        XCTAssertEqual(b.shapes["r3"], [1, 2, 3, 4])
        try b.flattenTo2D("f2", axis: -1)
        XCTAssertEqual(b.logicalShapes["f2"], LogicalShape([6, 4], batchAxis: nil))
        try b.flattenTo2D("f0", axis: 0, input: "x")
        XCTAssertEqual(b.logicalShapes["f0"], LogicalShape([1, 24], batchAxis: 0))
        try b.layout("old", .reshape(targetShape: [6, 2, 2], mode: 0), inputs: ["x"])
        XCTAssertEqual(b.logicalShapes["old"], LogicalShape([1, 6, 2, 2], batchAxis: 0))
        try b.copy("c")
        XCTAssertEqual(b.logicalShapes["c"], b.logicalShapes["old"])
        try b.squeeze("s0", axes: [0], input: "x")
        XCTAssertEqual(b.logicalShapes["s0"], LogicalShape([4, 3, 2], batchAxis: nil))
        try b.innerProduct("fc", input: "flat", outputChannels: 5)
        XCTAssertEqual(b.logicalShapes["fc"], LogicalShape([1, 5], batchAxis: 0), "an inner product keeps its input's rank")
        try b.convolution("conv", input: "x", outputChannels: 2, kernel: (1, 1))
        XCTAssertEqual(b.logicalShapes["conv"], LogicalShape([1, 2, 3, 2], batchAxis: 0))

        // Written and read back unchanged; every one of them is an alias.
        let model = try b.build()
        XCTAssertEqual(try CoreMLModel(serializedBytes: model.serializedBytes()).spec, model.spec)
        let graph = try NetworkGraph(model: model)
        for name in ["flat", "e", "s", "r3", "f2", "f0", "old", "c", "s0"] {
            guard case .layout(.alias) = graph.layer(named: name)!.op else { return XCTFail("\(name) is not an alias") }
        }
        XCTAssertEqual(graph.logicalShape(of: "f2"), LogicalShape([6, 4], batchAxis: nil))
        XCTAssertEqual(graph.layer(named: "fc")!.inputLogicalShapes, [LogicalShape([1, 24], batchAxis: 0)])
    }

    func testLayoutMistakesAreNamedErrors() throws {
        func expect(_ params: LayoutLayerParams, on shape: [Int] = [1, 4, 3, 2], _ words: [String]) throws {
            var b = try ModelBuilder(input: .floatArray(shape))
            XCTAssertThrowsError(try b.layout("bad", params)) { e in
                let s = "\(e)"
                XCTAssertTrue(s.contains("layer 'bad'"), s)
                for w in words { XCTAssertTrue(s.contains(w), "\(s) should mention \(w)") }
            }
        }
        try expect(.reshapeStatic(targetShape: [1, 25]), ["25 values", "24"])
        try expect(.reshapeStatic(targetShape: [-1, -1]), ["more than one -1"])
        try expect(.reshapeStatic(targetShape: [1, 0, 24]), ["dimension 0"])
        try expect(.reshapeStatic(targetShape: [5, -1]), ["cannot hold"])
        try expect(.reshapeStatic(targetShape: []), ["targetShape is empty"])
        try expect(.squeeze(axes: [1], squeezeAll: false), ["size 4", "only axes of size 1"])
        try expect(.squeeze(axes: [], squeezeAll: false), ["no axes"])
        try expect(.squeeze(axes: [0, -4], squeezeAll: false), ["twice"])
        try expect(.expandDims(axes: [7]), ["axis 7", "outside"])
        try expect(.flattenTo2D(axis: 6), ["axis 6"])
        try expect(.reshape(targetShape: [2, 12], mode: 0), ["3 ([C, H, W]) or 4"])
        try expect(.reshape(targetShape: [2, 4, 3, 2], mode: 0), ["sequence length"])
        try expect(.reshape(targetShape: [4, 6, 1], mode: 1), ["CHANNEL_LAST", "rearranges"])
    }
}

/// The executor aliases re-labelled blobs: no copy forward, the gradient's buffer handed back.
final class LayoutAliasTests: XCTestCase {
    func testWorkspaceKeepsAnAliasedBufferUntilItsLastHolder() throws {
        let cpu = CPUBackend()
        let ws = Workspace(batch: 1)
        let a = try ws.acquire(8, on: cpu)
        ws.setValue("x", a, on: cpu)
        ws.setValue("y", a, on: cpu)
        ws.dropValue("x")
        let other = try ws.acquire(8, on: cpu)
        XCTAssertFalse(other === a, "a buffer another blob still holds must not go back to the pool")
        let taken = try ws.takeValue("y")!.buffer
        XCTAssertTrue(taken === a)
        ws.setValue("z", a, on: cpu)
        ws.setValue("w", a, on: cpu)
        let copy = try ws.takeValue("z")!.buffer
        XCTAssertFalse(copy === a, "taking an aliased value hands out a copy")
        ws.clearValues()
        XCTAssertTrue(try ws.acquire(8, on: cpu) === a)

        // Gradients: an alias, then accumulation into it without giving the addend away.
        let g = try ws.acquire(4, on: cpu)
        try cpu.upload([1, 2, 3, 4], to: g)
        try ws.addGradient("out", g, on: cpu)
        try ws.addGradient("in", g, on: cpu)
        XCTAssertTrue(ws.gradient("in") === g)
        let h = try ws.acquire(4, on: cpu)
        try cpu.upload([1, 1, 1, 1], to: h)
        try ws.addGradient("in", h, on: cpu)
        XCTAssertEqual(try cpu.download(g), [2, 3, 4, 5])
        ws.clearGradients(on: cpu)
        let again = [try ws.acquire(4, on: cpu), try ws.acquire(4, on: cpu), try ws.acquire(4, on: cpu)]
        XCTAssertEqual(Set(again.map(ObjectIdentifier.init)).count, 3)
        XCTAssertTrue(again.contains { $0 === g } && again.contains { $0 === h }, "each buffer returns to the pool once")
    }

    /// conv (updatable) -> relu -> [reshapeStatic | flatten] -> two paths into one add -> inner product
    /// (updatable) -> softmax: the gradient crosses an alias and accumulates into a shared buffer.
    private func model(aliases: Bool) throws -> CoreMLModel {
        var b = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(ArrayFeatureType(shape: [1, 2, 5, 5], dataType: .float32))),
                                 seed: 3)
        try b.convolution("conv", outputChannels: 3, kernel: (3, 3))
        try b.activation("relu", .relu)
        if aliases {
            try b.reshapeStatic("r", targetShape: [1, 27])
            try b.expandDims("e", axes: [2, 3])
            try b.copy("c", input: "relu")
            try b.flattenTo2D("f", axis: 1)
        } else {
            try b.flatten("r", input: "relu")
            try b.flatten("e", input: "r")
            try b.flatten("c", input: "relu")
            try b.flatten("f", input: "c")
        }
        try b.add("sum", inputs: ["e", "f"])
        try b.innerProduct("fc", outputChannels: 4)
        try b.softmax("probs")
        try b.makeClassifier(labels: .int64([0, 1, 2, 3]), probabilities: "probs")
        try b.makeUpdatable(["conv", "fc"])
        try b.setCrossEntropyLoss(input: "probs")
        b.setOptimizer(.sgd(learningRate: 0.1, miniBatchSize: 3))
        b.setEpochs(1)
        return try b.build()
    }

    private func train(_ model: CoreMLModel, on backend: Backend) throws -> ([Double], [Float]) {
        let graph = try NetworkGraph(model: model)
        let executor = try Executor(training: try TrainingGraph(graph: graph), optimizer: .sgd, backend: backend)
        let hyper = try TrainingParameters(optimizer: .sgd, hyperparameters: graph.hyperparameters)
        let examples = (0..<3).map { i in
            TrainingExample(input: Tensor(shape: [1, 2, 5, 5], uniformIn: -1...1, seed: UInt64(i + 1)), target: .classIndex(i))
        }
        let batch = try ArrayBatchProvider(examples: examples).batch(at: 0..<3)
        var losses: [Double] = []
        for _ in 0..<2 { losses.append(try executor.trainStep(batch, parameters: hyper).loss) }
        return (losses, try executor.weights(ofLayer: "conv").weights.data)
    }

    func testAliasesTrainLikeCopies() throws {
        let (refLoss, refConv) = try train(try model(aliases: false), on: ReferenceBackend())
        var backends: [Backend] = [ReferenceBackend(), CPUBackend()]
        backends.append(OpenCLBackend(context: try OpenCLTestSupport.context()))
        for backend in backends {
            let (loss, conv) = try train(try model(aliases: true), on: backend)
            for (a, b) in zip(loss, refLoss) { XCTAssertEqual(a, b, accuracy: 1e-5, "\(backend.name)") }
            let diff = zip(conv, refConv).map { abs($0 - $1) }.max()!
            XCTAssertLessThan(diff, 1e-5, "\(backend.name): the conv before the aliases got another update")
            XCTAssertNotEqual(conv, try NetworkGraph(model: try model(aliases: true)).layer(named: "conv")!.weights!.data)
        }
    }

    func testForwardAliasesTheBuffer() throws {
        let graph = try NetworkGraph(model: try model(aliases: true))
        let training = try TrainingGraph(graph: graph)
        let executor = try Executor(training: training, optimizer: .sgd, backend: CPUBackend())
        let ws = executor.workspace(2)
        try executor.uploadInput(Tensor(shape: [2, 1, 2, 5, 5], uniformIn: -1...1, seed: 9), ws: ws)
        try executor.forward(layers: graph.layers, ws: ws, keep: Set(graph.blobShapes.keys))
        for (alias, source) in [("r", "relu"), ("e", "relu"), ("c", "relu"), ("f", "relu")] {
            XCTAssertTrue(ws.value(alias)!.buffer === ws.value(source)!.buffer, "\(alias) should alias \(source)")
        }
        ws.clearValues()
        let cost = try CostModel.work(for: graph.layer(named: "r")!, batch: 8, optimizer: .sgd, backwardData: true, backwardWeights: false)
        XCTAssertEqual(cost.forward.count + cost.backwardData.count, 0, "an alias launches no kernel")
    }
}

/// Models converted from PyTorch by coremltools (Tests/Scripts/make_layout_fixtures.py): torch.flatten
/// becomes reshapeStatic, an MLP's input is the rank-2 `[1, 10]`, a channel shuffle becomes
/// reshapeStatic + transpose, torch.cat concatND, softmax over H softmaxND; all train like PyTorch.
final class LayoutConvertedModelTests: XCTestCase {
    private func check(_ name: String, backend: Backend, file: StaticString = #filePath, line: UInt = #line) throws {
        let (golden, model) = try GoldenRun.load(name)
        let graph = try NetworkGraph(model: model)
        let executor = try Executor(training: try TrainingGraph(graph: graph), optimizer: .sgd, backend: backend)
        let hyper = try TrainingParameters(optimizer: .sgd, hyperparameters: graph.hyperparameters)
        let losses = try golden.trainLosses(executor, parameters: hyper)
        for (a, b) in zip(losses, golden.losses) {
            XCTAssertEqual(a, b, accuracy: 1e-4 * max(1, abs(b)), "\(backend.name): losses \(losses) vs PyTorch \(golden.losses)",
                           file: file, line: line)
        }
        XCTAssertEqual(losses.count, golden.losses.count, file: file, line: line)
        for (layer, expected) in golden.final {
            let (w, b) = try executor.weights(ofLayer: layer)
            let maxW = zip(w.data, expected.weights).map { abs($0 - $1) }.max() ?? 0
            let maxB = zip(b!.data, expected.bias).map { abs($0 - $1) }.max() ?? 0
            XCTAssertLessThan(maxW, 1e-5, "\(backend.name): \(layer) weights differ from PyTorch by \(maxW)", file: file, line: line)
            XCTAssertLessThan(maxB, 1e-5, "\(backend.name): \(layer) bias differs from PyTorch by \(maxB)", file: file, line: line)
        }
    }

    func testConvertedFlattenIsAReshapeStaticAlias() throws {
        let (_, model) = try GoldenRun.load("flatten_cnn")
        let graph = try NetworkGraph(model: model)
        XCTAssertEqual(graph.input.logicalShape, LogicalShape([1, 3, 8, 8], batchAxis: 0))
        guard let reshape = graph.layers.first(where: { $0.op == .layout(.alias(kind: "reshapeStatic")) }) else {
            return XCTFail("no reshapeStatic layer in \(graph.layers.map(\.op.name))")
        }
        XCTAssertEqual(reshape.inputLogicalShapes, [LogicalShape([1, 4, 4, 4], batchAxis: 0)])
        XCTAssertEqual(reshape.outputLogicalShape, LogicalShape([1, 64], batchAxis: 0))
        XCTAssertEqual(reshape.outputShape, [1, 64, 1, 1])
        XCTAssertEqual(model.serializedBytes(), Array(try Data(contentsOf: Fixtures.url("golden/flatten_cnn.mlmodel"))),
                       "a converted model writes back byte for byte")
        let (_, mlp) = try GoldenRun.load("mlp")
        XCTAssertEqual(try NetworkGraph(model: mlp).input.logicalShape, LogicalShape([1, 10], batchAxis: 0))
    }

    /// Channel shuffle, cat with a transpose, softmax over H: what each converted layer became.
    func testConvertedAxisOps() throws {
        let (_, model) = try GoldenRun.load("layout_cnn")
        let ops = try NetworkGraph(model: model).layers.map(\.op.name)
        XCTAssertEqual(ops, ["convolution", "activation(relu)", "reshapeStatic", "transpose", "reshapeStatic", "transpose",
                             "concatND", "softmaxND", "reshapeStatic", "innerProduct", "softmax"])
        try check("layout_cnn", backend: ReferenceBackend())

        // inspect shows each output as the model sees it (one example), not the executor's folded 4-D view.
        let report = ModelReport(model: model)
        let reshape = report.layers.first { $0.type == "reshapeStatic" }!
        XCTAssertEqual(reshape.logicalShape, [1, 2, 2, 5, 5])
        XCTAssertEqual(reshape.batchAxis, 0)
        XCTAssertEqual(reshape.outputShape, [2, 2, 25])
        XCTAssertTrue(report.text().contains("2x2x5x5"), report.text())
    }

    func testConvertedModelsTrainLikePyTorchOnCPU() throws {
        try check("flatten_cnn", backend: CPUBackend())
        try check("mlp", backend: CPUBackend())
        try check("layout_cnn", backend: CPUBackend())
    }

    func testConvertedModelsTrainLikePyTorchOnOpenCL() throws {
        let cl = OpenCLBackend(context: try OpenCLTestSupport.context())
        try check("flatten_cnn", backend: cl)
        try check("mlp", backend: cl)
        try check("layout_cnn", backend: cl)
    }
}
