import Foundation
import XCTest
@testable import UpdraftBackends
@testable import UpdraftModel

/// torchvision classifiers as coremltools converts them (Tests/Scripts/make_converted_fixtures.py),
/// made updatable by coremltools, trained for a few steps on the CPU and on OpenCL (PoCL) and compared
/// with PyTorch's fine-tuning of the same network: batch loss within 1e-4 relative, weight updates within
/// 1% of PyTorch's largest update of each tensor.
final class ConvertedModelTests: XCTestCase {
    private func check(_ name: String, openCL: Bool, file: StaticString = #filePath, line: UInt = #line) throws {
        let fixture = try ConvertedFixture.load(name)
        let model = try CoreMLModel(contentsOf: ConvertedFixture.url("\(name).mlmodel"))
        let backend: Backend = openCL ? OpenCLBackend(context: try OpenCLTestSupport.context()) : CPUBackend()
        let where_ = "\(name) on \(openCL ? "OpenCL" : "the CPU")"
        let run = try fixture.train(model, on: backend)
        XCTAssertEqual(run.losses.count, fixture.losses.count, file: file, line: line)
        for (step, (mine, theirs)) in zip(run.losses, fixture.losses).enumerated() {
            XCTAssertEqual(mine, theirs, accuracy: 1e-4 * abs(theirs),
                           "\(where_): step \(step) loss \(mine), PyTorch \(theirs) (all: \(run.losses) vs \(fixture.losses))",
                           file: file, line: line)
        }
        for layer in fixture.trained {
            guard let expected = fixture.final[layer], let (w0, b0) = run.before[layer], let (w1, b1) = run.after[layer] else {
                return XCTFail("\(where_): no weights for trained layer \(layer)", file: file, line: line)
            }
            XCTAssertEqual(w0.count, expected.weights.count, "\(where_): \(layer) weight count", file: file, line: line)
            let w = ConvertedFixture.updateError(before: w0.data, after: w1.data, expected: expected.weights)
            XCTAssertGreaterThan(w.largest, 0, "\(where_): PyTorch moved \(layer)'s weights", file: file, line: line)
            XCTAssertLessThanOrEqual(w.error, 0.01, "\(where_): \(layer) weight update differs from PyTorch's by \(w.error * 100)% of its largest",
                                     file: file, line: line)
            guard let b0, let b1 else {
                return XCTFail("\(where_): \(layer) has no bias in Updraft", file: file, line: line)
            }
            let b = ConvertedFixture.updateError(before: b0.data, after: b1.data, expected: expected.bias)
            XCTAssertLessThanOrEqual(b.error, 0.01, "\(where_): \(layer) bias update differs from PyTorch's by \(b.error * 100)% of its largest",
                                     file: file, line: line)
        }
    }

