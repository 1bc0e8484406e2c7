import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftModel
@testable import UpdraftChecks
@testable import UpdraftTraining

/// Bad input gets a clear error, never a crash: truncations, random bytes, mutations, absurd
/// sizes, missing weights, shape mismatches, unknown layer types.
final class CoreMLBadInputTests: XCTestCase {
    /// UPDRAFT_FUZZ_SCALE=N multiplies the mutation counts for a longer hunt (default 1: seconds).
    private let scale = max(1, Int(ProcessInfo.processInfo.environment["UPDRAFT_FUZZ_SCALE"] ?? "") ?? 1)
    /// UPDRAFT_FUZZ_SEED changes the mutation seeds (default: fixed, so runs repeat).
    private let seedOffset = UInt64(ProcessInfo.processInfo.environment["UPDRAFT_FUZZ_SEED"] ?? "") ?? 0

    /// Everything Updraft does with a model it has loaded: none of it may crash.
    private func exercise(_ model: CoreMLModel) {
        _ = try? NetworkGraph(model: model)
        _ = ModelValidator.validate(model)
        let report = ModelReport(model: model)
        _ = report.text()
        _ = try? report.json()
        _ = try? InteropSidecar.json(for: model)
        _ = model.hyperparameters
        _ = model.lossTargetFeature
        for name in model.layerNames {
            _ = try? model.weights(ofLayer: name)
            _ = try? model.bias(ofLayer: name)
        }
    }

    /// Loads `bytes`; a model must re-serialize to the same bytes, an error must be one of ours
    /// and say something. Returns whether it loaded.
    @discardableResult
    private func loadOrThrow(_ bytes: [UInt8], _ context: @autoclosure () -> String) -> Bool {
        do {
            let model = try CoreMLModel(serializedBytes: bytes)
            XCTAssertEqual(model.serializedBytes(), bytes, context())
            exercise(model)
            return true
        } catch let e as ProtobufError {
            XCTAssertFalse(e.message.isEmpty, context())
            XCTAssertTrue(e.offset >= 0 && e.offset <= bytes.count, "offset \(e.offset) outside the data: \(context())")
        } catch let e as UpdraftError {
            XCTAssertFalse(e.message.isEmpty, context())
        } catch {
            XCTFail("unexpected error type \(type(of: error)): \(error) (\(context()))")
        }
        return false
    }

    /// A few thousand seeded mutations of every fixture: byte flips, truncations, insertions,
    /// runs of 0xFF (absurd varints), deletions and duplicated spans.
    func testMutatedFixturesLoadOrThrow() throws {
        var rng = SplitMix64(seed: 0xC0DE &+ seedOffset)
        var loaded = 0, rejected = 0
        let perFixture = 450 * scale
        for name in CoreMLFixtures.names {
            let original = try CoreMLFixtures.bytes(name)
            for trial in 0..<perFixture {
                var b = original
                let rounds = 1 + Int(rng.next() % 3)
                for _ in 0..<rounds {
                    let at = Int(rng.next() % UInt64(max(1, b.count)))
                    switch rng.next() % 6 {
                    case 0: if !b.isEmpty { b[at] ^= UInt8(truncatingIfNeeded: 1 << (rng.next() % 8)) }
                    case 1: if !b.isEmpty { b[at] = UInt8(truncatingIfNeeded: rng.next()) }
                    case 2: b = Array(b.prefix(at))
                    case 3: b.insert(contentsOf: (0..<(1 + rng.next() % 8)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }, at: at)
                    case 4: b.replaceSubrange(at..<min(b.count, at + 10), with: [UInt8](repeating: 0xFF, count: 10))
                    default:
                        let end = min(b.count, at + 1 + Int(rng.next() % 16))
                        if rng.next() % 2 == 0 { b.removeSubrange(at..<end) } else { b.insert(contentsOf: b[at..<end], at: at) }
                    }
                }
                if loadOrThrow(b, "\(name) mutation \(trial)") { loaded += 1 } else { rejected += 1 }
            }
        }
        // Both outcomes happen: the mutations reach past the parser into the spec and graph checks.
        XCTAssertGreaterThan(loaded, 100)
        XCTAssertGreaterThan(rejected, 100)
    }

