import XCTest
import Updraft

/// Issue 13, finding 5: training, evaluation and prediction check their memory footprint before
/// the first batch and name the largest mini-batch that fits, instead of dying in the allocator.
final class HardeningMemoryTests: XCTestCase {
    /// A 4096x4096 RGB image classifier (the issue's example): a strided convolution, global
    /// pooling and a dense head.
    private func bigInputModel(batch: Int64) throws -> CoreMLModel {
        let image = ImageFeatureType(width: 4096, height: 4096, colorSpace: .rgb)
        var b = try ModelBuilder(input: FeatureDescription(name: "image", type: .image(image)), seed: 1)
        try b.convolution("conv", outputChannels: 8, kernel: (3, 3), stride: (2, 2))
        try b.activation("relu", .relu)
        try b.globalPoolClassifierHead(pool: "pool", dense: "dense", labels: .strings(["a", "b"]), softmax: "probabilities")
        try b.makeUpdatable(["conv", "dense"])
        try b.setCrossEntropyLoss(input: "probabilities")
        b.setOptimizer(.sgd(learningRate: 0.01, miniBatchSize: batch))
        b.setEpochs(1)
        return try b.build()
    }

    /// Twenty examples that must never be read: the check comes first.
    private struct Untouchable: BatchProvider {
        var count: Int { 20 }
        func example(at index: Int) throws -> TrainingExample {
            XCTFail("example \(index) was read before the memory check")
            throw UpdraftError(.data, "not for reading")
        }
    }

    func testTrainingRefusesAMiniBatchThatCannotFit() throws {
        let model = try bigInputModel(batch: 65_536)
        var config = UpdateConfiguration()
        let cpu = CPUBackend()
        config.placement.backends = (cpu, cpu)
        let context = UpdateTask(model: model, trainingData: Untouchable(), configuration: config).run()
        XCTAssertEqual(context.task.state, .failed)
        let message = "\(context.error.map { "\($0)" } ?? "")"
        XCTAssertTrue(message.contains("training with a mini-batch of 65536 needs an estimated"), message)
        XCTAssertTrue(message.contains("host memory") && message.contains("the largest mini-batch that fits is"), message)
        XCTAssertEqual((context.error as? UpdraftError)?.kind, .device)
    }

    func testLargestFittingBatchIsExact() throws {
        let graph = try NetworkGraph(model: try bigInputModel(batch: 8))
        let cpu = CPUBackend()
        let one = try MemoryPreflight.footprint(graph: graph, batch: 1, work: .training, prefix: cpu, tail: cpu).host
        // Room for exactly 5 examples' worth of footprint.
        let five = try MemoryPreflight.footprint(graph: graph, batch: 5, work: .training, prefix: cpu, tail: cpu).host
        let available = UInt64((Double(five) / MemoryPreflight.headroom).rounded(.up))
        XCTAssertNoThrow(try MemoryPreflight.check(graph: graph, batchSize: 5, work: .training, prefix: cpu, tail: cpu,
                                                   hostAvailable: available))
        XCTAssertThrowsError(try MemoryPreflight.check(graph: graph, batchSize: 64, work: .training, prefix: cpu, tail: cpu,
                                                       hostAvailable: available)) { e in
            XCTAssertTrue("\(e)".contains("the largest mini-batch that fits is 5"), "\(e)")
            XCTAssertTrue("\(e)".contains("--batch-size 5"), "\(e)")
        }
        XCTAssertThrowsError(try MemoryPreflight.check(graph: graph, batchSize: 2, work: .training, prefix: cpu, tail: cpu,
                                                       hostAvailable: one / 2)) { e in
            XCTAssertTrue("\(e)".contains("even a mini-batch of 1 does not fit"), "\(e)")
        }
    }

    func testDeviceMemoryAndEvaluationAreChecked() throws {
        let graph = try NetworkGraph(model: try bigInputModel(batch: 8))
        // A GPU-like backend with 1 GiB: one 4096x4096 RGB example is 192 MiB of input alone.
        let gpu = FailingBackend(CPUBackend())
        gpu.memoryOverride = .device(bytes: 1 << 30, largestBuffer: 1 << 28)
        XCTAssertThrowsError(try MemoryPreflight.check(graph: graph, batchSize: 16, work: .evaluation, prefix: gpu, tail: gpu,
                                                       hostAvailable: 1 << 40)) { e in
            XCTAssertTrue("\(e)".contains("evaluation with a mini-batch of 16"), "\(e)")
            XCTAssertTrue("\(e)".contains("the largest mini-batch that fits is"), "\(e)")
        }
        XCTAssertNoThrow(try MemoryPreflight.check(graph: graph, batchSize: 1, work: .prediction, prefix: gpu, tail: gpu,
                                                   hostAvailable: 1 << 40))
        let runner = try InferenceRunner(graph: graph, prefix: gpu, tail: gpu, warn: { _ in })
        XCTAssertThrowsError(try runner.checkMemory(batchSize: 4096, work: .evaluation))
    }
}
