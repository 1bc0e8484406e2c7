import XCTest
@testable import UpdraftModel

/// Transfer learning between models (`CoreMLModel.copyWeights`, `SqueezeNet.Options.frozenWeightsFrom`,
/// `updraft create --frozen-from`): the demo's second stage.
final class CoreMLTransferTests: XCTestCase {
    private func squeezeNet(labels: [String], updatable: [String]? = nil, seed: UInt64, size: Int = 48,
                            frozenFrom: CoreMLModel? = nil) throws -> CoreMLModel {
        var o = SqueezeNet.Options(labels: labels, seed: seed, inputSize: size)
        if let updatable { o.updatableLayers = updatable }
        o.frozenWeightsFrom = frozenFrom
        return try SqueezeNet.build(o)
    }

    func testFrozenLayersTakeTheSourceWeightsAndTheHeadStartsFresh() throws {
        let all = try squeezeNet(labels: ["a", "b", "c"], seed: 1).weightedLayerNames
        XCTAssertEqual(all.count, 27, "conv1, 8 fire modules x 3, conv10, fullyconnected0")
        let source = try squeezeNet(labels: ["a", "b", "c"], updatable: all, seed: 1)
        XCTAssertEqual(source.updatableLayerNames, all)
        XCTAssertEqual(source.frozenWeightedLayerNames, [])
        let fresh = try squeezeNet(labels: ["x", "y", "z"], seed: 2)
        let target = try squeezeNet(labels: ["x", "y", "z"], seed: 2, frozenFrom: source)
        XCTAssertEqual(target.frozenWeightedLayerNames, all.filter { $0 != "conv10" && $0 != "fullyconnected0" })
        for name in target.frozenWeightedLayerNames {
            XCTAssertEqual(try target.weights(ofLayer: name), try source.weights(ofLayer: name), name)
            XCTAssertEqual(try target.bias(ofLayer: name), try source.bias(ofLayer: name), name)
            XCTAssertNotEqual(try target.weights(ofLayer: name), try fresh.weights(ofLayer: name), name)
        }
        for name in ["conv10", "fullyconnected0"] {
            XCTAssertEqual(try target.weights(ofLayer: name), try fresh.weights(ofLayer: name), "\(name) starts fresh from the seed")
        }
        XCTAssertEqual(target.classLabels, .strings(["x", "y", "z"]))
        // The copy survives a write and a read.
        let back = try CoreMLModel(serializedBytes: target.serializedBytes())
        XCTAssertEqual(try back.weights(ofLayer: "fire9/expand3x3"), try source.weights(ofLayer: "fire9/expand3x3"))
    }

    func testCopiesThatCannotWorkAreRefusedByNameAndChangeNothing() throws {
        let source = try squeezeNet(labels: ["a", "b"], seed: 1)
        var target = try squeezeNet(labels: ["a", "b", "c"], seed: 2)
        let before = target.serializedBytes()
        XCTAssertThrowsError(try target.copyWeights(from: source, layers: ["conv1", "fullyconnected0"])) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("fullyconnected0") && text.contains("[3, 1000]") && text.contains("[2, 1000]"), text)
        }
        XCTAssertEqual(target.serializedBytes(), before, "a refused copy leaves the model as it was, conv1 included")
        XCTAssertThrowsError(try target.copyWeights(from: source, layers: ["nosuchlayer"])) { error in
            XCTAssertTrue("\(error)".contains("no layer 'nosuchlayer'"), "\(error)")
        }
        // A classifier head sized for another class count cannot be kept frozen from the source.
        XCTAssertThrowsError(try squeezeNet(labels: ["a", "b", "c"], updatable: ["fire9/expand3x3"], seed: 3, frozenFrom: source)) { error in
            XCTAssertTrue("\(error)".contains("fullyconnected0"), "\(error)")
        }
    }
}
