import Foundation
import XCTest
@testable import UpdraftModel
@testable import UpdraftChecks

/// One SqueezeNet for all the tests that only read it (building one takes a moment in debug).
enum BuiltSqueezeNet {
    static let classes = 5
    static let model: CoreMLModel = {
        do { return try SqueezeNet.build(SqueezeNet.Options(classes: classes, seed: 7)) } catch {
            preconditionFailure("SqueezeNet.build failed: \(error)")
        }
    }()
}

/// The Swift model builder and SqueezeNet 1.1.
final class CoreMLBuilderTests: XCTestCase {
    func testSqueezeNetInterface() throws {
        let m = BuiltSqueezeNet.model
        XCTAssertEqual(m.specificationVersion, 4)
        XCTAssertTrue(m.isUpdatable)
        XCTAssertEqual(m.kind, .classifier)
        XCTAssertEqual(m.classLabels, .strings(["0", "1", "2", "3", "4"]))
        XCTAssertEqual(m.inputImage, ImageFeatureType(width: 227, height: 227, colorSpace: .rgb))
        XCTAssertEqual(m.imageScaler, ImageScaler(channelScale: 1.0 / 255.0))
        let d = m.modelDescription
        XCTAssertEqual(d.outputs.map(\.name), ["labelProbability", "label"])
        XCTAssertEqual(d.output(named: "labelProbability")?.type, .dictionary(.string))
        XCTAssertEqual(d.output(named: "label")?.type, .string)
        XCTAssertEqual(d.predictedFeatureName, "label")
        XCTAssertEqual(d.predictedProbabilitiesName, "labelProbability")
        XCTAssertEqual(d.trainingInputs.map(\.name), ["image", "label"])
        XCTAssertEqual(m.network.labelProbabilityLayerName, "labelProbability")
        XCTAssertEqual(m.loss, LossLayerSpec(name: "lossLayer", kind: .categoricalCrossEntropy,
                                             input: "labelProbability", target: "labelProbability_true"))
        XCTAssertEqual(m.lossTargetFeature?.name, "label")
    }

    func testSqueezeNetLayersAndParameters() throws {
        let m = BuiltSqueezeNet.model
        XCTAssertEqual(m.layers.count, 67)
        XCTAssertEqual(Array(m.layerNames.prefix(3)), ["conv1", "relu_conv1", "pool1"])
        XCTAssertEqual(Array(m.layerNames.suffix(6)), ["conv10", "relu_conv10", "pool10", "flatten", "fullyconnected0", "softmax"])
        for fire in 2...9 {
            for part in ["squeeze1x1", "relu_squeeze1x1", "expand1x1", "relu_expand1x1", "expand3x3", "relu_expand3x3", "concat"] {
                XCTAssertNotNil(m.layer(named: "fire\(fire)/\(part)"), "fire\(fire)/\(part)")
            }
        }
        XCTAssertEqual(m.updatableLayerNames, ["conv10", "fullyconnected0"])
        // torchvision squeezenet1_1 has 1,235,496 parameters (with conv10's 1000 outputs); plus the head.
        let parameters = m.layers.reduce(0) { $0 + $1.parameterCount }
        XCTAssertEqual(parameters, 1_235_496 + 1001 * BuiltSqueezeNet.classes)
        // Fire channels as torchvision: (squeeze, expand) per module.
        let expected: [(Int, Int)] = [(16, 64), (16, 64), (32, 128), (32, 128), (48, 192), (48, 192), (64, 256), (64, 256)]
        for (i, (squeeze, expand)) in expected.enumerated() {
            XCTAssertEqual(try m.weightShape(ofLayer: "fire\(i + 2)/squeeze1x1")[0], squeeze)
            XCTAssertEqual(try m.weightShape(ofLayer: "fire\(i + 2)/expand3x3"), [expand, squeeze, 3, 3])
        }
        guard case let .pooling(p)? = m.layer(named: "pool3")?.params else { return XCTFail() }
        XCTAssertEqual(p.padding, .includeLastPixel(height: 0, width: 0))
        XCTAssertEqual(p.kernelSize, [3, 3])
        XCTAssertEqual(p.stride, [2, 2])
        guard case let .convolution(e)? = m.layer(named: "fire5/expand3x3")?.params else { return XCTFail() }
        XCTAssertEqual(e.padding, .same(.bottomRightHeavy))
    }

