import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftTraining

/// The N-D layout layers coremltools emits beyond transpose / softmaxND / concatND: constantPad
/// (1155) and concatND with interleave. Shape rules, their definitions, and models built with
/// coremltools' NeuralNetworkBuilder (Tests/Scripts/make_ndlayout_fixtures.py, numpy's numbers).
final class LayoutNDTests: XCTestCase {
    private func input(_ shape: [Int]) -> FeatureDescription {
        FeatureDescription(name: "x", type: .multiArray(ArrayFeatureType(shape: shape, dataType: .float32)))
    }

    // MARK: constantPad

    func testConstantPadShapeRules() throws {
        var b = try ModelBuilder(input: input([1, 2, 3, 4]))
        // Two pairs: the last two axes (H by 1 + 2, W by 0 + 1).
        try b.layout("pad", .constantPad(value: 1, padAmounts: [1, 2, 0, 1], padToGivenOutputSizeMode: false), inputs: ["x"])
        XCTAssertEqual(b.logicalShapes["pad"], LogicalShape([1, 2, 6, 5], batchAxis: 0))
        // Every axis, the proto's form: pair i pads axis i.
        try b.layout("all", .constantPad(value: 0, padAmounts: [0, 0, 1, 0, 0, 0, 2, 3], padToGivenOutputSizeMode: false), inputs: ["x"])
        XCTAssertEqual(b.logicalShapes["all"], LogicalShape([1, 3, 3, 9], batchAxis: 0))
        // Output sizes: H to 5 padded before, W to 6 after; C's 1 is smaller than 2, so C stays.
        try b.layout("size", .constantPad(value: -1, padAmounts: [0, 1, 5, 0, 0, 6], padToGivenOutputSizeMode: true), inputs: ["x"])
        XCTAssertEqual(b.logicalShapes["size"], LogicalShape([1, 2, 5, 6], batchAxis: 0))
        try b.layout("none", .constantPad(value: 3, padAmounts: [0, 0], padToGivenOutputSizeMode: false), inputs: ["x"])
        let graph = try NetworkGraph(model: try b.build())
        XCTAssertEqual(graph.layer(named: "pad")!.op, .layout(.constantPad(dims: [2, 3, 4], before: [0, 1, 0], after: [0, 2, 1], value: 1)))
        XCTAssertEqual(graph.layer(named: "size")!.op, .layout(.constantPad(dims: [2, 3, 4], before: [0, 2, 0], after: [0, 0, 2], value: -1)))
        XCTAssertEqual(graph.layer(named: "none")!.op, .layout(.alias(kind: "constantPad")), "padding nothing is the input itself")
        XCTAssertEqual(graph.layer(named: "pad")!.outputShape, [1, 2, 6, 5])

        // Mistakes are named, with the way out.
        func expect(_ params: LayoutLayerParams, inputs: [String] = ["x"], _ words: [String]) {
            var c = b
            XCTAssertThrowsError(try c.layout("bad", params, inputs: inputs)) { e in
                for w in words { XCTAssertTrue("\(e)".contains(w), "\(e) lacks '\(w)'") }
                XCTAssertTrue("\(e)".contains("'bad'"), "\(e)")
            }
        }
        expect(.constantPad(value: 0, padAmounts: [1, 2, 3], padToGivenOutputSizeMode: false), ["3 values", "before and an after"])
        expect(.constantPad(value: 0, padAmounts: [], padToGivenOutputSizeMode: false), ["0 values"])
        expect(.constantPad(value: 0, padAmounts: Array(repeating: 1, count: 10), padToGivenOutputSizeMode: false), ["5 pairs", "rank 4"])
        expect(.constantPad(value: 0, padAmounts: [1, 0, 0, 0, 0, 0, 0, 0], padToGivenOutputSizeMode: false), ["batch axis 0", "on its own"])
        expect(.constantPad(value: 0, padAmounts: [0, 0, 4, 4], padToGivenOutputSizeMode: true), ["both padAmounts of axis 3", "only one"])
        expect(.constantPad(value: 0, padAmounts: [], padToGivenOutputSizeMode: false), inputs: ["x", "pad"], ["second input 'pad'", "parameters"])
    }

