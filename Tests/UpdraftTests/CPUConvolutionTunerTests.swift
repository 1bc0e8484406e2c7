import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftPlacement

/// `updraft tune --cpu`'s measurement: the passes a model trains, every candidate that runs a shape
/// timed, the fastest (or the built-in rule's, within 3%) kept, and the backend left as it was.
final class CPUConvolutionTunerTests: XCTestCase {
    func testProblemsFollowWhatTrainingRuns() throws {
        let graph = try NetworkGraph(model: try SqueezeNet.build(.init(classes: 10)))
        let problems = try CPUConvolutionTuner.problems(forTraining: graph, batch: 2, cacheBytes: 8 << 20)
        let convolutions = try graph.layers.compactMap { try $0.convolutionGeometry(batch: 2) }
        XCTAssertTrue(problems.allSatisfy { $0.op.subject is ConvolutionCase })
        let forward = problems.filter { $0.pass == .forward }
        XCTAssertEqual(forward.count, Set(convolutions.map(CPUConvolutionTuning.shapeKey)).count)
        let updatable = Set(graph.updatableLayers.map(\.name))
        XCTAssertFalse(updatable.isEmpty)
        for p in problems where p.pass == .backwardWeights { XCTAssertTrue(updatable.contains(p.layer), p.layer) }
        XCTAssertTrue(problems.contains { $0.pass == .backwardWeights })
        XCTAssertTrue(try problems.allSatisfy { try $0.convolutionGeometry()?.batch == 2 })
        // At 64, the prefix's chunked start (conv1 to fire3, `PrefixChunking`) runs forward 2 images at a time.
        let chunked = try CPUConvolutionTuner.problems(forTraining: graph, batch: 64, cacheBytes: 8 << 20)
        let batches = Dictionary(try chunked.filter { $0.pass == .forward }.map { ($0.layer, try $0.convolutionGeometry()!.batch) },
                                 uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(batches["conv1"], 2)
        XCTAssertEqual(batches["fire2/expand3x3"], 2)  // fire3's has the same shape
        XCTAssertEqual(batches["fire4/squeeze1x1"], 64)
        XCTAssertEqual(batches["conv10"], 64)
        XCTAssertEqual(try chunked.first { $0.layer == "conv10" && $0.pass == .backwardWeights }?.convolutionGeometry()?.batch, 64)
    }

    func testTuneTimesEveryCandidateAndKeepsAFastOne() throws {
        let pad1 = ConvolutionPadding.valid(top: 1, bottom: 1, left: 1, right: 1)
        let wideSpec = ConvolutionSpec(inputChannels: 32, outputChannels: 32, kernelH: 3, kernelW: 3, padding: pad1)
        let pointwiseSpec = ConvolutionSpec(inputChannels: 16, outputChannels: 8, kernelH: 1, kernelW: 1)
        let wide = try wideSpec.geometry(input: [2, 32, 12, 12])
        let backend = CPUBackend(threads: 2)
        backend.convolutionAlgorithmOverride = .im2col
        let tuner = CPUConvolutionTuner(settings: CPUTunerSettings(backend: backend, repeats: 2))
        let problems: [TunedPass] = [.convolution("wide", wideSpec, input: [2, 32, 12, 12], .forward),
                                     .convolution("wide", wideSpec, input: [2, 32, 12, 12], .backwardData),
                                     .convolution("wide", wideSpec, input: [2, 32, 12, 12], .backwardWeights),
                                     .convolution("pointwise", pointwiseSpec, input: [2, 16, 6, 6], .forward)]
        let (tuning, outcomes) = try tuner.tune(problems)
        XCTAssertEqual(backend.convolutionAlgorithmOverride, .im2col, "the backend's override is restored")
        let oneDNN: Set<CPUConvolutionAlgorithm> = OneDNN.isAvailable ? [.onednn] : []
        // The direct convolution is a forward candidate wherever K = Cin*kH*kW is at most `directMaxK`.
        let expected: [Set<CPUConvolutionAlgorithm>] = [[.im2col, .winograd, .winograd4x4, .direct], [.im2col, .winograd, .winograd4x4],
                                                        [.im2col], [.im2col, .direct]]
        for (o, candidates) in zip(outcomes, expected) {
            let what = "\(o.problem.layer) \(o.pass.rawValue)"
            XCTAssertEqual(Set(o.milliseconds.keys), candidates.union(oneDNN), what)
            XCTAssertEqual(o.rejected, [:], what)
            let fastest = o.milliseconds.values.min()!
            XCTAssertLessThanOrEqual(o.milliseconds[o.choice]!, 1.03 * fastest + 1e-9, what)
            XCTAssertEqual(tuning.choice(o.geometry, o.pass), o.choice, what)
        }
        // A backend reading the stored tuning runs the choices.
        let reader = CPUBackend(threads: 2)
        reader.convolutionAlgorithmOverride = nil
        reader.convolutionTuning = tuning
        XCTAssertEqual(reader.forwardAlgorithm(for: wide), outcomes[0].choice)
        XCTAssertEqual(reader.backwardDataAlgorithm(for: wide), outcomes[1].choice)
        XCTAssertEqual(reader.backwardWeightsAlgorithm(for: wide), outcomes[2].choice)
    }
}