    func testSqueezeNetTrainingDefaults() throws {
        let h = Dictionary(uniqueKeysWithValues: BuiltSqueezeNet.model.hyperparameters.map { ($0.key, $0) })
        XCTAssertEqual(BuiltSqueezeNet.model.optimizer?.kind, .sgd)
        XCTAssertEqual(h[.learningRate]?.defaultValue, .double(0.001))
        XCTAssertEqual(h[.learningRate]?.constraint, .doubleRange(DoubleBounds(min: 1e-6, max: 1)))
        XCTAssertEqual(h[.miniBatchSize]?.defaultValue, .int(8))
        XCTAssertEqual(h[.miniBatchSize]?.constraint, .int(.set([1, 2, 8, 16, 32, 64])))
        XCTAssertEqual(h[.momentum]?.defaultValue, .double(0))
        XCTAssertEqual(h[.momentum]?.constraint, .doubleRange(DoubleBounds(min: 0, max: 1)))
        XCTAssertEqual(h[.epochs]?.defaultValue, .int(10))
        XCTAssertEqual(h[.epochs]?.constraint, .int(.set([1, 10, 50])))
        XCTAssertEqual(h[.shuffle]?.defaultValue, .bool(true))
        XCTAssertEqual(h[.shuffle]?.inModel, true)
        XCTAssertEqual(h[.seed]?.defaultValue, .int(7))
    }

    func testSqueezeNetPassesTheValidator() {
        XCTAssertEqual(ModelValidator.validate(BuiltSqueezeNet.model), [])
    }

    func testKaimingUniformInitialWeights() throws {
        let m = BuiltSqueezeNet.model
        for (name, fanIn) in [("conv1", 27), ("fire9/expand3x3", 64 * 9), ("conv10", 512), ("fullyconnected0", 1000)] {
            let w = try m.weights(ofLayer: name).data
            let bound = Float((6.0 / Double(fanIn)).squareRoot())
            XCTAssertLessThanOrEqual(w.map(abs).max()!, bound, name)
            XCTAssertGreaterThan(w.map(abs).max()!, 0.95 * bound, name)     // spread over the whole range
            let mean = w.reduce(0, +) / Float(w.count)
            XCTAssertLessThan(abs(mean), 0.1 * bound, name)
            XCTAssertEqual(try m.bias(ofLayer: name)?.data, [Float](repeating: 0, count: w.count / (fanIn)), name)
        }
        // Distinct layers get distinct draws.
        XCTAssertNotEqual(try m.weights(ofLayer: "fire2/expand1x1").data, try m.weights(ofLayer: "fire3/expand1x1").data)
    }

    func testSqueezeNetIsReproducibleFromItsSeed() throws {
        // A smaller input keeps this quick; the weights do not depend on it.
        let a = try SqueezeNet.build(SqueezeNet.Options(labels: ["x", "y"], seed: 3, inputSize: 64))
        let b = try SqueezeNet.build(SqueezeNet.Options(labels: ["x", "y"], seed: 3, inputSize: 64))
        let c = try SqueezeNet.build(SqueezeNet.Options(labels: ["x", "y"], seed: 4, inputSize: 64))
        XCTAssertEqual(a.serializedBytes(), b.serializedBytes())
        XCTAssertNotEqual(try a.weights(ofLayer: "conv1"), try c.weights(ofLayer: "conv1"))
    }

    func testBuiltModelsReadBackAsBuilt() throws {
        let reread = try CoreMLModel(serializedBytes: BuiltSqueezeNet.model.serializedBytes())
        XCTAssertEqual(reread.spec, BuiltSqueezeNet.model.spec)
        XCTAssertEqual(reread.serializedBytes(), BuiltSqueezeNet.model.serializedBytes())
    }

    func testSqueezeNetOptions() throws {
        let m = try SqueezeNet.build(SqueezeNet.Options(labels: ["cat", "dog", "fish"], updatableLayers: ["fullyconnected0"],
                                                        seed: 1, inputSize: 64))
        XCTAssertEqual(m.classLabels, .strings(["cat", "dog", "fish"]))
        XCTAssertEqual(m.updatableLayerNames, ["fullyconnected0"])
        XCTAssertEqual(try m.weightShape(ofLayer: "fullyconnected0"), [3, 1000])
        assertErrorMentions(try SqueezeNet.build(SqueezeNet.Options(labels: ["only"])), containing: ["at least 2 classes"])
        assertErrorMentions(try SqueezeNet.build(SqueezeNet.Options(labels: ["a", "a"])), containing: ["distinct"])
        assertErrorMentions(try SqueezeNet.build(SqueezeNet.Options(labels: ["a", "b"], updatableLayers: ["pool10"], inputSize: 64)),
                     containing: ["'pool10'", "pooling"])
        assertErrorMentions(try SqueezeNet.build(SqueezeNet.Options(labels: ["a", "b"], updatableLayers: ["conv99"], inputSize: 64)),
                     containing: ["'conv99'", "no layer"])
        // Updating a fire module puts a concat on the gradient path: Core ML would refuse, Updraft warns.
        let fire = try SqueezeNet.build(SqueezeNet.Options(labels: ["a", "b"], updatableLayers: ["fire9/expand1x1"], inputSize: 64))
        let findings = ModelValidator.validate(fire)
        XCTAssertEqual(findings.errors, [])
        XCTAssertTrue(findings.warnings.contains { $0.message.contains("concat layer 'fire9/concat'") }, "\(findings)")
    }

