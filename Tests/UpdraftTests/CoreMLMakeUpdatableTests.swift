import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftModel
@testable import UpdraftChecks
@testable import UpdraftData
@testable import UpdraftTraining

/// `CoreMLModel.makingUpdatable` and `updraft make-updatable`: coremltools' make_updatable and set_*
/// in Swift. (Tests/Scripts/check_make_updatable.py compares the bytes' meaning with coremltools itself.)
final class CoreMLMakeUpdatableTests: XCTestCase {
    /// 4 features -> fc1 (6) -> ReLU -> fc2 (3, no bias) -> softmax; a classifier nobody made updatable.
    func plainClassifier() throws -> CoreMLModel {
        var b = try ModelBuilder(input: FeatureDescription(name: "features", type: .multiArray(.init(shape: [4], dataType: .double))), seed: 3)
        try b.innerProduct("fc1", output: "h", outputChannels: 6)
        try b.activation("relu", .relu, output: "hr")
        try b.innerProduct("fc2", output: "logits", outputChannels: 3, hasBias: false)
        try b.softmax("softmax", output: "probs")
        try b.makeClassifier(labels: .strings(["a", "b", "c"]), probabilities: "probs")
        let model = try b.build()
        XCTAssertFalse(model.isUpdatable)
        return model
    }

    func testMakesAClassifierUpdatableAsCoremltoolsDoes() throws {
        let plain = try plainClassifier()
        var o = UpdatableModelOptions(layers: ["fc2"])
        o.epochs = 2
        o.allowedEpochs = .range(min: 1, max: 1000)
        let made = try plain.makingUpdatable(o)
        // Round trip through the protobuf reader.
        let model = try CoreMLModel(serializedBytes: made.serializedBytes())
        XCTAssertTrue(model.isUpdatable)
        XCTAssertEqual(model.specificationVersion, 4)
        XCTAssertEqual(model.updatableLayerNames, ["fc2"])
        guard case let .innerProduct(fc2)? = model.layer(named: "fc2")?.params else { return XCTFail("fc2 is not an inner product") }
        XCTAssertTrue(fc2.weights.isUpdatable)
        XCTAssertEqual(fc2.bias?.isUpdatable, true, "coremltools flags the (empty) bias message of a layer without bias too")
        guard case let .innerProduct(fc1)? = model.layer(named: "fc1")?.params else { return XCTFail("fc1 is not an inner product") }
        XCTAssertFalse(fc1.weights.isUpdatable)
        XCTAssertEqual(model.loss, LossLayerSpec(name: "lossLayer", kind: .categoricalCrossEntropy, input: "probs", target: "probs_true"))
        XCTAssertEqual(model.modelDescription.trainingInputs.map(\.name), ["features", "label"])
        XCTAssertEqual(model.modelDescription.trainingInputs.last?.type, .string)
        let u = try XCTUnwrap(model.updateParameters)
        XCTAssertEqual(u.optimizer, OptimizerSpec.sgd(learningRate: 0.01, miniBatchSize: 10))
        XCTAssertEqual(u.epochs, Int64Parameter(defaultValue: 2, allowed: .range(min: 1, max: 1000)))
        XCTAssertEqual(u.shuffle, BoolParameter(defaultValue: true))
        XCTAssertNil(u.seed)
        XCTAssertEqual(ModelValidator.validate(model).errors, [])
        // The weights and everything else are untouched.
        XCTAssertEqual(try model.weights(ofLayer: "fc1"), try plain.weights(ofLayer: "fc1"))
        XCTAssertEqual(try model.weights(ofLayer: "fc2"), try plain.weights(ofLayer: "fc2"))
        XCTAssertEqual(model.spec.description.outputs, plain.spec.description.outputs)
    }

    func testTheResultTrainsOneStep() throws {
        var o = UpdatableModelOptions(layers: ["fc2"])
        o.miniBatchSize = 4
        o.learningRate = 0.5
        let model = try plainClassifier().makingUpdatable(o)
        let examples = (0..<4).map { i in
            TrainingExample(input: Tensor(shape: [4], data: (0..<4).map { Float(($0 + i) % 3) - 1 }), target: .classIndex(i % 3))
        }
        var config = UpdateConfiguration()
        config.placement.computeUnits = .cpuOnly
        config.placement.dataParallelMode = .off
        let task = UpdateTask(model: model, trainingData: try ArrayBatchProvider(examples: examples), configuration: config)
        let final = task.run()
        XCTAssertEqual(final.task.state, .completed, "\(final.error.map { "\($0)" } ?? "")")
        XCTAssertEqual(task.history.epochs.count, 1)
        let trained = try final.model()
        XCTAssertNotEqual(try trained.weights(ofLayer: "fc2"), try model.weights(ofLayer: "fc2"), "the updatable layer moved")
        XCTAssertEqual(try trained.weights(ofLayer: "fc1"), try model.weights(ofLayer: "fc1"), "the frozen layer did not")
    }