    // One test per architecture and backend, every fixture by name.
    func testSqueezeNet11OnCPU() throws { try check("squeezenet1_1", openCL: false) }
    func testSqueezeNet11OnOpenCL() throws { try check("squeezenet1_1", openCL: true) }
    func testMobileNetV2OnCPU() throws { try check("mobilenet_v2", openCL: false) }
    func testMobileNetV2OnOpenCL() throws { try check("mobilenet_v2", openCL: true) }
    func testMobileNetV3SmallOnCPU() throws { try check("mobilenet_v3_small", openCL: false) }
    func testMobileNetV3SmallOnOpenCL() throws { try check("mobilenet_v3_small", openCL: true) }
    func testResNet18OnCPU() throws { try check("resnet18", openCL: false) }
    func testResNet18OnOpenCL() throws { try check("resnet18", openCL: true) }
    func testEfficientNetB0OnCPU() throws { try check("efficientnet_b0", openCL: false) }
    func testEfficientNetB0OnOpenCL() throws { try check("efficientnet_b0", openCL: true) }
    func testDenseNet121OnCPU() throws { try check("densenet121", openCL: false) }
    func testDenseNet121OnOpenCL() throws { try check("densenet121", openCL: true) }
    func testAlexNetOnCPU() throws { try check("alexnet", openCL: false) }
    func testAlexNetOnOpenCL() throws { try check("alexnet", openCL: true) }
    func testGoogLeNetOnCPU() throws { try check("googlenet", openCL: false) }
    func testGoogLeNetOnOpenCL() throws { try check("googlenet", openCL: true) }
    func testMNASNetOnCPU() throws { try check("mnasnet", openCL: false) }
    func testMNASNetOnOpenCL() throws { try check("mnasnet", openCL: true) }
    func testRegNetOnCPU() throws { try check("regnet", openCL: false) }
    func testRegNetOnOpenCL() throws { try check("regnet", openCL: true) }
    func testVGGWithBatchNormOnCPU() throws { try check("vgg_bn", openCL: false) }
    func testVGGWithBatchNormOnOpenCL() throws { try check("vgg_bn", openCL: true) }
    func testMLPOnCPU() throws { try check("mlp", openCL: false) }
    func testMLPOnOpenCL() throws { try check("mlp", openCL: true) }
    /// PyTorch's LayerNorm as the converter writes it: mvn, then the scale layer with gamma and beta.
    func testLayerNormMLPOnCPU() throws { try check("layernorm_mlp", openCL: false) }
    func testLayerNormMLPOnOpenCL() throws { try check("layernorm_mlp", openCL: true) }

    /// Made updatable from the as-converted file by Updraft with what the script asked of coremltools,
    /// every fixture gets coremltools' model: the same update parameters, training inputs, updatable
    /// flags and softmax, down to the bytes.
    func testMakeUpdatableWritesWhatCoreMLToolsWrites() throws {
        for name in ConvertedFixture.names {
            let fixture = try ConvertedFixture.load(name)
            let mine = try fixture.madeUpdatableByUpdraft()
            let theirs = try CoreMLModel(contentsOf: ConvertedFixture.url("\(name).mlmodel"))
            XCTAssertEqual(mine.spec.network.updateParameters, theirs.spec.network.updateParameters, "\(name): update parameters")
            XCTAssertEqual(mine.spec.description, theirs.spec.description, "\(name): inputs, outputs, training inputs")
            XCTAssertEqual(mine.updatableLayerNames, theirs.updatableLayerNames, "\(name): updatable layers")
            XCTAssertEqual(mine.layers, theirs.layers, "\(name): layers (softmaxND made softmax, weights flagged updatable)")
            XCTAssertEqual(mine.spec, theirs.spec, name)
            XCTAssertEqual(mine.serializedBytes(), theirs.serializedBytes(), "\(name): the files differ")
        }
    }

