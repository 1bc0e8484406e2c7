import XCTest
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
        let wrapped = try TrainingRun.train(model, data) { $0.backends = (counting, counting); $0.featureCache = false }
        let plain = try TrainingRun.train(model, data) { $0.backends = (CPUBackend(), CPUBackend()); $0.featureCache = false }
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

    /// The loss is read with `downloadLater`, as in production: a device failing there falls back.
    func testAFailedDownloadLaterFallsBackLikeAnyDeviceFailure() throws {
        let model = try SqueezeShaped.model(), data = try SqueezeShaped.data(count: 8)
        let failing = FailingBackend(CPUBackend(), failing: .downloadLater, onCall: 2)
        let recovered = try TrainingRun.train(model, data) { $0.backends = (failing, failing) }
        let expected = try TrainingRun.train(model, data) { $0.backends = (CPUBackend(), CPUBackend()) }
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
