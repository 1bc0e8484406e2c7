import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// A layer fixture of Tests/Scripts/make_resample_fixtures.py or make_reduce_fixtures.py: the model
/// file, its layers, a batch of inputs with labels, and per example every checked blob's values as
/// numpy computed them.
struct LayerFixture: Decodable {
    struct Blob: Decodable { var shape: [Int]; var values: [Double] }
    var model: String; var layers: [[String]]; var inputShape: [Int]; var inputs: [Float]; var labels: [Int]
    var blobs: [String: Blob]

    /// The batch as training examples (class labels).
    var examples: [TrainingExample] {
        let perExample = inputShape.reduce(1, *)
        return (0..<labels.count).map { i in
            TrainingExample(input: Tensor(shape: Shape(inputShape), data: Array(inputs[i * perExample..<(i + 1) * perExample])),
                            target: .classIndex(labels[i]))
        }
    }
}

/// Reads fixture `name` of `folder`: its `layers` decode as `types`, encode to the bytes coremltools
/// wrote, and the model writes back byte for byte; every blob of the JSON comes out of the reference,
/// the CPU and OpenCL as numpy computed it; and (`trains`) the model trains alike on the three, its
/// first convolution "mix" (before the layers under test) moving. Returns the model and the fixture.
@discardableResult
func assertLayerFixture(_ folder: URL, _ name: String, layers: [String], types: [String], trains: Bool = true,
                        file: StaticString = #filePath, line: UInt = #line) throws -> (model: CoreMLModel, fixture: LayerFixture) {
    let golden = try JSONDecoder().decode(LayerFixture.self, from: Data(contentsOf: folder.appendingPathComponent(name + ".json")))
    let bytes = [UInt8](try Data(contentsOf: folder.appendingPathComponent(golden.model)))
    let model = try CoreMLModel(serializedBytes: bytes)
    XCTAssertEqual(model.serializedBytes(), bytes, "\(name) writes back byte for byte", file: file, line: line)

    // Each tested layer's parameters, encoded from the typed spec, are coremltools' bytes.
    let raw = try ProtoMessage(parsing: bytes)
    let network = try ProtoMessage(parsing: try XCTUnwrap(raw.last(500), file: file, line: line).payload)
    for (i, field) in network.all(1).enumerated() {
        let layerMessage = try ProtoMessage(parsing: field.payload)
        let spec = model.layers[i]
        guard layers.contains(spec.name) else { continue }
        XCTAssertTrue(types.contains(spec.typeName), "\(spec.name) is \(spec.typeName)", file: file, line: line)
        let stored = try XCTUnwrap(layerMessage.last(spec.params.typeField), file: file, line: line)
        XCTAssertEqual(spec.params.encoded().serialized(), Array(stored.payload), "\(spec.name): typed encoding", file: file, line: line)
    }

    let graph = try NetworkGraph(model: model)
    let n = golden.labels.count
    let x = Tensor(shape: Shape([n] + golden.inputShape), data: golden.inputs)
    for backend in [ReferenceBackend() as Backend, CPUBackend(), OpenCLBackend(context: try OpenCLTestSupport.context())] {
        let executor = try Executor(training: .inference(graph: graph), optimizer: .sgd, backend: backend)
        for (blob, expected) in golden.blobs {
            let got = try executor.predict(x, blob: blob)
            XCTAssertEqual(got.shape.itemCount, expected.shape.reduce(1, *), "\(backend.name) \(blob) shape \(got.shape)", file: file, line: line)
            XCTAssertEqual(got.data.count, expected.values.count, "\(backend.name) \(blob)", file: file, line: line)
            let worst = zip(got.data, expected.values).map { abs(Double($0) - $1) / max(1, abs($1)) }.max() ?? 0
            XCTAssertLessThan(worst, 2e-5, "\(backend.name): \(blob) differs from numpy by \(worst)", file: file, line: line)
        }
    }

    if trains {
        try assertTrainsAlikeOnEveryBackend(model, try ArrayBatchProvider(examples: golden.examples), steps: 3, firstLayer: "mix",
                                            through: layers.joined(separator: ", "), file: file, line: line)
    }
    return (model, golden)
}