    /// A small image classifier with every layer kind the builder offers, Adam, and a round trip.
    func testSmallModelsForTests() throws {
        var b = try ModelBuilder(input: FeatureDescription(name: "image", type: .image(ImageFeatureType(width: 8, height: 6, colorSpace: .bgr))),
                                 seed: 9)
        b.setImageScaler(ImageScaler(channelScale: 0.5, redBias: 1, greenBias: 2, blueBias: 3))
        try b.convolution("conv", outputChannels: 4, kernel: (3, 3), padding: .same(.topLeftHeavy))
        try b.batchnorm("bn", gamma: [1, 2, 3, 4], beta: [0, 0, 1, 1], mean: [0.5, 0, 0, 0], variance: [1, 1, 4, 4])
        try b.activation("act", .leakyReLU(alpha: 0.1))
        try b.convolution("side", input: "image", outputChannels: 2, kernel: (1, 1))
        try b.concat("cat", inputs: ["act", "side"])
        try b.pooling("pool", .average, kernel: (2, 2), stride: (2, 2))
        try b.flatten("flat")
        try b.innerProduct("dense", outputChannels: 6)
        try b.innerProduct("dense2", input: "flat", outputChannels: 6)
        try b.multiply("gate", inputs: ["dense", "dense2"])
        try b.activation("sig", .sigmoid)
        try b.innerProduct("head", outputChannels: 2, hasBias: false)
        try b.softmax("softmax", output: "probs")
        try b.makeClassifier(labels: .int64([3, 7]), probabilities: "probs", predictedFeatureName: "digit")
        try b.makeUpdatable(["conv", "head"])
        try b.setCrossEntropyLoss(name: "ce", input: "probs")
        b.setOptimizer(.adam(learningRate: 0.01, miniBatchSize: 2, allowedMiniBatchSizes: [1, 2]))
        b.setEpochs(3, allowed: [1, 3])
        b.setShuffle(false, seed: 5)
        let model = try b.build()

        let reread = try CoreMLModel(serializedBytes: model.serializedBytes())
        XCTAssertEqual(reread.spec, model.spec)
        XCTAssertEqual(model.layers.count, 13)
        XCTAssertEqual(model.lossTargetFeature, FeatureDescription(name: "digit", type: .int64))
        XCTAssertEqual(model.hyperparameters.first { $0.key == .shuffle }?.defaultValue, .bool(false))
        XCTAssertEqual(b.shapes["cat"], [1, 6, 6, 8])
        XCTAssertEqual(b.shapes["pool"], [1, 6, 3, 4])
        XCTAssertEqual(b.shapes["flat"], [1, 72, 1, 1])
        let findings = ModelValidator.validate(model)
        XCTAssertEqual(findings.errors, [])
        // The concat, multiply and leaky ReLU stand between conv and the loss.
        XCTAssertTrue(findings.warnings.contains { $0.layer == "conv" && $0.message.contains("concat layer 'cat'") }, "\(findings)")

        // And a regressor with mean squared error.
        var r = try ModelBuilder.denseRegressor()
        r.setOptimizer(.sgd(learningRate: 0.1, miniBatchSize: 1))
        r.setEpochs(1)
        let regressor = try r.build()
        XCTAssertEqual(regressor.kind, .regressor)
        XCTAssertEqual(ModelValidator.validate(regressor), [])
        XCTAssertEqual(try CoreMLModel(serializedBytes: regressor.serializedBytes()).spec, regressor.spec)
    }

    func testBuilderMistakesFailAtTheLayer() throws {
        var b = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(ArrayFeatureType(shape: [3, 4, 4], dataType: .double))))
        assertErrorMentions(try b.convolution("c", input: "nope", outputChannels: 2, kernel: (1, 1)), containing: ["'nope'"])
        try b.convolution("c", outputChannels: 2, kernel: (3, 3))
        assertErrorMentions(try b.convolution("c", outputChannels: 2, kernel: (1, 1)), containing: ["'c' already exists"])
        assertErrorMentions(try b.convolution("big", outputChannels: 2, kernel: (5, 5)), containing: ["'big'", "larger than"])
        assertErrorMentions(try b.concat("cat", inputs: ["x", "c"]), containing: ["'cat'", "height and width"])
        assertErrorMentions(try b.add("sum", inputs: ["x", "c"]), containing: ["'sum'", "do not broadcast"])
        assertErrorMentions(try b.makeUpdatable(["x"]), containing: ["'x'"])
        try b.activation("relu", .relu)
        assertErrorMentions(try b.makeUpdatable(["relu"]), containing: ["'relu'", "activation"])
        assertErrorMentions(try b.setCrossEntropyLoss(input: "relu"), containing: ["softmax"])
        try b.softmax("sm")
        assertErrorMentions(try b.makeClassifier(labels: .strings(["a"]), probabilities: "sm"), containing: ["1 class labels", "8 classes"])
    }
}
