import XCTest
import UpdraftCore
@testable import UpdraftBackends

/// `ForwardingBackend`, the base of the wrappers that count, time or fail calls: every call goes
/// through its hook on the way to the wrapped backend, training through it is the wrapped backend's
/// training, and the failure tests reach the paths production takes (`downloadLater` included).
final class BackendForwardingTests: XCTestCase {
    /// Counts calls by kind.
    private final class Counting: ForwardingBackend {
        var calls: [BackendCall.Kind: Int] = [:]
        var details: Set<String> = []
        override func intercept<T>(_ call: BackendCall, _ body: () throws -> T) throws -> T {
            calls[call.kind, default: 0] += 1
            if call.kind == .convolutionForward { details.insert(call.detail) }
            return try body()
        }
    }

    func testTrainingThroughTheWrapperIsTheWrappedBackendsTraining() throws {
        let model = try SqueezeShaped.model(), data = try SqueezeShaped.data(count: 8)
        let counting = Counting(CPUBackend())
        let wrapped = try TrainingRun.train(model, data) { $0.placement.backends = (counting, counting); $0.featureCache.enabled = false }
        let plain = try TrainingRun.train(model, data) { $0.placement.backends = (CPUBackend(), CPUBackend()); $0.featureCache.enabled = false }
        XCTAssertEqual(wrapped.losses, plain.losses)
        XCTAssertEqual(wrapped.weights.mapValues(\.weights), plain.weights.mapValues(\.weights))
        XCTAssertEqual(counting.name, "cpu")
        XCTAssertTrue(counting.runsOnHostCPU, "the wrapped backend's capabilities pass through")
        for kind in [BackendCall.Kind.makeBuffer, .convolutionForward, .convolutionBackwardWeights, .sgdStep, .softmaxCrossEntropy,
                     .downloadLater] {
            XCTAssertGreaterThan(counting.calls[kind] ?? 0, 0, "\(kind) went through the hook: \(counting.calls)")
        }
        XCTAssertTrue(counting.details.contains { $0.contains("->") && $0.contains(" at ") }, "\(counting.details)")
    }

    /// The wrapper has no per-op code: every op of the comparison catalogue reaches it through the
    /// one generic `run`, keyed by the op's own kind, and gives the wrapped backend's numbers.
    func testEveryOpOfTheCatalogueGoesThroughTheOneHook() throws {
        let counting = Counting(CPUBackend())
        let cases = [OpCase].quick
        let wrapped = BackendComparison(backend: counting).run(cases)
        let plain = BackendComparison(backend: CPUBackend()).run(cases)
        XCTAssertEqual(wrapped, plain)
        XCTAssertTrue(wrapped.allSatisfy(\.ok), "\(wrapped.filter { !$0.ok })")
        let ops: [BackendCall.Kind] = [
            .convolutionForward, .convolutionBackwardData, .convolutionBackwardWeights, .innerProductForward,
            .innerProductBackwardData, .innerProductBackwardWeights, .activationForward, .activationBackward,
            .poolingForward, .poolingBackward, .concatForward, .concatBackward, .softmaxForward, .softmaxBackward,
            .softmaxCrossEntropy, .meanSquaredError, .sgdStep, .adamStep, .stridedCopy, .spatialForward,
            .spatialBackward, .broadcastBinary, .reduce, .reduceBackward, .channelAffine, .elementwise]
        let missing = ops.filter { (counting.calls[$0] ?? 0) == 0 }
        XCTAssertEqual(missing, [], "ops that did not reach the hook: \(missing); seen: \(counting.calls.keys.map(\.rawValue).sorted())")
    }

    /// A half-storage op a backend has no kernel for says so (false) through the wrapper too, and
    /// the float form runs when nothing is half.
    func testTheHalfFormsAnswerThroughTheWrapper() throws {
        let counting = Counting(CPUBackend())
        let g = try ConvolutionSpec(inputChannels: 2, outputChannels: 3, kernelH: 3, kernelW: 3, hasBias: false)
            .geometry(input: [1, 2, 5, 5])
        let x = try counting.makeBuffer(count: 50), w = try counting.makeBuffer(count: 54)
        let y = try counting.makeBuffer(count: g.outputShape.count)
        XCTAssertFalse(try counting.convolutionForward(g, input: x, weights: w, bias: nil, output: y, channelOffset: 0,
                                                      outputChannels: 3, epilogue: nil, storage: HalfStorage(input: true, output: false)))
        XCTAssertEqual(counting.calls[.convolutionSliceForward] ?? 0, 0)
        XCTAssertTrue(try counting.convolutionForward(g, input: x, weights: w, bias: nil, output: y, channelOffset: 0,
                                                     outputChannels: 3, epilogue: nil, storage: .none))
        XCTAssertEqual(counting.calls[.convolutionHalfForward], 2)
    }

    /// The loss is read with `downloadLater`, as in production: a device failing there falls back.
    func testAFailedDownloadLaterFallsBackLikeAnyDeviceFailure() throws {
        let model = try SqueezeShaped.model(), data = try SqueezeShaped.data(count: 8)
        let failing = FailingBackend(CPUBackend(), failing: .downloadLater, onCall: 2)
        let recovered = try TrainingRun.train(model, data) { $0.placement.backends = (failing, failing) }
        let expected = try TrainingRun.train(model, data) { $0.placement.backends = (CPUBackend(), CPUBackend()) }
        XCTAssertEqual(recovered.state, .completed, "\(recovered.error.map { "\($0)" } ?? "")")
        XCTAssertEqual(failing.failures, 1)
        XCTAssertEqual(recovered.warnings.count, 1, "\(recovered.warnings)")
        for (name, w) in expected.weights {
            let got = try XCTUnwrap(recovered.weights[name])
            XCTAssertEqual(got.weights.count, w.weights.count)
            XCTAssertLessThan(zip(got.weights, w.weights).map { abs($0 - $1) }.max() ?? 0, 1e-5, name)
        }
    }
}
