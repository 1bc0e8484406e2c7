import XCTest
@testable import UpdraftCore
@testable import UpdraftModel

/// Shape inference through the network graph, with the op specs' own rules.
final class GraphShapeTests: XCTestCase {
    func testSqueezeNetShapesAt227() throws {
        let g = try NetworkGraph(model: BuiltSqueezeNet.model)
        XCTAssertEqual(g.input.name, "image")
        XCTAssertEqual(g.input.shape, [1, 3, 227, 227])
        XCTAssertEqual(g.input.preprocessing, InputPreprocessing(scale: 1.0 / 255.0, bias: [0, 0, 0]))
        let expected: [String: Shape] = [
            "conv1": [1, 64, 113, 113],          // floor((227 - 3) / 2) + 1
            "pool1": [1, 64, 56, 56],            // ceil((113 - 3) / 2) + 1
            "fire2/squeeze1x1": [1, 16, 56, 56],
            "fire2/expand3x3": [1, 64, 56, 56],  // same padding keeps the size
            "fire2/concat": [1, 128, 56, 56],
            "pool3": [1, 128, 28, 28],           // ceil((56 - 3) / 2) + 1
            "fire5/concat": [1, 256, 28, 28],
            "pool5": [1, 256, 14, 14],           // ceil((28 - 3) / 2) + 1
            "fire9/concat": [1, 512, 14, 14],    // what conv10 sees
            "conv10": [1, 1000, 14, 14],
            "pool10": [1, 1000, 1, 1],
            "flatten": [1, 1000, 1, 1],
            "fullyconnected0": [1, BuiltSqueezeNet.classes, 1, 1],
            "labelProbability": [1, BuiltSqueezeNet.classes, 1, 1],
        ]
        for (blob, shape) in expected { XCTAssertEqual(g.blobShapes[blob], shape, blob) }
        XCTAssertEqual(g.layer(named: "conv10")?.inputShape, [1, 512, 14, 14])
        XCTAssertEqual(g.layers.count, 67)
        XCTAssertEqual(g.layers.map(\.modelIndex), Array(0..<67))   // the file is already in order
        XCTAssertEqual(g.updatableLayers.map(\.name), ["conv10", "fullyconnected0"])
        XCTAssertEqual(g.parameterCount, 1_235_496 + 1001 * BuiltSqueezeNet.classes)
        let conv1 = try XCTUnwrap(g.layer(named: "conv1"))
        XCTAssertEqual(try conv1.convolutionGeometry(batch: 8)?.outputShape, [8, 64, 113, 113])
        XCTAssertEqual(try g.layer(named: "pool1")?.poolingGeometry(batch: 2)?.outputShape, [2, 64, 56, 56])
        XCTAssertEqual(try g.layer(named: "fullyconnected0")?.innerProductGeometry(batch: 3)?.outputShape, [3, BuiltSqueezeNet.classes])
        let loss = try g.requireLoss()
        XCTAssertEqual(loss.kind, .categoricalCrossEntropy)
        XCTAssertEqual(loss.softmaxLayer, "softmax")
        XCTAssertEqual(loss.logits, "fullyconnected0")
        XCTAssertEqual(loss.targetFeature.name, "label")
        XCTAssertEqual(loss.targetEncoding, .classLabel(.strings(["0", "1", "2", "3", "4"])))
    }

    func testSqueezeNetAt224HasTorchvisions13x13BeforeConv10() throws {
        let m = try SqueezeNet.build(SqueezeNet.Options(labels: ["a", "b"], seed: 1, inputSize: 224))
        let g = try NetworkGraph(model: m)
        XCTAssertEqual(g.blobShapes["conv1"], [1, 64, 111, 111])
        XCTAssertEqual(g.blobShapes["pool1"], [1, 64, 55, 55])
        XCTAssertEqual(g.blobShapes["pool3"], [1, 128, 27, 27])
        XCTAssertEqual(g.layer(named: "conv10")?.inputShape, [1, 512, 13, 13])
    }