    /// Every converted torchvision fixture, made updatable by Updraft with the settings coremltools
    /// was given (Tests/Scripts/make_converted_fixtures.py), is the same file coremltools wrote.
    func testConvertedModelsComeOutAsCoremltoolsMakesThem() throws {
        XCTAssertGreaterThanOrEqual(ConvertedFixture.names.count, 12)
        for name in ConvertedFixture.names {
            let converted = try CoreMLModel(contentsOf: ConvertedFixture.url("\(name).converted.mlmodel"))
            let reference = try CoreMLModel(contentsOf: ConvertedFixture.url("\(name).mlmodel"))
            let u = try XCTUnwrap(reference.updateParameters, name)
            let optimizer = try XCTUnwrap(u.optimizer, name)
            var o = UpdatableModelOptions(layers: reference.updatableLayerNames, lossName: u.lossLayers.first?.name,
                                          optimizer: optimizer.kind)
            o.learningRate = optimizer.learningRate?.defaultValue
            o.miniBatchSize = optimizer.miniBatchSize?.defaultValue
            o.momentum = optimizer.momentum?.defaultValue
            o.beta1 = optimizer.beta1?.defaultValue
            o.beta2 = optimizer.beta2?.defaultValue
            o.eps = optimizer.eps?.defaultValue
            o.epochs = u.epochs?.defaultValue
            o.shuffle = u.shuffle?.defaultValue
            let made = try converted.makingUpdatable(o)
            XCTAssertEqual(made.spec, reference.spec, "\(name): Updraft's and coremltools' updatable models differ")
            XCTAssertEqual(made.serializedBytes(), reference.serializedBytes(), "\(name): not the same bytes")
        }
    }

    func testFloat16WeightsOfAnUpdatableLayerAreWidened() throws {
        // coremltools refuses any float16 weights; Core ML updates only float32 ones: Updraft widens
        // the layers it makes updatable and leaves the frozen ones as they are.
        let model = try CoreMLModel(contentsOf: Fixtures.url("float16_frozen.mlmodel"))
        XCTAssertEqual(model.layer(named: "frozen")?.weightParams?.weights.encoding, .float16)
        let made = try CoreMLModel(serializedBytes: model.makingUpdatable(UpdatableModelOptions(layers: ["frozen", "head"])).serializedBytes())
        guard case let .innerProduct(p)? = made.layer(named: "frozen")?.params else { return XCTFail() }
        XCTAssertEqual(p.weights.encoding, .float32)
        XCTAssertEqual(p.bias?.encoding, .float32)
        XCTAssertTrue(p.weights.isUpdatable && p.bias?.isUpdatable == true)
        XCTAssertEqual(try made.weights(ofLayer: "frozen"), try model.weights(ofLayer: "frozen"), "widening is exact")
        XCTAssertEqual(ModelValidator.validate(made).errors, [])
        let frozenOnly = try model.makingUpdatable(UpdatableModelOptions(layers: ["head"]))
        XCTAssertEqual(frozenOnly.layer(named: "frozen")?.weightParams?.weights.encoding, .float16)
    }

    func testReparameterizingChangesOnlyWhatIsGiven() throws {
        let original = try CoreMLModel(contentsOf: Fixtures.url("dense_sgd_classifier.mlmodel"))
        var o = UpdatableModelOptions()
        o.allowedEpochs = .range(min: 1, max: 100)
        o.epochs = 3
        let changed = try CoreMLModel(serializedBytes: original.makingUpdatable(o).serializedBytes())
        var expected = try XCTUnwrap(original.updateParameters)
        expected.epochs = Int64Parameter(defaultValue: 3, allowed: .range(min: 1, max: 100))
        XCTAssertEqual(changed.updateParameters, expected)
        XCTAssertEqual(changed.layers, original.layers)
        XCTAssertEqual(changed.modelDescription, original.modelDescription)
        // Nothing given: the very same bytes.
        XCTAssertEqual(try original.makingUpdatable(UpdatableModelOptions()).serializedBytes(), original.serializedBytes())
        // The error that sent the user here now passes, and its hint names the way out.
        let descriptions = original.hyperparameters
        XCTAssertThrowsError(try TrainingParameters(optimizer: .sgd, hyperparameters: descriptions, overrides: [.epochs: .int(3)])) {
            XCTAssertTrue("\($0)".contains("updraft make-updatable MODEL --allowed-epochs"), "\($0)")
        }
        XCTAssertNoThrow(try TrainingParameters(optimizer: .sgd, hyperparameters: changed.hyperparameters, overrides: [.epochs: .int(3)]))
    }

