import XCTest
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// End to end: PNG class folders -> image preprocessing -> a small updatable Core ML model ->
/// UpdateTask on the fast CPU backend -> over 90% validation accuracy on the bundled digits.
final class TrainingConvergenceTests: XCTestCase {
    static let digits = Fixtures.repositoryRoot.appendingPathComponent("Tests/Data/digits")

    func smallDigitsModel() throws -> CoreMLModel {
        let input = FeatureDescription(name: "image", type: .image(ImageFeatureType(width: 8, height: 8, colorSpace: .grayscale)))
        var b = try ModelBuilder(input: input, seed: 3)
        b.setImageScaler(ImageScaler(channelScale: 1 / 255))
        try b.convolution("conv", outputChannels: 16, kernel: (3, 3), padding: .same(.bottomRightHeavy))
        try b.activation("relu", .relu)
        try b.pooling("pool", .max, kernel: (2, 2), stride: (2, 2))
        try b.flatten("flatten")
        try b.innerProduct("dense", outputChannels: 10)
        try b.softmax("probs")
        try b.makeClassifier(labels: .strings((0..<10).map(String.init)), probabilities: "probs")
        try b.makeUpdatable(["conv", "dense"])
        try b.setCrossEntropyLoss(input: "probs")
        b.setOptimizer(.adam(learningRate: 0.01, miniBatchSize: 32))
        b.setEpochs(8)
        return try b.build()
    }

    func testSmallModelLearnsDigitsAboveNinetyPercent() throws {
        let model = try smallDigitsModel()
        let train = try ModelDataset(model: model, path: Self.digits.appendingPathComponent("train")).provider
        let validation = try ModelDataset(model: model, path: Self.digits.appendingPathComponent("validation")).provider
        var config = UpdateConfiguration()
        config.data.validationData = validation
        let cpu = CPUBackend()
        config.placement.backends = (cpu, cpu)
        let accuracies = Locked<[Double]>([])
        let task = UpdateTask(model: model, trainingData: train, configuration: config, handlers: UpdateHandlers(
            events: [.epochEnd], progress: { accuracies.append($0.metrics!.validationAccuracy ?? 0) }))
        let final = task.run()
        XCTAssertEqual(final.task.state, .completed, "\(final.error.map { "\($0)" } ?? "")")
        XCTAssertGreaterThan(accuracies.value.last ?? 0, 0.9, "validation accuracy by epoch: \(accuracies.value)")
        XCTAssertLessThan(accuracies.value.first ?? 1, accuracies.value.last ?? 0)
    }
}
