import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftModel

/// The layer, activation and model type tables (CoreMLTypes.swift) against coremltools' compiled
/// protos (Fixtures/coreml_proto_types.json, from Tests/Scripts/make_proto_types.py), and the layer
/// table (LayerTable.swift): every typed layer type reads as the case it names and writes back as itself.
final class CoreMLTypesTests: XCTestCase {
    private func protoOneof(_ key: String) throws -> [String: Int] {
        let data = try Data(contentsOf: Fixtures.url("coreml_proto_types.json"))
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return try XCTUnwrap(json[key] as? [String: Int], "fixture has no \(key)")
    }

    private func assertSame(_ ours: [String: Int], _ theirs: [String: Int], _ what: String,
                            file: StaticString = #filePath, line: UInt = #line) {
        for (name, field) in theirs where ours[name] != field {
            XCTFail("\(what) \(name) is field \(field) in coremltools, \(ours[name].map(String.init) ?? "missing") here",
                    file: file, line: line)
        }
        for (name, field) in ours where theirs[name] == nil {
            XCTFail("\(what) \(name) = \(field) is not in coremltools' proto", file: file, line: line)
        }
    }

    func testLayerTypesAreCoremltoolsOwn() throws {
        let ours = Dictionary(uniqueKeysWithValues: NeuralNetworkLayerType.allCases.map { ($0.name, $0.rawValue) })
        assertSame(ours, try protoOneof("NeuralNetworkLayer.layer"), "layer type")
        XCTAssertEqual(NeuralNetworkLayerType.name(ofField: 1155), "constantPad")
        XCTAssertEqual(NeuralNetworkLayerType.name(ofField: 99_999), "layer type 99999")
    }

    func testActivationTypesAreCoremltoolsOwn() throws {
        let ours = Dictionary(uniqueKeysWithValues: ActivationParamsType.allCases.map { ($0.name, $0.rawValue) })
        assertSame(ours, try protoOneof("ActivationParams.NonlinearityType"), "activation")
    }

    func testModelTypesAreCoremltoolsOwn() throws {
        let ours = Dictionary(uniqueKeysWithValues: CoreMLModelType.allCases.map { ($0.name, $0.rawValue) })
        assertSame(ours, try protoOneof("Model.Type"), "model type")
        XCTAssertEqual(NeuralNetworkKind.classifier.fieldNumber, 403)
        XCTAssertEqual(NeuralNetworkKind.regressor.fieldNumber, 303)
        XCTAssertEqual(NeuralNetworkKind.plain.fieldNumber, 500)
    }

    /// A NeuralNetworkLayer message whose oneof is `field` with an empty parameter message.
    private func layerMessage(field: Int, params: ProtoMessage = ProtoMessage()) -> ProtoMessage {
        ProtoMessage(fields: [ProtoField(number: 1, string: "l"), ProtoField(number: 2, string: "x"),
                              ProtoField(number: 3, string: "y"), ProtoField(number: field, message: params)])
    }

    func testEveryTypedLayerTypeReadsAndWritesAsItself() throws {
        XCTAssertGreaterThan(LayerParams.readers.count, 30)
        for type in LayerParams.readers.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            let layer = try LayerSpec(reading: ProtoReader(layerMessage(field: type.rawValue), path: "layer"), index: 0)
            if case .unsupported = layer.params { XCTFail("\(type.name) read as unsupported") }
            XCTAssertEqual(layer.params.layerType, type, type.name)
            XCTAssertEqual(layer.params.typeField, type.rawValue, type.name)
            XCTAssertEqual(layer.typeName, type.name)
            // Written and read again: the same typed layer, under the same oneof field.
            let written = layer.encoded()
            XCTAssertEqual(written.fields.last?.number, type.rawValue, type.name)
            let again = try LayerSpec(reading: ProtoReader(written, path: "layer"), index: 0)
            XCTAssertEqual(again, layer, type.name)
        }
    }

    func testLayerTypesNotRunReadAsUnsupportedWithTheirNames() throws {
        let gru = try LayerSpec(reading: ProtoReader(layerMessage(field: NeuralNetworkLayerType.gru.rawValue), path: "layer"), index: 0)
        XCTAssertEqual(gru.params, .unsupported(field: 410, name: "gru"))
        XCTAssertEqual(gru.params.layerType, .gru)
        let unknown = try LayerSpec(reading: ProtoReader(layerMessage(field: 1999), path: "layer"), index: 0)
        XCTAssertEqual(unknown.params, .unsupported(field: 1999, name: "layer type 1999"))
        XCTAssertNil(unknown.params.layerType)
        XCTAssertEqual(unknown.params.typeField, 1999)
    }

    func testEveryActivationTypeReadsAsItself() throws {
        for type in ActivationParamsType.allCases {
            let params = ProtoMessage(fields: [ProtoField(number: type.rawValue, message: ProtoMessage())])
            let a = try ActivationLayerParams(reading: ProtoReader(params, path: "activation"))
            XCTAssertEqual(a.typeField, type.rawValue, type.name)
            XCTAssertEqual(a.typeName, type.name)
            guard let activation = a.activation else { continue }
            // Built from the activation alone, the same case.
            XCTAssertEqual(ActivationLayerParams(activation).typeField, type.rawValue, type.name)
        }
    }
}
