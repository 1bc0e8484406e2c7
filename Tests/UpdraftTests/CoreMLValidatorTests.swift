import XCTest
@testable import UpdraftModel
@testable import UpdraftChecks
@testable import UpdraftPlacement

/// The validator: Core ML's rules for updatable models as errors, and warnings where Core ML
/// would refuse but Updraft can train.
final class CoreMLValidatorTests: XCTestCase {
    /// x[4] -> dense(3) -> softmax, updatable, CE loss, SGD, epochs: valid.
    private func small() throws -> ModelSpec {
        var b = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(ArrayFeatureType(shape: [4], dataType: .double))), seed: 1)
        try b.innerProduct("dense", outputChannels: 3)
        try b.softmax("softmax", output: "probs")
        try b.makeClassifier(labels: .strings(["a", "b", "c"]), probabilities: "probs")
        try b.makeUpdatable(["dense"])
        try b.setCrossEntropyLoss(input: "probs")
        b.setOptimizer(.sgd(learningRate: 0.01, miniBatchSize: 4, allowedMiniBatchSizes: [1, 4]))
        b.setEpochs(5, allowed: [1, 5])
        return b.spec
    }

    /// Edits the inner-product parameters of layer `i`.
    private func editInnerProduct(_ spec: inout ModelSpec, _ i: Int, _ body: (inout InnerProductLayerParams) -> Void) {
        guard case var .innerProduct(p) = spec.network.layers[i].params else { return XCTFail("layer \(i) is not an inner product") }
        body(&p)
        spec.network.layers[i].params = .innerProduct(p)
    }

    private func findings(_ spec: ModelSpec) -> [ValidationFinding] { ModelValidator.validate(CoreMLModel(spec: spec)) }

    private func assertError(_ spec: ModelSpec, _ fragments: [String], file: StaticString = #filePath, line: UInt = #line) {
        let errors = findings(spec).errors
        XCTAssertTrue(errors.contains { e in fragments.allSatisfy { e.message.contains($0) } },
                      "no error mentioning \(fragments) in \(errors)", file: file, line: line)
    }

    private func updateParams(_ spec: inout ModelSpec, _ body: (inout UpdateParameters) -> Void) {
        var u = spec.network.updateParameters!
        body(&u)
        spec.network.updateParameters = u
    }

    func testValidModelsHaveNoFindings() throws {
        XCTAssertEqual(findings(try small()), [])
        for name in ["dense_sgd_classifier", "dense_adam_classifier", "mse_regressor", "conv_image_classifier"] {
            XCTAssertEqual(ModelValidator.validate(try CoreMLFixtures.model(name)), [], name)
        }
    }

    func testSpecificationVersionAndUpdatableFlag() throws {
        var s = try small()
        s.specificationVersion = 3
        assertError(s, ["specificationVersion is 3", "4"])
        s = try small()
        s.isUpdatable = false
        assertError(s, ["not marked updatable"])
        let plain = try CoreMLFixtures.model("unsupported_layer")
        XCTAssertTrue(ModelValidator.validate(plain).errors.contains { $0.message.contains("not updatable") })
    }

    func testUpdatableLayersAndTheirFlags() throws {
        var s = try small()
        s.network.layers[0].isUpdatable = false
        assertError(s, ["no layer is marked updatable"])

        s = try small()
        editInnerProduct(&s, 0) { $0.weights.isUpdatable = false }
        assertError(s, ["'dense'", "weights are not flagged isUpdatable"])

        s = try small()
        editInnerProduct(&s, 0) { $0.bias?.isUpdatable = false }
        assertError(s, ["'dense'", "bias is not flagged"])

        s = try small()
        s.network.layers[1].isUpdatable = true
        assertError(s, ["'softmax'", "only convolution and innerProduct"])

        // Float16 weights on an updatable layer.
        s = try small()
        editInnerProduct(&s, 0) { $0.weights.encoding = .float16 }
        assertError(s, ["'dense'", "float16", "only float32"])
    }

    func testLossRules() throws {
        var s = try small()
        updateParams(&s) { $0.lossLayers = [] }
        assertError(s, ["no loss layer"])

        s = try small()
        updateParams(&s) { $0.lossLayers[0].input = "dense" }
        assertError(s, ["reads 'dense'", "innerProduct", "softmax output"])

        s = try small()
        updateParams(&s) { $0.lossLayers.append($0.lossLayers[0]) }
        assertError(s, ["2 loss layers"])

        s = try small()
        updateParams(&s) { $0.lossLayers[0].name = "dense" }
        assertError(s, ["'dense' is also a layer name"])

        // The target must be a training input.
        s = try small()
        s.description.trainingInputs.removeAll { $0.name == "label" }
        assertError(s, ["target 'probs_true'", "not among the training inputs"])

        // Training inputs must include the prediction input.
        s = try small()
        s.description.trainingInputs.removeAll { $0.name == "x" }
        assertError(s, ["lack the prediction input 'x'"])

        s = try small()
        updateParams(&s) { $0.lossLayers[0].kind = nil; $0.lossLayers[0].unknownTypeField = 12 }
        assertError(s, ["unknown loss type", "12"])
    }

    func testOptimizerAndEpochRules() throws {
        var s = try small()
        updateParams(&s) { $0.optimizer = nil }
        assertError(s, ["no optimizer"])

        s = try small()
        updateParams(&s) { $0.optimizer?.learningRate = nil }
        assertError(s, ["no learning rate"])

        s = try small()
        updateParams(&s) { $0.optimizer?.miniBatchSize = nil }
        assertError(s, ["no mini-batch size"])

        s = try small()
        updateParams(&s) { $0.optimizer?.learningRate = DoubleParameter(defaultValue: 2, range: DoubleBounds(min: 0, max: 1)) }
        assertError(s, ["learning rate default 2", "outside its allowed range [0, 1]"])

        s = try small()
        updateParams(&s) { $0.optimizer?.learningRate = DoubleParameter(defaultValue: 0) }
        assertError(s, ["learning rate default 0 must be greater than 0"])

        s = try small()
        updateParams(&s) { $0.optimizer?.miniBatchSize = Int64Parameter(defaultValue: 3, allowed: .set([1, 4])) }
        assertError(s, ["mini-batch size default 3", "not in its allowed set {1, 4}"])

        s = try small()
        updateParams(&s) { $0.epochs = nil }
        assertError(s, ["no epochs"])

        s = try small()
        updateParams(&s) { $0.epochs = Int64Parameter(defaultValue: 7, allowed: .range(min: 10, max: 1)) }
        assertError(s, ["epochs range [10, 1] is empty"])

        s = try small()
        updateParams(&s) { $0.optimizer = .adam(learningRate: 0.01, miniBatchSize: 4); $0.optimizer?.eps = DoubleParameter(defaultValue: -1) }
        assertError(s, ["eps default -1"])
    }

    /// Every allowed value is checked, not only the default: values a run cannot take, sizes the
    /// network cannot hold (errors), and sizes whose training does not fit this host (a warning).
    func testEveryAllowedValueIsChecked() throws {
        var s = try small()
        updateParams(&s) { $0.epochs = Int64Parameter(defaultValue: 5, allowed: .set([0, 5])) }
        assertError(s, ["epochs allows 0, which a run cannot take"])

        s = try small()
        updateParams(&s) { $0.optimizer?.miniBatchSize = Int64Parameter(defaultValue: 4, allowed: .range(min: -2, max: 8)) }
        assertError(s, ["mini-batch size allows -2"])

        s = try small()
        updateParams(&s) { $0.optimizer?.miniBatchSize = Int64Parameter(defaultValue: 4, allowed: .set([4, 1 << 50])) }
        assertError(s, ["allowed mini-batch size \(1 << 50) cannot be held", "the largest this model allows is"])

        // A size the network holds but this host's memory does not: a warning naming what fits.
        s = try small()
        let huge = Int64(SizeLimits.largestBatchSize(try NetworkGraph(model: CoreMLModel(spec: s))))
        updateParams(&s) { $0.optimizer?.miniBatchSize = Int64Parameter(defaultValue: 4, allowed: .range(min: 1, max: huge)) }
        let found = findings(s)
        XCTAssertEqual(found.errors, [], "\(found)")
        XCTAssertTrue(found.warnings.contains { $0.message.contains("the largest allowed mini-batch size does not fit") && $0.message.contains("the largest mini-batch that fits is") },
                      "\(found)")

        // Allowed sizes that fit: nothing to say.
        s = try small()
        updateParams(&s) { $0.optimizer?.miniBatchSize = Int64Parameter(defaultValue: 4, allowed: .set([1, 4, 64])) }
        XCTAssertEqual(findings(s), [])
    }

    func testUniqueNames() throws {
        var s = try small()
        s.network.layers[1].name = "dense"
        assertError(s, ["layer name 'dense' is used more than once"])
        s = try small()
        s.description.outputs.append(s.description.outputs[0])
        assertError(s, ["output feature 'probs' is listed more than once"])
    }

    func testConcatBetweenUpdatableLayerAndLossIsAWarning() throws {
        let model = try CoreMLFixtures.model("concat_branches")
        let f = ModelValidator.validate(model)
        XCTAssertEqual(f.errors, [])
        XCTAssertEqual(Set(f.warnings.compactMap(\.layer)), ["left", "right"])
        XCTAssertTrue(f.warnings.allSatisfy { $0.message.contains("concat layer 'cat'") && $0.message.contains("Updraft can still train") })
        // fc sits after the concat: no warning for it.
        XCTAssertFalse(f.warnings.contains { $0.layer == "fc" })
    }

    func testAddOnTheGradientPathAndUnusedUpdatableLayersWarn() throws {
        var b = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(ArrayFeatureType(shape: [4], dataType: .double))), seed: 2)
        try b.innerProduct("a", input: "x", outputChannels: 3)
        try b.innerProduct("b", input: "x", outputChannels: 3)
        try b.add("sum", inputs: ["a", "b"])
        try b.softmax("softmax", output: "probs")
        try b.innerProduct("unused", input: "x", outputChannels: 2)
        try b.addOutput("probs")
        try b.makeUpdatable(["a", "unused"])
        try b.setCrossEntropyLoss(input: "probs")
        b.setOptimizer(.sgd(learningRate: 0.1, miniBatchSize: 2))
        b.setEpochs(1)
        let f = ModelValidator.validate(try b.build())
        XCTAssertEqual(f.errors, [])
        XCTAssertTrue(f.warnings.contains { $0.layer == "a" && $0.message.contains("add layer 'sum'") }, "\(f)")
        XCTAssertTrue(f.warnings.contains { $0.layer == "unused" && $0.message.contains("does not depend on it") }, "\(f)")
    }

    func testFloat16WeightsAnywhereWarn() throws {
        let f = ModelValidator.validate(try CoreMLFixtures.model("float16_frozen"))
        XCTAssertEqual(f.errors, [])
        XCTAssertTrue(f.warnings.contains { $0.layer == "frozen" && $0.message.contains("float16") })
    }

    func testUnrunnableModelsAreErrors() throws {
        let q = ModelValidator.validate(try CoreMLFixtures.model("quantized_weights"))
        XCTAssertTrue(q.errors.contains { $0.message.contains("quant") && $0.message.contains("not supported") })
        let l = ModelValidator.validate(try CoreMLFixtures.lrnAsCrop())
        XCTAssertTrue(l.errors.contains { $0.message.contains("crop") }, "\(l)")
    }
}
