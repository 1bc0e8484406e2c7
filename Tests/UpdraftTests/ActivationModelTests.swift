import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftData
@testable import UpdraftTraining

/// A MobileNetV3-style model as coremltools' converter writes it: ReLU6 as a clip layer, hardswish as
/// x * sigmoidHard(x) through a multiply, a per-channel PReLU and a unary function, decoded from
/// protobuf bytes and trained on the Double reference, the fast CPU path and OpenCL.
final class ActivationModelTests: XCTestCase {
    func model() throws -> CoreMLModel {
        var b = try ModelBuilder(input: FeatureDescription(name: "image", type: .image(ImageFeatureType(width: 9, height: 7, colorSpace: .rgb))),
                                 seed: 4)
        try b.convolution("conv1", outputChannels: 6, kernel: (3, 3), padding: .same(.bottomRightHeavy))
        try b.activation("relu6", .clip(min: 0, max: 6))
        try b.convolution("conv2", outputChannels: 5, kernel: (1, 1))
        try b.activation("hs_gate", .sigmoidHard(alpha: 1.0 / 6, beta: 0.5))
        try b.multiply("hardswish", inputs: ["conv2", "hs_gate"])
        try b.activation("prelu", .prelu(alpha: [0.25, 0.1, 0.5, 0.2, 0.3]))
        try b.activation("square", .unary(UnaryFunction(.power, alpha: 2)))
        try b.globalPoolClassifierHead(pool: "pool", flatten: "flat", dense: "fc", labels: .int64([0, 1, 2]), probabilities: "probs")
        try b.makeUpdatable(["conv1", "fc"])
        try b.setCrossEntropyLoss(name: "ce", input: "probs")
        b.setOptimizer(.sgd(learningRate: 0.05, miniBatchSize: 2, allowedMiniBatchSizes: [2]))
        b.setEpochs(2, allowed: [2])
        b.setShuffle(false, seed: 1)
        // Through the bytes a converted model arrives as.
        return try CoreMLModel(serializedBytes: try b.build().serializedBytes())
    }

    func testLayersDecodeAndTheClipFusesIntoItsConvolution() throws {
        let model = try model()
        XCTAssertEqual(model.layer(named: "relu6")?.params, .clip(minVal: 0, maxVal: 6))
        guard case let .unary(u)? = model.layer(named: "square")?.params else { return XCTFail("square is not a unary layer") }
        XCTAssertEqual(u.function, UnaryFunction(.power, alpha: 2))
        guard case let .activation(p)? = model.layer(named: "prelu")?.params else { return XCTFail("prelu is not an activation") }
        XCTAssertEqual(p.typeName, "PReLU")
        XCTAssertEqual(p.activation, .prelu(alpha: [0.25, 0.1, 0.5, 0.2, 0.3]))
        XCTAssertEqual(try CoreMLModel(serializedBytes: model.serializedBytes()).spec, model.spec)

        let training = try TrainingGraph(graph: try NetworkGraph(model: model))
        // ReLU6 runs in conv1's epilogue and back-propagates from its output; conv2 feeds two layers.
        XCTAssertEqual(training.fusedActivations.mapValues(\.name), ["conv1": "relu6"])
        XCTAssertTrue(training.backwardLayers.contains("relu6"))
    }

    func testPReLUWithTheWrongNumberOfSlopesIsANamedError() throws {
        var b = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(ArrayFeatureType(shape: [4, 3, 3], dataType: .float32))))
        XCTAssertThrowsError(try b.activation("bad", .prelu(alpha: [1, 2, 3]))) { error in
            XCTAssertTrue("\(error)".contains("layer 'bad'") && "\(error)".contains("4 channels"), "\(error)")
        }
        XCTAssertThrowsError(try b.add(LayerSpec(name: "odd", inputs: ["x"], outputs: ["odd"], params: .unary(UnaryFunctionLayerParams(type: 9))))) {
            XCTAssertTrue("\($0)".contains("unary function type 9"), "\($0)")
        }
    }

    func losses(on backend: Backend) throws -> [Double] {
        let data = try SyntheticImageDataset(count: 4, itemShape: [3, 7, 9], classes: 3, seed: 3)
        var config = UpdateConfiguration()
        config.placement.backends = (backend, backend)
        config.parameters = [.miniBatchSize: .int(2), .epochs: .int(2), .learningRate: .double(0.05)]
        let losses = Locked<[Double]>([])
        let task = UpdateTask(model: try model(), trainingData: data, configuration: config, handlers: UpdateHandlers(
            events: [.miniBatchEnd], progress: { losses.append($0.metrics!.lossValue) }))
        let final = task.run()
        XCTAssertEqual(final.task.state, .completed, "\(final.error.map { "\($0)" } ?? "")")
        return losses.value
    }

    func testTrainsTheSameOnReferenceCPUAndOpenCL() throws {
        let reference = try losses(on: ReferenceBackend())
        assertLossesAgree(reference, try losses(on: CPUBackend()), steps: 4, "fast CPU vs reference")
        let openCL = OpenCLBackend(context: try OpenCLTestSupport.context())
        assertLossesAgree(reference, try losses(on: openCL), steps: 4, "OpenCL (\(openCL.device.name)) vs reference")
    }

    /// Which pairs fuse: inner products too; a function whose backward needs x stays unfused where
    /// backward runs through it, and fuses in the frozen prefix (forward only).
    func testFusionNeedsABackwardFromTheOutput() throws {
        var b = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(ArrayFeatureType(shape: [4, 5, 5], dataType: .float32))),
                                 seed: 2)
        try b.convolution("frozen", outputChannels: 4, kernel: (1, 1))
        try b.activation("frozen_abs", .unary(UnaryFunction(.abs)))
        try b.convolution("conv", outputChannels: 4, kernel: (3, 3))
        try b.activation("abs", .unary(UnaryFunction(.abs)))
        try b.flatten("flat")
        try b.innerProduct("fc1", outputChannels: 6)
        try b.activation("elu", .elu(alpha: 1))
        try b.innerProduct("fc2", outputChannels: 3)
        try b.activation("leaky", .leakyReLU(alpha: -0.5))
        try b.innerProduct("fc3", outputChannels: 2)
        b.makeRegressor()
        try b.addOutput("fc3")
        try b.makeUpdatable(["conv"])
        try b.setMeanSquaredErrorLoss(input: "fc3")
        let training = try TrainingGraph(graph: try NetworkGraph(model: try b.build()))
        XCTAssertEqual(training.fusedActivations.mapValues(\.name), ["frozen": "frozen_abs", "fc1": "elu"])
    }
}
