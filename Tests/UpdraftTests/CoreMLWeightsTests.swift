import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftModel

/// Getting and setting a layer's weights and bias through CoreMLModel.
final class CoreMLWeightsTests: XCTestCase {
    /// The raw bytes of every layer field of a model's network, in order.
    private func layerBytes(_ model: CoreMLModel) throws -> [[UInt8]] {
        let net = try XCTUnwrap(model.message.last(model.kind.fieldNumber))
        return try ProtoMessage(parsing: net.payload).all(1).map { Array($0.raw) }
    }

    func testWeightShapesAndValues() throws {
        let sgd = try CoreMLFixtures.model("dense_sgd_classifier")
        let w = try sgd.weights(ofLayer: "dense1")
        XCTAssertEqual(w.shape, [8, 4])
        XCTAssertEqual(try sgd.bias(ofLayer: "dense1")?.shape, [8])
        XCTAssertEqual(try sgd.weightShape(ofLayer: "dense2"), [3, 8])
        let conv = try CoreMLFixtures.model("conv_image_classifier")
        XCTAssertEqual(try conv.weights(ofLayer: "conv").shape, [4, 3, 3, 3])
        XCTAssertEqual(try conv.weights(ofLayer: "dense").shape, [2, 256])
        let mse = try CoreMLFixtures.model("mse_regressor")
        XCTAssertNil(try mse.bias(ofLayer: "out"))
        // float16 weights come back widened.
        let half = try CoreMLFixtures.model("float16_frozen")
        let frozen = try half.weights(ofLayer: "frozen")
        XCTAssertEqual(frozen.shape, [5, 4])
        guard case let .innerProduct(p)? = half.layer(named: "frozen")?.params else { return XCTFail() }
        XCTAssertEqual(p.weights.encoding, .float16)
        for v in frozen.data { XCTAssertEqual(Float(Float16Bits.round(v)), v) }
    }

    func testSetWeightsThenReadBack() throws {
        var model = try CoreMLFixtures.model("conv_image_classifier")
        let before = try layerBytes(model)
        let newWeights = Tensor(shape: [4, 3, 3, 3], uniformIn: -1...1, seed: 5)
        let newBias = Tensor(shape: [4], data: [0.5, -0.25, 0, 8])
        try model.setWeights(newWeights, ofLayer: "conv")
        try model.setBias(newBias, ofLayer: "conv")
        XCTAssertEqual(try model.weights(ofLayer: "conv"), newWeights)
        XCTAssertEqual(try model.bias(ofLayer: "conv"), newBias)

        // Written and read again, from bytes and from a file.
        let reread = try CoreMLModel(serializedBytes: model.serializedBytes())
        XCTAssertEqual(try reread.weights(ofLayer: "conv"), newWeights)
        XCTAssertEqual(try reread.bias(ofLayer: "conv"), newBias)
        XCTAssertEqual(reread.spec, model.spec)

        // Flags kept; other layers' bytes untouched; the untouched dense layer reads the same.
        guard case let .convolution(c)? = reread.layer(named: "conv")?.params else { return XCTFail() }
        XCTAssertTrue(c.weights.isUpdatable)
        XCTAssertTrue(c.bias?.isUpdatable ?? false)
        XCTAssertTrue(reread.layer(named: "conv")?.isUpdatable ?? false)
        let after = try layerBytes(reread)
        XCTAssertEqual(after.count, before.count)
        XCTAssertNotEqual(after[0], before[0])
        XCTAssertEqual(Array(after[1...]), Array(before[1...]))
        XCTAssertEqual(try reread.weights(ofLayer: "dense"), try CoreMLFixtures.model("conv_image_classifier").weights(ofLayer: "dense"))

        // Everything outside the network is byte-identical too: description, version, flags.
        let original = try ProtoMessage(parsing: try CoreMLFixtures.bytes("conv_image_classifier"))
        let written = try ProtoMessage(parsing: reread.serializedBytes())
        XCTAssertEqual(written.fields.filter { $0.number != 403 }.map { Array($0.raw) },
                       original.fields.filter { $0.number != 403 }.map { Array($0.raw) })
    }