    /// `updraft make-updatable` on the command line, as a user with a converted model runs it, writes
    /// coremltools' file too (an SGD and an Adam fixture; the second has an image input).
    func testTheCommandWritesWhatCoreMLToolsWrites() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-converted-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        for name in ["mobilenet_v2", "resnet18"] {
            let f = try ConvertedFixture.load(name)
            let out = dir.appendingPathComponent("\(name).mlmodel")
            var args = ["make-updatable", ConvertedFixture.url("\(name).converted.mlmodel").path, "--layers", f.trained.joined(separator: ","),
                        "--loss", "cross-entropy", "--loss-input", "probs", "--loss-name", "loss", "--optimizer", f.optimizer,
                        "--learning-rate", "\(f.hyperparameters["lr"]!)", "--batch-size", "\(f.batch)", "--epochs", "\(f.steps)",
                        "--shuffle", "off", "--out", out.path]
            if f.optimizer == "sgd" { args += ["--momentum", "\(f.hyperparameters["momentum"]!)"] }
            let run = try runUpdraft(args, cacheDirectory: dir)
            XCTAssertEqual(run.status, 0, "\(name): \(run.stderr)")
            XCTAssertEqual(try Data(contentsOf: out), try Data(contentsOf: ConvertedFixture.url("\(name).mlmodel")),
                           "\(name): updraft make-updatable wrote other bytes than coremltools")
        }
    }

    /// The model Updraft made updatable trains exactly like coremltools' (and so like PyTorch).
    private func checkMadeUpdatable(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let fixture = try ConvertedFixture.load(name)
        let mine = try fixture.train(try fixture.madeUpdatableByUpdraft(), on: CPUBackend())
        let theirs = try fixture.train(try CoreMLModel(contentsOf: ConvertedFixture.url("\(name).mlmodel")), on: CPUBackend())
        XCTAssertEqual(mine.losses, theirs.losses, "\(name): losses", file: file, line: line)
        for layer in fixture.trained {
            XCTAssertEqual(mine.after[layer]?.0.data, theirs.after[layer]?.0.data, "\(name): \(layer) weights", file: file, line: line)
            XCTAssertEqual(mine.after[layer]?.1?.data, theirs.after[layer]?.1?.data, "\(name): \(layer) bias", file: file, line: line)
        }
        for (mine, theirs) in zip(mine.losses, fixture.losses) {
            XCTAssertEqual(mine, theirs, accuracy: 1e-4 * abs(theirs), "\(name): loss vs PyTorch", file: file, line: line)
        }
    }

    func testSqueezeNet11MadeUpdatableByUpdraft() throws { try checkMadeUpdatable("squeezenet1_1") }
    func testMobileNetV2MadeUpdatableByUpdraft() throws { try checkMadeUpdatable("mobilenet_v2") }
    func testMobileNetV3SmallMadeUpdatableByUpdraft() throws { try checkMadeUpdatable("mobilenet_v3_small") }
    func testResNet18MadeUpdatableByUpdraft() throws { try checkMadeUpdatable("resnet18") }
    func testEfficientNetB0MadeUpdatableByUpdraft() throws { try checkMadeUpdatable("efficientnet_b0") }
    func testDenseNet121MadeUpdatableByUpdraft() throws { try checkMadeUpdatable("densenet121") }
    func testAlexNetMadeUpdatableByUpdraft() throws { try checkMadeUpdatable("alexnet") }
    func testGoogLeNetMadeUpdatableByUpdraft() throws { try checkMadeUpdatable("googlenet") }
    func testMNASNetMadeUpdatableByUpdraft() throws { try checkMadeUpdatable("mnasnet") }
    func testRegNetMadeUpdatableByUpdraft() throws { try checkMadeUpdatable("regnet") }
    func testVGGWithBatchNormMadeUpdatableByUpdraft() throws { try checkMadeUpdatable("vgg_bn") }
    func testMLPMadeUpdatableByUpdraft() throws { try checkMadeUpdatable("mlp") }
    func testLayerNormMLPMadeUpdatableByUpdraft() throws { try checkMadeUpdatable("layernorm_mlp") }

    /// The folder holds exactly the listed architectures, each complete, so a fixture the script adds
    /// cannot go untested.
    func testEveryFixtureIsListed() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Fixtures.url(ConvertedFixture.folder).path)
        let names = Set(files.filter { $0.hasSuffix(".json") }.map { String($0.dropLast(".json".count)) })
        XCTAssertEqual(names, Set(ConvertedFixture.names))
        for name in ConvertedFixture.names {
            for suffix in [".mlmodel", ".converted.mlmodel", ".inputs.npy"] {
                XCTAssertTrue(files.contains(name + suffix), "\(name)\(suffix) is missing")
            }
            let fixture = try ConvertedFixture.load(name)
            XCTAssertEqual(fixture.architecture, name)
            XCTAssertEqual(Set(fixture.final.keys), Set(fixture.trained), name)
            let converted = try CoreMLModel(contentsOf: ConvertedFixture.url("\(name).converted.mlmodel"))
            XCTAssertEqual(fixture.layerTypes.values.reduce(0, +), converted.layers.count, "\(name): layerTypes counts every converted layer")
            XCTAssertEqual(converted.updatableLayerNames, [], "\(name).converted.mlmodel is as converted")
            let updatable = try CoreMLModel(contentsOf: ConvertedFixture.url("\(name).mlmodel"))
            XCTAssertEqual(updatable.updatableLayerNames, fixture.trained, name)
        }
    }
}