    /// Structure-aware mutations: walk into nested messages and change one field's value to an
    /// extreme (0, 1, 2^31, 2^40, 2^64 - 1, ...), its wire type, or remove or duplicate it, keeping
    /// every length consistent. These files parse, so they exercise the spec, graph and validator.
    func testFieldLevelMutationsLoadOrThrow() throws {
        let extremes: [UInt64] = [0, 1, 2, 3, 7, 255, 65_536, 1 << 31, 1 << 32, 1 << 40, 1 << 62, UInt64.max - 1, UInt64.max]
        var rng = SplitMix64(seed: 0xF1E1D &+ seedOffset)
        func mutate(_ m: inout ProtoMessage, depth: Int) {
            guard !m.fields.isEmpty else {
                m.fields.append(ProtoField(number: 1 + Int(rng.next() % 200), varint: extremes[Int(rng.next() % UInt64(extremes.count))]))
                return
            }
            let i = Int(rng.next() % UInt64(m.fields.count))
            let f = m.fields[i]
            if f.wireType == .lengthDelimited, depth < 10, rng.next() % 4 != 0,
               var child = try? ProtoMessage(parsing: f.payload), !child.fields.isEmpty {
                mutate(&child, depth: depth + 1)
                m.fields[i] = ProtoField(number: f.number, message: child)
                return
            }
            let value = extremes[Int(rng.next() % UInt64(extremes.count))]
            switch rng.next() % 6 {
            case 0: m.fields.remove(at: i)
            case 1: m.fields.insert(f, at: i)
            case 2: m.fields[i] = ProtoField(number: f.number, varint: value)
            case 3: m.fields[i] = ProtoField(number: f.number, float: [0, -1, .nan, .infinity, 1e30][Int(rng.next() % 5)])
            case 4: m.fields[i] = ProtoField(number: f.number, double: [0, -1, .nan, -.infinity, 1e300][Int(rng.next() % 5)])
            default: m.fields[i] = ProtoField(number: f.number, bytes: [UInt8](repeating: 0x01, count: Int(rng.next() % 9)))
            }
        }
        var loaded = 0, graphs = 0
        for name in CoreMLFixtures.names {
            let original = try ProtoMessage(parsing: try CoreMLFixtures.bytes(name))
            for trial in 0..<(250 * scale) {
                var m = original
                for _ in 0..<(1 + Int(rng.next() % 2)) { mutate(&m, depth: 0) }
                let bytes = m.serialized()
                if loadOrThrow(bytes, "\(name) field mutation \(trial)") {
                    loaded += 1
                    if (try? NetworkGraph(model: CoreMLModel(serializedBytes: bytes))) != nil { graphs += 1 }
                }
            }
        }
        XCTAssertGreaterThan(loaded, 500)
        XCTAssertGreaterThan(graphs, 200)
    }

    func testEveryTruncationOfAFixtureLoadsOrThrows() throws {
        let bytes = try CoreMLFixtures.bytes("dense_sgd_classifier")
        var rejected = 0
        for n in 0..<bytes.count where !loadOrThrow(Array(bytes.prefix(n)), "prefix \(n)") { rejected += 1 }
        XCTAssertGreaterThan(rejected, bytes.count / 2)
    }

    func testRandomBytesAreRejected() {
        var rng = SplitMix64(seed: 99)
        for trial in 0..<300 {
            let count = Int(rng.next() % 512)
            let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            loadOrThrow(bytes, "random \(trial)")
        }
        assertErrorMentions(try CoreMLModel(serializedBytes: []), containing: ["no model type"])
        assertErrorMentions(try CoreMLModel(serializedBytes: Array("this is not a model".utf8)), containing: ["malformed model data"])
    }

    func testOtherModelTypesAreRefusedByName() {
        // Model { specificationVersion: 4, treeEnsembleClassifier (402): {} }
        assertErrorMentions(try CoreMLModel(serializedBytes: [0x08, 0x04, 0x92, 0x19, 0x00]),
                     containing: ["treeEnsembleClassifier", "402", "neural networks"])
        // Model { specificationVersion: 4, kNearestNeighborsClassifier (404): {} } reads (a k-NN is a
        // kind Updraft reads), and its validator names what the empty message lacks.
        let knn = try? CoreMLModel(serializedBytes: [0x08, 0x04, 0xA2, 0x19, 0x00])
        let findings = knn.map { ModelKinds.validate($0).map(\.message) } ?? []
        XCTAssertTrue(findings.contains { $0.contains("numberOfDimensions is 0") }, "\(findings)")
        assertErrorMentions(try CoreMLModel(serializedBytes: [0x08, 0x04, 0xB2, 0x1F, 0x00]), containing: ["mlProgram"])
    }

    // MARK: Targeted corruptions of a valid model