    func testSwitchingOptimizerKeepsLearningRateAndBatch() throws {
        let original = try CoreMLModel(contentsOf: Fixtures.url("dense_sgd_classifier.mlmodel"))
        var o = UpdatableModelOptions(optimizer: .adam)
        o.beta2 = 0.99
        let adam = try original.makingUpdatable(o).optimizer
        XCTAssertEqual(adam?.kind, .adam)
        XCTAssertEqual(adam?.learningRate, original.optimizer?.learningRate)
        XCTAssertEqual(adam?.miniBatchSize, original.optimizer?.miniBatchSize)
        XCTAssertEqual(adam?.beta1, DoubleParameter(defaultValue: 0.9, range: DoubleBounds(min: 0, max: 1)))
        XCTAssertEqual(adam?.beta2, DoubleParameter(defaultValue: 0.99, range: DoubleBounds(min: 0, max: 1)))
        XCTAssertNil(adam?.momentum)
    }

    func testRelayeringUnflagsTheOthers() throws {
        let original = try CoreMLModel(contentsOf: Fixtures.url("dense_sgd_classifier.mlmodel"))
        let model = try original.makingUpdatable(UpdatableModelOptions(layers: ["dense2"]))
        XCTAssertEqual(model.updatableLayerNames, ["dense2"])
        guard case let .innerProduct(p)? = model.layer(named: "dense1")?.params else { return XCTFail() }
        XCTAssertFalse(p.weights.isUpdatable)
        XCTAssertEqual(p.bias?.isUpdatable, false)
        XCTAssertEqual(model.updateParameters, original.updateParameters)
    }

    func testSoftmaxNDBecomesSoftmax() throws {
        // The plain classifier with its softmax re-encoded as softmaxND over the last axis, the way
        // coremltools' PyTorch converter writes torch.softmax(x, dim=-1).
        let plain = try plainClassifier()
        var message = plain.message
        let index = try XCTUnwrap(plain.layers.firstIndex { $0.name == "softmax" })
        try message.editMessage(plain.spec.network.kind.fieldNumber) { network in
            try network.editMessage(1, occurrence: index) { layer in
                layer.remove(175)
                layer.set(ProtoField(number: 950, message: ProtoMessage(fields: [ProtoField(number: 1, int64: -1)])))
            }
        }
        let converted = try CoreMLModel(serializedBytes: message.serialized())
        XCTAssertEqual(converted.layer(named: "softmax")?.typeName, "softmaxND")
        let made = try converted.makingUpdatable(UpdatableModelOptions(layers: ["fc1", "fc2"]))
        XCTAssertEqual(made.layer(named: "softmax")?.typeName, "softmax")
        XCTAssertEqual(made.loss?.input, "probs")
        XCTAssertEqual(ModelValidator.validate(made).errors, [])

        // Over another axis it is not a class softmax: refused.
        var other = plain.message
        try other.editMessage(plain.spec.network.kind.fieldNumber) { network in
            try network.editMessage(1, occurrence: index) { layer in
                layer.remove(175)
                layer.set(ProtoField(number: 950, message: ProtoMessage(fields: [ProtoField(number: 1, int64: 0)])))
            }
        }
        XCTAssertThrowsError(try CoreMLModel(serializedBytes: other.serialized()).makingUpdatable(UpdatableModelOptions(layers: ["fc2"]))) {
            XCTAssertTrue("\($0)".contains("softmaxND layer 'softmax' over axis 0"), "\($0)")
        }
    }