    func testConstantPadDefinitionAndCopies() throws {
        // x [2, 3] per example: one row before, one column after, the border 9.
        let x: [Double] = [1, 2, 3, 4, 5, 6]
        let y = try Reference.constantPad(batch: 1, dims: [2, 3], before: [1, 0], after: [0, 1], value: 9, input: x)
        XCTAssertEqual(y, [9, 9, 9, 9,
                           1, 2, 3, 9,
                           4, 5, 6, 9])
        XCTAssertEqual(try Reference.constantPadBackward(batch: 1, dims: [2, 3], before: [1, 0], after: [0, 1], outputGradient: y), x)
        // The op's copies on every backend give the definition, two examples at once; the gradient is the interior.
        let op = LayoutOp.constantPad(dims: [2, 3], before: [1, 0], after: [0, 1], value: 9)
        let two = x + x.map { -$0 }
        let expected = try Reference.layoutForward(op, batch: 2, inputs: [two])
        for backend: Backend in [ReferenceBackend(), CPUBackend(), OpenCLBackend(context: try OpenCLTestSupport.context())] {
            let out = try backend.makeBuffer(count: 24)
            try backend.layoutForward(op, batch: 2, inputs: [try backend.makeBuffer(two.map(Float.init))], output: out)
            XCTAssertEqual(try backend.download(out).map(Double.init), expected, backend.name)
            let dx = try backend.makeBuffer(count: 12)
            try backend.layoutBackward(op, batch: 2, output: nil, outputGradient: out, inputGradients: [dx])
            XCTAssertEqual(try backend.download(dx).map(Double.init), two, backend.name)
        }
    }

    // MARK: concatND interleave

    func testInterleaveShapeRules() throws {
        var b = try ModelBuilder(input: input([1, 2, 3, 4]))
        try b.layout("same", .copy, inputs: ["x"])
        try b.layout("cat", .concatND(axis: -2, interleave: true), inputs: ["x", "same", "x"])
        XCTAssertEqual(b.logicalShapes["cat"], LogicalShape([1, 2, 9, 4], batchAxis: 0))
        var c = b
        try c.transpose("t", axes: [0, 1, 3, 2], input: "x")          // [1, 2, 4, 3]
        XCTAssertThrowsError(try c.layout("bad", .concatND(axis: 1, interleave: true), inputs: ["x", "t"])) { e in
            for w in ["'bad'", "interleave needs inputs of one shape", "'t' is [1(batch), 2, 4, 3]"] {
                XCTAssertTrue("\(e)".contains(w), "\(e) lacks '\(w)'")
            }
        }
        XCTAssertThrowsError(try c.layout("batch", .concatND(axis: 0, interleave: true), inputs: ["x", "x"])) { e in
            XCTAssertTrue("\(e)".contains("mixes examples"), "\(e)")
        }
        let graph = try NetworkGraph(model: try b.build())
        XCTAssertEqual(graph.layer(named: "cat")!.op, .layout(.concatND(outer: 2, channels: [3, 3, 3], inner: 4, interleave: true)))
        XCTAssertEqual(graph.layer(named: "cat")!.outputShape, [1, 2, 9, 4])
    }

