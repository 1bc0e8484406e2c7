import XCTest
@testable import UpdraftModel

/// Connecting layers by blob names: ordering, cycles, missing and doubly-produced blobs.
final class GraphTopologyTests: XCTestCase {
    /// x[2,4,4] -> a (conv 1x1) and b (conv 1x1) -> cat -> flatten -> fc -> softmax.
    private func branchy() throws -> ModelSpec {
        var b = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(ArrayFeatureType(shape: [2, 4, 4], dataType: .double))), seed: 4)
        try b.convolution("a", input: "x", outputChannels: 3, kernel: (1, 1))
        try b.convolution("b", input: "x", outputChannels: 1, kernel: (1, 1))
        try b.concat("cat", inputs: ["a", "b"])
        try b.flatten("flat")
        try b.innerProduct("fc", outputChannels: 2)
        try b.softmax("sm")
        try b.addOutput("sm")
        return b.spec
    }

    /// `branchy()` with convolution a's parameters edited.
    private func branchy(editingA edit: (inout ConvolutionLayerParams) -> Void) throws -> ModelSpec {
        var spec = try branchy()
        guard case var .convolution(a) = spec.network.layers[0].params else {
            XCTFail("branchy's first layer is the convolution a")
            return spec
        }
        edit(&a)
        spec.network.layers[0].params = .convolution(a)
        return spec
    }

    private func graph(_ spec: ModelSpec) throws -> NetworkGraph { try NetworkGraph(model: CoreMLModel(spec: spec)) }

    func testLayersOutOfFileOrderAreSorted() throws {
        var spec = try branchy()
        let inOrder = try graph(spec).layers.map(\.name)
        XCTAssertEqual(inOrder, ["a", "b", "cat", "flat", "fc", "sm"])
        spec.network.layers.reverse()
        let g = try graph(spec)
        // Producers come first; between the independent a and b, file order decides (b is now first).
        XCTAssertEqual(g.layers.map(\.name), ["b", "a", "cat", "flat", "fc", "sm"])
        XCTAssertEqual(g.layers.map(\.modelIndex), [4, 5, 3, 2, 1, 0])
        var seen: Set<String> = ["x"]
        for l in g.layers {
            for i in l.inputs { XCTAssertTrue(seen.contains(i), "\(l.name) reads \(i) before it exists") }
            seen.insert(l.output)
        }
        XCTAssertEqual(g.blobShapes["cat"], [1, 4, 4, 4])
        XCTAssertEqual(g.layer(named: "cat")?.inputShapes, [[1, 3, 4, 4], [1, 1, 4, 4]])
    }

    func testCyclesAreNamed() throws {
        var spec = try branchy()
        spec.network.layers[0].inputs = ["fc"]     // a reads fc, which depends on a
        assertErrorMentions(try graph(spec), containing: ["cycle", "'a'", "'cat'"])
    }

    func testBlobsMustExistAndBeProducedOnce() throws {
        var spec = try branchy()
        spec.network.layers[2].inputs = ["a", "ghost"]
        assertErrorMentions(try graph(spec), containing: ["'cat'", "'ghost'", "neither the input"])

        spec = try branchy()
        spec.network.layers[1].outputs = ["a"]
        assertErrorMentions(try graph(spec), containing: ["'a'", "both layer 'a' and layer 'b'"])

        spec = try branchy()
        spec.network.layers[1].outputs = ["x"]
        assertErrorMentions(try graph(spec), containing: ["'b'", "writes the network input"])

        spec = try branchy()
        spec.network.layers[1].name = "a"
        assertErrorMentions(try graph(spec), containing: ["two layers are named 'a'"])

        spec = try branchy()
        spec.network.layers[1].outputs = ["b1", "b2"]
        assertErrorMentions(try graph(spec), containing: ["'b'", "2 outputs"])
    }

    func testShapeMismatchesNameLayerAndShapes() throws {
        var spec = try branchy()
        // fc expects 64 inputs; make it expect 60.
        guard case var .innerProduct(p) = spec.network.layers[4].params else { return XCTFail() }
        p.inputChannels = 60
        p.weights = WeightParams(values: [Float](repeating: 0, count: 120))
        spec.network.layers[4].params = .innerProduct(p)
        assertErrorMentions(try graph(spec), containing: ["'fc'", "60 inputs", "[1, 64, 1, 1]"])

        spec = try branchy(editingA: { a in
            a.kernelChannels = 3
            a.weights = WeightParams(values: [Float](repeating: 0, count: 9))
        })
        assertErrorMentions(try graph(spec), containing: ["'a'", "3 input channels", "[1, 2, 4, 4]"])

        spec = try branchy(editingA: { a in
            a.kernelSize = [5, 5]
            a.weights = WeightParams(values: [Float](repeating: 0, count: 3 * 2 * 25))
        })
        assertErrorMentions(try graph(spec), containing: ["'a'", "larger than the padded input", "[1, 2, 4, 4]"])
    }

    func testInputsUpdraftDoesNotTrain() throws {
        var spec = try branchy()
        spec.description.inputs.append(FeatureDescription(name: "y", type: .double))
        assertErrorMentions(try graph(spec), containing: ["2 inputs", "single-input"])
        spec = try branchy()
        spec.description.inputs[0].type = .string
        assertErrorMentions(try graph(spec), containing: ["input 'x'", "String"])
        spec = try branchy()
        spec.description.inputs[0].type = .multiArray(ArrayFeatureType(shape: [2, 16], dataType: .double))
        assertErrorMentions(try graph(spec), containing: ["input 'x'", "[2, 16]"])
        spec = try branchy()
        spec.description.inputs[0].type = .multiArray(ArrayFeatureType(shape: [2, 4, 1 << 40], dataType: .double))
        assertErrorMentions(try graph(spec), containing: ["input 'x'", "outside"])
    }
}