    func testSettingFloat16WeightsRewritesThemAsFloat32() throws {
        var model = try CoreMLFixtures.model("float16_frozen")
        let w = Tensor(shape: [5, 4], uniformIn: -0.5...0.5, seed: 1)
        try model.setWeights(w, ofLayer: "frozen")
        let reread = try CoreMLModel(serializedBytes: model.serializedBytes())
        guard case let .innerProduct(p)? = reread.layer(named: "frozen")?.params else { return XCTFail() }
        XCTAssertEqual(p.weights.encoding, .float32)
        XCTAssertEqual(p.weights.values, w.data)
        XCTAssertEqual(p.bias?.encoding, .float16)   // the bias was not touched
    }

    func testSetWeightsKeepsUnknownFieldsInTheWeightMessage() throws {
        // Add an unknown field 77 to dense1's WeightParams, then set new weights.
        var message = try ProtoMessage(parsing: try CoreMLFixtures.bytes("dense_sgd_classifier"))
        try message.editMessage(403) { net in
            try net.editMessage(1, occurrence: 0) { layer in
                try layer.editMessage(140) { ip in
                    try ip.editMessage(20) { w in w.fields.append(ProtoField(number: 77, varint: 12345)) }
                }
            }
        }
        var model = try CoreMLModel(serializedBytes: message.serialized())
        try model.setWeights(Tensor(zeros: [8, 4]), ofLayer: "dense1")
        let out = try ProtoMessage(parsing: model.serializedBytes())
        let net = try ProtoReader(out, path: "M").message(403, "nn")!
        let layer = try net.messages(1, "layers")[0]
        let weights = try layer.message(140, "ip")!.message(20, "weights")!
        XCTAssertEqual(try weights.uint64(77, "unknown"), 12345)
        XCTAssertEqual(try weights.bool(50, "isUpdatable"), true)
        XCTAssertEqual(try weights.floats(1, "floatValue"), [Float](repeating: 0, count: 32))
    }

    func testBadWeightUpdatesThrowClearly() throws {
        var model = try CoreMLFixtures.model("mse_regressor")
        assertErrorMentions(try model.setWeights(Tensor(zeros: [6, 4]), ofLayer: "hidden"), containing: ["hidden", "[6, 3]", "[6, 4]"])
        assertErrorMentions(try model.setBias(Tensor(zeros: [2]), ofLayer: "out"), containing: ["out", "no bias"])
        assertErrorMentions(try model.setWeights(Tensor(zeros: [1]), ofLayer: "tanh"), containing: ["tanh", "activation", "weights"])
        assertErrorMentions(try model.weights(ofLayer: "nope"), containing: ["no layer named 'nope'"])
        let quantized = try CoreMLFixtures.model("quantized_weights")
        assertErrorMentions(try quantized.weights(ofLayer: "quant"), containing: ["quant", "quantized", "not", "float32"])
        // Setting float32 weights over quantized ones replaces them and drops the quantization.
        var q = quantized
        try q.setWeights(Tensor(shape: [3, 4], repeating: 0.5), ofLayer: "quant")
        let reread = try CoreMLModel(serializedBytes: q.serializedBytes())
        XCTAssertEqual(try reread.weights(ofLayer: "quant").data, [Float](repeating: 0.5, count: 12))
    }

    func testWriteIsAtomicAndReportsUnwritableFolders() throws {
        let model = try CoreMLFixtures.model("mse_regressor")
        let missing = URL(fileURLWithPath: "/nonexistent-updraft-folder/model.mlmodel")
        assertErrorMentions(try model.write(to: missing), containing: ["nonexistent-updraft-folder"])
        assertErrorMentions(try CoreMLModel(contentsOf: missing), containing: ["cannot read", "model.mlmodel"])
        // Overwriting an existing file replaces it whole.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-atomic-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = folder.appendingPathComponent("m.mlmodel")
        try Data(repeating: 0xAB, count: 10_000).write(to: url)
        try model.write(to: url)
        XCTAssertEqual([UInt8](try Data(contentsOf: url)), model.serializedBytes())
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path), ["m.mlmodel"])
    }
}

/// Rounding a float to the nearest half-precision value, to check float16 weights are exact halves.
enum Float16Bits {
    static func round(_ v: Float) -> Float {
        // Halves have 10 mantissa bits: values decoded from float16 survive a 13-bit truncation.
        Float(bitPattern: v.bitPattern & ~UInt32(0x1FFF))
    }
}
