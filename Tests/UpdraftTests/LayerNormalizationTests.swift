import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftTraining

/// Core ML's layerNormalization (the first open layer family: LayerFamily.swift): the model of
/// Tests/Scripts/make_layernorm_fixtures.py (built with coremltools' builder, values from PyTorch's
/// layer_norm) read, run to PyTorch's values, written back byte for byte and trained through on every
/// backend; the shape rule's refusals; and a family op with no kind refused by name.
final class LayerNormalizationTests: XCTestCase {
    static let folder = Fixtures.url("layernorm")

    func testAModelWithTwoLayerNormsGivesPyTorchsValuesAndTrainsThroughThem() throws {
        let (model, _) = try assertLayerFixture(Self.folder, "layer_norm", layers: ["lnPlane", "lnAll"], types: ["layerNormalization"])
        let plane = try XCTUnwrap(model.layers.first { $0.name == "lnPlane" }?.params.family(as: LayerNormalizationLayerParams.self))
        XCTAssertEqual(plane.normalizedShape, [3, 4])
        XCTAssertEqual(plane.epsilon, 1e-5)
        XCTAssertEqual(plane.gamma.values.count, 12)
        let graph = try NetworkGraph(model: model)
        let all = try XCTUnwrap(graph.layer(named: "lnAll")?.op.family(as: LayerNormalizationOp.self))
        XCTAssertEqual(all, LayerNormalizationOp(groupSize: 36, epsilon: 1e-3))
        XCTAssertEqual(graph.layer(named: "lnPlane")?.op.family(as: LayerNormalizationOp.self)?.geometry(batch: 5, input: [1, 3, 3, 4]).rows, 15,
                       "three planes per example")
        XCTAssertEqual(model.layers.first { $0.name == "lnAll" }?.parameterCount, 72, "gamma and beta")
    }

    /// A builder with a [C, H, W] input "x" and one layer normalization "ln" of `normalizedShape`
    /// (gamma and beta of `values` each).
    func builder(input shape: [Int] = [2, 3, 4], normalizedShape: [Int], values: Int? = nil, epsilon: Float = 1e-5) throws -> ModelBuilder {
        let input = FeatureDescription(name: "x", type: .multiArray(.init(shape: shape, dataType: .float32)))
        let count = values ?? normalizedShape.reduce(1, *)
        var b = try ModelBuilder(input: input)
        try b.add(LayerSpec(name: "ln", inputs: ["x"], outputs: ["y"],
                            params: .layerNormalization(LayerNormalizationLayerParams(
                                normalizedShape: normalizedShape, epsilon: epsilon,
                                gamma: WeightParams(values: [Float](repeating: 1, count: count)),
                                beta: WeightParams(values: [Float](repeating: 0, count: count))))))
        return b
    }

    func graph(input shape: [Int] = [2, 3, 4], normalizedShape: [Int], values: Int? = nil, epsilon: Float = 1e-5) throws -> NetworkGraph {
        try NetworkGraph(model: builder(input: shape, normalizedShape: normalizedShape, values: values, epsilon: epsilon).build())
    }

    func refusal(_ body: () throws -> Any) -> String {
        do { _ = try body() } catch let e as UpdraftError { return "\(e.message) \(e.hint ?? "")" } catch { return "\(error)" }
        XCTFail("accepted")
        return ""
    }

    func testTheShapeRuleTakesTrailingAxesAndRefusesTheRestByName() throws {
        XCTAssertEqual(try graph(normalizedShape: [4]).layer(named: "ln")?.op.family(as: LayerNormalizationOp.self)?.groupSize, 4)
        XCTAssertEqual(try graph(normalizedShape: [2, 3, 4]).layer(named: "ln")?.outputShape, [1, 2, 3, 4])

        let middle = refusal { try self.graph(normalizedShape: [3]) }
        XCTAssertTrue(middle.contains("layer 'ln' (layerNormalization): normalizedShape [3] is not the trailing axes"), middle)
        XCTAssertTrue(middle.contains("without the batch"), middle)
        let batch = refusal { try self.graph(input: [1, 16], normalizedShape: [1, 16]) }
        XCTAssertTrue(batch.contains("normalizedShape [1, 16] is not the trailing axes of one example"), batch)
        let empty = refusal { try self.graph(normalizedShape: [], values: 1) }
        XCTAssertTrue(empty.contains("must list at least one axis"), empty)
        let gamma = refusal { try self.graph(normalizedShape: [3, 4], values: 5) }
        XCTAssertTrue(gamma.contains("layer 'ln'") && gamma.contains("gamma"), gamma)
        let eps = refusal { try self.graph(normalizedShape: [4], epsilon: -1) }
        XCTAssertTrue(eps.contains("eps -1.0 must be finite and at least 0"), eps)
    }

