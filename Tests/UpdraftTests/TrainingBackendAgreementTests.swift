import XCTest
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// The same SqueezeNet-shaped training (fire modules with concat, ceil-mode pools, conv10 + ReLU,
/// global pooling, fullyconnected0, softmax cross-entropy) gives the same loss trajectory on the
/// Double reference, the fast CPU path and OpenCL (PoCL in CI): 20 steps, 1e-4 relative.
final class TrainingBackendAgreementTests: XCTestCase {
    func losses(on backend: Backend, steps: Int = 20) throws -> [Double] {
        // 35x35 keeps every SqueezeNet layer (down to 1x1 before conv10) and the run small.
        var options = SqueezeNet.Options(classes: 4, updatableLayers: ["fire9/expand3x3", "conv10", "fullyconnected0"], seed: 2)
        options.inputSize = 35
        let model = try SqueezeNet.build(options)
        let data = try SyntheticImageDataset(count: 2, itemShape: [3, 35, 35], classes: 4, seed: 11)
        var config = UpdateConfiguration()
        config.placement.backends = (backend, backend)
        // 2 examples, one per step, shuffled: 20 steps over 10 epochs (the Double reference is slow in
        // debug builds); a learning rate high enough to move the loss.
        config.parameters = [.miniBatchSize: .int(1), .epochs: .int(10), .learningRate: .double(0.05), .momentum: .double(0.9)]
        let losses = Locked<[Double]>([])
        let task = UpdateTask(model: model, trainingData: data, configuration: config, handlers: UpdateHandlers(
            events: [.miniBatchEnd], progress: { losses.append($0.metrics!.lossValue) }))
        let final = task.run()
        XCTAssertEqual(final.task.state, .completed, "\(final.error.map { "\($0)" } ?? "")")
        return Array(losses.value.prefix(steps))
    }

    func testReferenceCPUAndOpenCLAgreeOverTwentySteps() throws {
        let reference = try losses(on: ReferenceBackend())
        assertLossesAgree(reference, try losses(on: CPUBackend()), steps: 20, "fast CPU vs reference")
        let openCL = OpenCLBackend(context: try OpenCLTestSupport.context())
        assertLossesAgree(reference, try losses(on: openCL), steps: 20, "OpenCL (\(openCL.device.name)) vs reference")
    }
}