    func testInterleaveDefinitionAndCopies() throws {
        // The proto's example: (3, 2) and (3, 2) along axis 0 alternate rows.
        let a: [Double] = [1, 2, 3, 4, 5, 6], b: [Double] = [7, 8, 9, 10, 11, 12]
        let op = LayoutOp.concatND(outer: 1, channels: [3, 3], inner: 2, interleave: true)
        let y = try Reference.layoutForward(op, batch: 1, inputs: [a, b])
        XCTAssertEqual(y, [1, 2, 7, 8, 3, 4, 9, 10, 5, 6, 11, 12])
        XCTAssertEqual(try Reference.layoutBackward(op, batch: 1, inputs: [a, b], outputGradient: y), [a, b])
        XCTAssertThrowsError(try Reference.layoutForward(.concatND(outer: 1, channels: [3, 2], inner: 2, interleave: true),
                                                         batch: 1, inputs: [a, [1, 2, 3, 4]]))
        // Two examples on every backend, and the gradient split back.
        let a2 = a + a.map { -$0 }, b2 = b + b.map { -$0 }
        let expected = try Reference.layoutForward(op, batch: 2, inputs: [a2, b2])
        for backend: Backend in [ReferenceBackend(), CPUBackend(), OpenCLBackend(context: try OpenCLTestSupport.context())] {
            let out = try backend.makeBuffer(count: 24)
            try backend.layoutForward(op, batch: 2, inputs: [try backend.makeBuffer(a2.map(Float.init)), try backend.makeBuffer(b2.map(Float.init))],
                                      output: out)
            XCTAssertEqual(try backend.download(out).map(Double.init), expected, backend.name)
            let da = try backend.makeBuffer(count: 12), db = try backend.makeBuffer(count: 12)
            try backend.layoutBackward(op, batch: 2, output: nil, outputGradient: out, inputGradients: [da, nil])
            XCTAssertEqual(try backend.download(da).map(Double.init), a2, backend.name)
            try backend.layoutBackward(op, batch: 2, output: nil, outputGradient: out, inputGradients: [nil, db])
            XCTAssertEqual(try backend.download(db).map(Double.init), b2, backend.name)
        }
    }

    // MARK: Models built with coremltools (make_ndlayout_fixtures.py)

    private struct Fixture: Decodable {
        var run: GoldenRun
        var outputs: [Float]
        var layers: [String]
        init(from decoder: Decoder) throws {
            run = try GoldenRun(from: decoder)
            let c = try decoder.container(keyedBy: Keys.self)
            outputs = try c.decode([Float].self, forKey: .outputs)
            layers = try c.decode([String].self, forKey: .layers)
        }
        enum Keys: String, CodingKey { case outputs, layers }
    }

    private func load(_ name: String) throws -> (Fixture, CoreMLModel, [UInt8]) {
        let fixture = try JSONDecoder().decode(Fixture.self, from: Data(contentsOf: Fixtures.url("ndlayout/\(name).json")))
        let bytes = Array(try Data(contentsOf: Fixtures.url("ndlayout/\(name).mlmodel")))
        return (fixture, try CoreMLModel(serializedBytes: bytes), bytes)
    }