    func testConvImageClassifierGraph() throws {
        let model = try CoreMLFixtures.model("conv_image_classifier")
        let g = try NetworkGraph(model: model)
        XCTAssertEqual(g.input.shape, [1, 3, 16, 16])
        let p = try XCTUnwrap(g.input.preprocessing)
        XCTAssertEqual(p.scale, Float(1.0 / 255.0), accuracy: 1e-9)
        XCTAssertEqual(p.bias, [-0.5, -0.5, -0.5])
        XCTAssertEqual(g.layers.map(\.outputShape), [[1, 4, 16, 16], [1, 4, 16, 16], [1, 4, 8, 8], [1, 4, 8, 8],
                                                     [1, 256, 1, 1], [1, 2, 1, 1], [1, 2, 1, 1]])
        guard case let .convolution(spec) = g.layers[0].op else { return XCTFail() }
        XCTAssertEqual(spec.padding, .same(.bottomRightHeavy))
        XCTAssertEqual(spec.inputChannels, 3)
        XCTAssertEqual(g.layers[0].weights, try model.weights(ofLayer: "conv"))
        XCTAssertEqual(g.layers[0].bias, try model.bias(ofLayer: "conv"))
        XCTAssertTrue(g.layers[0].isUpdatable)
        guard case .activation(.relu) = g.layers[1].op else { return XCTFail() }
        guard case let .pooling(pool) = g.layers[2].op else { return XCTFail() }
        XCTAssertEqual(pool.kind, .max)
        // Frozen batchnorm: scale = gamma / sqrt(var + eps), shift = beta - mean * scale.
        guard case let .batchnorm(scale, shift) = g.layers[3].op,
              case let .batchnorm(bn)? = model.layer(named: "bn")?.params else { return XCTFail() }
        for c in 0..<4 {
            let s = Double(bn.gamma.values[c]) / (Double(bn.variance.values[c]) + Double(bn.epsilon)).squareRoot()
            XCTAssertEqual(Double(scale[c]), s, accuracy: 1e-6)
            XCTAssertEqual(Double(shift[c]), Double(bn.beta.values[c]) - Double(bn.mean.values[c]) * s, accuracy: 1e-6)
        }
        XCTAssertEqual(g.layers[3].parameterCount, 8)
        let loss = try g.requireLoss()
        XCTAssertEqual(loss.input, "classLabelProbs")
        XCTAssertEqual(loss.logits, "logits")
        XCTAssertEqual(loss.inputShape, [1, 2, 1, 1])
        XCTAssertEqual(loss.targetEncoding, .classLabel(.strings(["no", "yes"])))
        XCTAssertEqual(g.consumers(of: "flat").map(\.name), ["dense"])
        XCTAssertEqual(g.producer(of: "logits")?.name, "dense")
        XCTAssertNil(g.producer(of: "image"))
    }

    func testLossTargets() throws {
        let mse = try NetworkGraph(model: try CoreMLFixtures.model("mse_regressor")).requireLoss()
        XCTAssertEqual(mse.kind, .meanSquaredError)
        XCTAssertEqual(mse.targetFeature.name, "y_true")
        XCTAssertEqual(mse.targetEncoding, .values([1, 2, 1, 1]))
        XCTAssertNil(mse.logits)
        let adam = try NetworkGraph(model: try CoreMLFixtures.model("dense_adam_classifier")).requireLoss()
        XCTAssertEqual(adam.targetEncoding, .classLabel(.int64([10, 20, 30])))
        let concat = try NetworkGraph(model: try CoreMLFixtures.model("concat_branches"))
        XCTAssertEqual(concat.input.shape, [1, 2, 6, 6])
        XCTAssertEqual(concat.blobShapes["cat_out"], [1, 5, 6, 6])
        XCTAssertEqual(try concat.requireLoss().targetEncoding, .classIndex)
        // float16 weights arrive widened in the graph.
        let half = try NetworkGraph(model: try CoreMLFixtures.model("float16_frozen"))
        XCTAssertEqual(half.layer(named: "frozen")?.weights?.shape, [5, 4])
    }

    func testBGRImagesGetTheirBiasesInChannelOrder() throws {
        var b = try ModelBuilder(input: FeatureDescription(name: "img", type: .image(ImageFeatureType(width: 4, height: 4, colorSpace: .bgr))))
        b.setImageScaler(ImageScaler(channelScale: 2, redBias: 1, greenBias: 2, blueBias: 3))
        try b.flatten("flat")
        try b.addOutput("flat")
        let g = try NetworkGraph(model: try b.build())
        XCTAssertEqual(g.input.preprocessing, InputPreprocessing(scale: 2, bias: [3, 2, 1]))
        XCTAssertNil(g.loss)
        assertErrorMentions(try g.requireLoss(), containing: ["no loss layer"])
        var gray = try ModelBuilder(input: FeatureDescription(name: "img", type: .image(ImageFeatureType(width: 5, height: 3, colorSpace: .grayscale))))
        gray.setImageScaler(ImageScaler(channelScale: 1, grayBias: -4))
        try gray.flatten("flat")
        let gg = try NetworkGraph(model: try gray.build())
        XCTAssertEqual(gg.input.shape, [1, 1, 3, 5])
        XCTAssertEqual(gg.input.preprocessing?.bias, [-4])
    }
}