    func testMeanSquaredErrorTargetTakesTheOutputShape() throws {
        var b = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(.init(shape: [3], dataType: .double))))
        try b.innerProduct("out", output: "y", outputChannels: 2)
        try b.addOutput("y")
        b.makeRegressor()
        let model = try b.build().makingUpdatable(UpdatableModelOptions(layers: ["out"]))
        XCTAssertEqual(model.loss, LossLayerSpec(name: "lossLayer", kind: .meanSquaredError, input: "y", target: "y_true"))
        XCTAssertEqual(model.modelDescription.trainingInputs.last,
                       FeatureDescription(name: "y_true", type: .multiArray(.init(shape: [2], dataType: .double))))
        XCTAssertEqual(ModelValidator.validate(model).errors, [])
    }

    func testAPlainNetworkEndingInSoftmaxTrainsWithCrossEntropy() throws {
        // What ct.convert gives without a ClassifierConfig: a plain network whose output is a softmax.
        var b = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(.init(shape: [3], dataType: .float32))))
        try b.innerProduct("linear_0", output: "logits", outputChannels: 4)
        try b.softmax("317", output: "probs")
        try b.addOutput("probs")
        let model = try b.build().makingUpdatable(UpdatableModelOptions(layers: ["linear_0"]))
        XCTAssertEqual(model.loss, LossLayerSpec(name: "lossLayer", kind: .categoricalCrossEntropy, input: "probs", target: "probs_true"))
        XCTAssertEqual(model.modelDescription.trainingInputs.map(\.name), ["x", "probs_true"])
        XCTAssertEqual(model.modelDescription.trainingInputs.last?.type, .multiArray(.init(shape: [1], dataType: .int32)))
        XCTAssertEqual(ModelValidator.validate(model).errors, [])
    }

    func testRefusalsNameTheWayOut() throws {
        let plain = try plainClassifier()
        func message(_ o: UpdatableModelOptions, _ model: CoreMLModel? = nil) -> String {
            do { _ = try (model ?? plain).makingUpdatable(o); return "no error" } catch { return "\(error)" }
        }
        let unknown = message(UpdatableModelOptions(layers: ["fc9", "relu"]))
        XCTAssertTrue(unknown.contains("no layer named 'fc9'"), unknown)
        XCTAssertTrue(unknown.contains("'relu' is a activation layer"), unknown)
        XCTAssertTrue(unknown.contains("layers that can be updatable: fc1, fc2"), unknown)
        XCTAssertTrue(message(UpdatableModelOptions()).contains("has no updatable layers"))
        var o = UpdatableModelOptions(layers: ["fc2"])
        o.lossInput = "logits"
        let notSoftmax = message(o)
        XCTAssertTrue(notSoftmax.contains("must read a softmax output, but 'logits' comes from innerProduct layer 'fc2'"), notSoftmax)
        o = UpdatableModelOptions(layers: ["fc2"])
        o.learningRate = 2
        XCTAssertTrue(message(o).contains("--allowed-learning-rate"), message(o))
        o.allowedLearningRate = DoubleBounds(min: 0, max: 0.5)
        XCTAssertTrue(message(o).contains("does not contain its default 2"), message(o))
        o = UpdatableModelOptions(layers: ["fc2"])
        o.momentum = 0.9
        o.optimizer = .adam
        XCTAssertTrue(message(o).contains("momentum belongs to the SGD optimizer"), message(o))
        o = UpdatableModelOptions(layers: ["fc2"])
        o.allowedMiniBatchSizes = .set([8, 16])
        XCTAssertTrue(message(o).contains("do not contain its default 10"), message(o))
        XCTAssertThrowsError(try Int64Constraint.parse("8,8", what: "--allowed-batch-sizes"))
        XCTAssertEqual(try Int64Constraint.parse("1..1000", what: "x"), .range(min: 1, max: 1000))
        XCTAssertEqual(try Int64Constraint.parse("8, 16,32", what: "x"), .set([8, 16, 32]))
        XCTAssertEqual(try DoubleBounds.parse("1e-6..0.5", what: "x"), DoubleBounds(min: 1e-6, max: 0.5))
        XCTAssertThrowsError(try DoubleBounds.parse("1..0", what: "x"))
    }

    func testCommandWritesAtomicallyAndRefusesUnknownLayers() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-make-updatable-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("plain.mlmodel")
        try plainClassifier().write(to: source)
        let out = dir.appendingPathComponent("made.mlmodel")
        let ok = try runUpdraft(["make-updatable", source.path, "--layers", "fc1,fc2", "--optimizer", "adam",
                                 "--allowed-batch-sizes", "4,8,16", "--batch-size", "8", "--allowed-epochs", "1..50",
                                 "--epochs", "5", "--out", out.path], cacheDirectory: dir)
        XCTAssertEqual(ok.status, 0, ok.stderr)
        XCTAssertTrue(ok.stdout.contains("updatable layers fc1, fc2"), ok.stdout)
        let model = try CoreMLModel(contentsOf: out)
        XCTAssertEqual(model.optimizer?.kind, .adam)
        XCTAssertEqual(model.optimizer?.miniBatchSize, Int64Parameter(defaultValue: 8, allowed: .set([4, 8, 16])))
        XCTAssertEqual(model.updateParameters?.epochs, Int64Parameter(defaultValue: 5, allowed: .range(min: 1, max: 50)))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { !$0.hasSuffix(".mlmodel") }
        XCTAssertEqual(leftovers.filter { !$0.hasPrefix("calibration") && !$0.hasPrefix("updraft") }, [], "no temporary files left")

        let bad = try runUpdraft(["make-updatable", source.path, "--layers", "fc3", "--out", out.path], cacheDirectory: dir)
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("no layer named 'fc3'") && bad.stderr.contains("fc1, fc2"), bad.stderr)
        XCTAssertEqual(try CoreMLModel(contentsOf: out).optimizer?.kind, .adam, "a refused run leaves the output alone")
    }
}