    /// Reads the model, checks it writes back byte for byte, runs the untrained model forward to numpy's
    /// probabilities, then trains two epochs to numpy's losses and weights on every backend.
    private func check(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let (fixture, model, bytes) = try load(name)
        XCTAssertEqual(model.serializedBytes(), bytes, "the model writes back byte for byte", file: file, line: line)
        let graph = try NetworkGraph(model: model)
        let golden = fixture.run
        let item = golden.shape.reduce(1, *), count = golden.labels.count
        let x = Tensor(shape: Shape([count] + golden.shape.dropFirst()), data: golden.inputs)
        XCTAssertEqual(x.count, count * item)
        for backend: Backend in [ReferenceBackend(), CPUBackend(), OpenCLBackend(context: try OpenCLTestSupport.context())] {
            let inference = try Executor(training: .inference(graph: graph), optimizer: .sgd, backend: backend)
            let probs = try inference.predict(x, blob: "probs").data
            XCTAssertEqual(probs.count, fixture.outputs.count, file: file, line: line)
            let worst = zip(probs, fixture.outputs).map { abs($0 - $1) }.max() ?? .infinity
            XCTAssertLessThan(worst, 1e-5, "\(backend.name): forward differs from numpy by \(worst)", file: file, line: line)

            let executor = try Executor(training: try TrainingGraph(graph: graph), optimizer: .sgd, backend: backend)
            let hyper = try TrainingParameters(optimizer: .sgd, hyperparameters: graph.hyperparameters)
            let losses = try golden.trainLosses(executor, parameters: hyper)
            XCTAssertEqual(losses.count, golden.losses.count, file: file, line: line)
            for (a, b) in zip(losses, golden.losses) {
                XCTAssertEqual(a, b, accuracy: 1e-4 * max(1, abs(b)), "\(backend.name): losses \(losses) vs numpy \(golden.losses)",
                               file: file, line: line)
            }
            for (layer, expected) in golden.final {
                let (w, b) = try executor.weights(ofLayer: layer)
                let before = graph.layer(named: layer)!.weights!.data
                XCTAssertGreaterThan(zip(w.data, before).map { abs($0 - $1) }.max()!, 1e-3, "\(layer) trains", file: file, line: line)
                let maxW = zip(w.data, expected.weights).map { abs($0 - $1) }.max() ?? .infinity
                let maxB = zip(b!.data, expected.bias).map { abs($0 - $1) }.max() ?? .infinity
                XCTAssertLessThan(maxW, 1e-5, "\(backend.name): \(layer) weights differ from numpy by \(maxW)", file: file, line: line)
                XCTAssertLessThan(maxB, 1e-5, "\(backend.name): \(layer) bias differs from numpy by \(maxB)", file: file, line: line)
            }
        }
    }

    func testConstantPadModelRunsAndTrainsLikeNumpy() throws {
        let (fixture, model, _) = try load("constant_pad")
        XCTAssertEqual(fixture.layers, ["convolution", "constantPad", "constantPad", "reshapeStatic", "innerProduct", "softmax"])
        XCTAssertEqual(model.layer(named: "pad")?.params, .layout(.constantPad(value: 0.5, padAmounts: [0, 0, 1, 0, 0, 2, 1, 1],
                                                                               padToGivenOutputSizeMode: false)))
        XCTAssertEqual(model.layer(named: "pad_to_size")?.params, .layout(.constantPad(value: -0.25, padAmounts: [0, 0, 0, 0, 8, 0, 0, 9],
                                                                                       padToGivenOutputSizeMode: true)))
        XCTAssertEqual(CoreMLModel(spec: model.spec).serializedBytes(), model.serializedBytes(),
                       "the typed spec encodes to coremltools' bytes")
        let graph = try NetworkGraph(model: model)
        XCTAssertEqual(graph.logicalShape(of: "pad_out"), LogicalShape([1, 3, 6, 7], batchAxis: 0))
        XCTAssertEqual(graph.logicalShape(of: "pad_to_size_out"), LogicalShape([1, 3, 8, 9], batchAxis: 0))
        try check("constant_pad")
    }

    func testInterleavedConcatModelRunsAndTrainsLikeNumpy() throws {
        let (fixture, model, _) = try load("concat_interleave")
        XCTAssertEqual(fixture.layers, ["convolution", "convolution", "activation", "concatND", "reshapeStatic", "innerProduct", "softmax"])
        XCTAssertEqual(model.layer(named: "interleave")?.params, .layout(.concatND(axis: -2, interleave: true)))
        XCTAssertEqual(CoreMLModel(spec: model.spec).serializedBytes(), model.serializedBytes(),
                       "the typed spec encodes to coremltools' bytes")
        let graph = try NetworkGraph(model: model)
        XCTAssertEqual(graph.layer(named: "interleave")?.op, .layout(.concatND(outer: 3, channels: [3, 3, 3], inner: 4, interleave: true)))
        XCTAssertEqual(graph.logicalShape(of: "cat"), LogicalShape([1, 3, 9, 4], batchAxis: 0))
        try check("concat_interleave")
    }
}
