import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftTraining

/// Forward-only runs (prediction, evaluation, a k-NN pipeline's embedding) fuse as a training
/// prefix does: each ReLU in its convolution's epilogue, the fire module's expands writing their
/// slices of the concat. A blob that fusion does not write can still be asked for: that prediction
/// runs unfused. Every blob matches the Double reference.
final class InferenceFusionTests: XCTestCase {
    let graph = Result { try NetworkGraph(model: try SqueezeShaped.model()) }
    let inputs = Tensor(shape: [3, 3, 15, 15], uniformIn: 0...1, seed: 5)

    func testInferenceGraphFusesActivationsAndConcatSlices() throws {
        let inference = TrainingGraph.inference(graph: try graph.get())
        XCTAssertEqual(Set(inference.fusedActivations.keys),
                       ["conv1", "fire2/squeeze1x1", "fire2/expand1x1", "fire2/expand3x3", "conv10"])
        XCTAssertEqual(inference.slicedConcats, ["fire2/concat"])
        XCTAssertTrue(inference.fusionSkips("conv1"), "conv1's pre-activation output is not written fused")
        XCTAssertFalse(inference.fusionSkips("relu_conv1"))
        XCTAssertTrue(inference.fusionSkips("fire2/relu_expand3x3"), "written straight into the concat")
        XCTAssertFalse(inference.fusionSkips("fire2/concat"))
        XCTAssertFalse(inference.fusionSkips("probabilities"))
    }

    /// The class probabilities run with no activation or concat pass of their own, and every blob
    /// (fused away or not) comes out as the reference computes it, on the CPU and on OpenCL.
    func testEveryBlobMatchesTheReferenceAndTheOutputRunsFused() throws {
        try assertFusedForwardMatchesReference(try graph.get(), inputs: inputs) { backend, counted, executor in
            XCTAssertEqual(counted.calls[.activationForward] ?? 0, 0, "\(backend.name): every ReLU fused")
            XCTAssertEqual(counted.calls[.concatForward] ?? 0, 0, "\(backend.name): the concat written by its convolutions")
            let preActivation = try executor.predict(inputs, blob: "conv1")
            XCTAssertTrue(preActivation.data.contains { $0 < 0 }, "\(backend.name): conv1's own output, before its ReLU")
        }
    }
}