    /// dense_sgd_classifier with its first layer's inner-product parameters edited.
    private func editDense(_ layerIndex: Int = 0, _ body: (inout ProtoMessage) throws -> Void) throws -> CoreMLModel {
        var message = try ProtoMessage(parsing: try CoreMLFixtures.bytes("dense_sgd_classifier"))
        try message.editMessage(403) { net in
            try net.editMessage(1, occurrence: layerIndex) { layer in try layer.editMessage(140, body) }
        }
        return try CoreMLModel(serializedBytes: message.serialized())
    }

    func testAbsurdSizesAreCaughtBeforeAllocating() throws {
        let huge = try editDense { ip in ip.set(ProtoField(number: 2, varint: 1 << 40)) }
        assertErrorMentions(try NetworkGraph(model: huge), containing: ["dense1", "1099511627776"])
        assertErrorMentions(try huge.weights(ofLayer: "dense1"), containing: ["dense1"])
        XCTAssertFalse(ModelValidator.validate(huge).errors.isEmpty)
        let maxed = try editDense { ip in ip.set(ProtoField(number: 1, varint: UInt64.max)) }
        assertErrorMentions(try NetworkGraph(model: maxed), containing: ["dense1"])
        _ = ModelReport(model: maxed).text()
    }

    func testMissingWeightsNameTheLayer() throws {
        let noWeights = try editDense { ip in ip.remove(20) }
        assertErrorMentions(try NetworkGraph(model: noWeights), containing: ["dense1", "no weights values", "expected 32"])
        let noBias = try editDense(2) { ip in ip.remove(21) }
        assertErrorMentions(try NetworkGraph(model: noBias), containing: ["dense2", "bias"])
        let short = try editDense { ip in
            try ip.editMessage(20) { w in w.set(ProtoField(number: 1, packedFloats: [1, 2, 3])) }
        }
        assertErrorMentions(try NetworkGraph(model: short), containing: ["dense1", "3 weights values", "expected 32"])
    }

    func testShapeMismatchNamesLayerAndShapes() throws {
        let mismatch = try editDense(2) { ip in ip.set(ProtoField(number: 1, varint: 9)) }
        assertErrorMentions(try NetworkGraph(model: mismatch), containing: ["dense2", "9 inputs", "[1, 8, 1, 1]"])
    }

    func testUnknownLayerTypesAreNamed() throws {
        // The fixture's LRN (written by coremltools) runs now; the same layer as a crop does not.
        let lrn = try CoreMLFixtures.model("unsupported_layer")
        XCTAssertEqual(try NetworkGraph(model: lrn).layer(named: "norm")?.op,
                       .spatial(.lrn(LRNSpec(alpha: 1e-4, beta: 0.75, k: 1, localSize: 3))))
        assertErrorMentions(try NetworkGraph(model: try CoreMLFixtures.lrnAsCrop()), containing: ["'norm'", "crop", "190"])
        // A layer type newer than any Updraft knows (field 9999).
        var message = try ProtoMessage(parsing: try CoreMLFixtures.bytes("dense_sgd_classifier"))
        try message.editMessage(403) { net in
            try net.editMessage(1, occurrence: 1) { layer in
                layer.remove(130)
                layer.set(ProtoField(number: 9999, message: ProtoMessage()))
            }
        }
        let future = try CoreMLModel(serializedBytes: message.serialized())
        XCTAssertEqual(future.serializedBytes(), message.serialized())
        assertErrorMentions(try NetworkGraph(model: future), containing: ["'relu1'", "layer type 9999"])
        XCTAssertTrue(ModelValidator.validate(future).errors.contains { $0.message.contains("layer type 9999") })
        // An activation type NeuralNetwork.proto does not define (every one it defines runs).
        var unknown = try ProtoMessage(parsing: try CoreMLFixtures.bytes("dense_sgd_classifier"))
        try unknown.editMessage(403) { net in
            try net.editMessage(1, occurrence: 1) { layer in
                try layer.editMessage(130) { act in
                    act.remove(10)
                    act.set(ProtoField(number: 99, message: ProtoMessage()))
                }
            }
        }
        assertErrorMentions(try NetworkGraph(model: try CoreMLModel(serializedBytes: unknown.serialized())),
                     containing: ["'relu1'", "activation type 99", "not supported"])
    }

    func testLayerWithoutATypeIsAnError() throws {
        var message = try ProtoMessage(parsing: try CoreMLFixtures.bytes("dense_sgd_classifier"))
        try message.editMessage(403) { net in try net.editMessage(1, occurrence: 1) { layer in layer.remove(130) } }
        assertErrorMentions(try CoreMLModel(serializedBytes: message.serialized()), containing: ["relu1", "no layer type"])
    }
}