    func testItIsWrittenBackAsItWasReadAndCannotBeMadeUpdatable() throws {
        let model = try builder(normalizedShape: [3, 4]).build()
        let spec = try XCTUnwrap(model.layers.first)
        let reread = try CoreMLModel(serializedBytes: model.serializedBytes())
        XCTAssertEqual(reread.layers.first?.params, spec.params)
        XCTAssertEqual(reread.layers.first?.typeName, "layerNormalization")
        XCTAssertEqual(reread.layers.first?.params.typeField, 1350)
        XCTAssertEqual(try NetworkGraph(model: reread).layer(named: "ln")?.weights?.data.count, 12)

        var b = try builder(normalizedShape: [3, 4])
        let message = refusal { try b.makeUpdatable(["ln"]) }
        XCTAssertTrue(message.contains("'ln'"), message)
    }

    // MARK: scale and bias (the layers around a converted PyTorch LayerNorm's mvn)

    func testScaleAndBiasLayersGiveNumpysValuesAndTrainThrough() throws {
        let (model, _) = try assertLayerFixture(Self.folder, "scale_bias", layers: ["scaleC", "biasAll"], types: ["scale", "bias"])
        let scale = try XCTUnwrap(model.layers.first { $0.name == "scaleC" }?.params.family(as: ScaleLayerParams.self))
        XCTAssertEqual(scale.shapeScale, [3])
        XCTAssertEqual(scale.shapeBias, [1, 3, 4])
        XCTAssertTrue(scale.hasBias)
        let graph = try NetworkGraph(model: model)
        XCTAssertEqual(graph.layer(named: "scaleC")?.op.family(as: ScaleOp.self),
                       ScaleOp(rowsPerExample: 1, chw: [3, 3, 4], scaleDims: [3, 1, 1], biasDims: [1, 3, 4]))
        XCTAssertEqual(graph.layer(named: "biasAll")?.op.name, "bias")
        XCTAssertEqual(model.layers.first { $0.name == "biasAll" }?.parameterCount, 36)
    }

    func testAScaleOfAShapeCoreMLDoesNotBroadcastIsRefusedByName() throws {
        let input = FeatureDescription(name: "x", type: .multiArray(.init(shape: [2, 3, 4], dataType: .float32)))
        func add(_ params: LayerParams) throws -> NetworkGraph {
            var b = try ModelBuilder(input: input)
            try b.add(LayerSpec(name: "s", inputs: ["x"], outputs: ["y"], params: params))
            return try NetworkGraph(model: b.build())
        }
        XCTAssertNotNil(try add(.scale(ScaleLayerParams(shapeScale: [1], scale: WeightParams(values: [2])))))
        XCTAssertNotNil(try add(.bias(BiasLayerParams(shape: [1, 3, 4], bias: WeightParams(values: [Float](repeating: 1, count: 12))))))
        let wrongAxis = refusal { try add(.scale(ScaleLayerParams(shapeScale: [3], scale: WeightParams(values: [1, 2, 3])))) }
        XCTAssertTrue(wrongAxis.contains("layer 's' (scale): scale shape [3] is not [1], [C], [1, H, W] or [C, H, W]"), wrongAxis)
        let wrongCount = refusal { try add(.bias(BiasLayerParams(shape: [2], bias: WeightParams(values: [1, 2, 3])))) }
        XCTAssertTrue(wrongCount.contains("layer 's' (bias)") && wrongCount.contains("bias"), wrongCount)
    }

    /// A family op that names no layer kind runs nowhere, and says which op and what to add.
    struct KindlessOp: LayerFamilyOp { var name: String { "kindless" } }

    func testAFamilyOpWithoutAKindIsRefusedByName() throws {
        let op = LayerOp.family(FamilyOp(KindlessOp()))
        XCTAssertTrue(op.kind == UnregisteredFamilyLayer.self)
        XCTAssertTrue(LayerOp.family(FamilyOp(LayerNormalizationOp(groupSize: 4, epsilon: 0))).kind == LayerNormalizationLayer.self)
        let layer = GraphLayer(name: "odd", modelIndex: 0, op: op, inputs: ["x"], output: "y", inputShapes: [[1, 4, 1, 1]],
                               outputShape: [1, 4, 1, 1], inputLogicalShapes: [LogicalShape([4], batchAxis: nil)],
                               outputLogicalShape: LogicalShape([4], batchAxis: nil), isUpdatable: false, weights: nil, bias: nil)
        let message = refusal { try op.kind.work(layer, batch: 1, optimizer: .sgd, backwardData: false, backwardWeights: false) }
        XCTAssertTrue(message.contains("layer 'odd' (kindless): its op family has no layer kind"), message)
        XCTAssertTrue(message.contains("FamilyLayerKind"), message)
    }
}
