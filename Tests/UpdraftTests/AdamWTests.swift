import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftChecks
@testable import UpdraftData
@testable import UpdraftTraining

/// AdamW, the optimizer added past Core ML (issue 36's proof that an optimizer is one unit): its
/// Double definition against a closed form, the CPU loop and the OpenCL kernel against that
/// definition, PyTorch's `torch.optim.AdamW` trajectory through the executor and through an
/// `UpdateTask`, and the refusal to write it where Core ML has no place for it.
final class AdamWTests: XCTestCase {
    private func hyper(_ lr: Double = 0.01, decay: Double = 0.1) -> AdamW.Hyperparameters {
        AdamW.hyperparameters([.learningRate: .double(lr), .weightDecay: .double(decay)])
    }

    /// From zero moments with a constant gradient g the bias-corrected moments are exactly g and g², so
    /// every step is w <- s w - c with s = 1 - lr decay and c = lr g / (|g| + eps), and after t steps
    /// w_t = s^t w_0 - c (1 - s^t) / (1 - s): computed here without the element loop.
    func testReferenceFollowsTheClosedForm() throws {
        let h = hyper(0.05, decay: 0.2)
        let w0: [Double] = [0.5, -1.25, 2, 0.01], g: [Double] = [0.3, -0.7, 0.002, 1.5]
        var w = w0, state = [[Double]](repeating: [Double](repeating: 0, count: 4), count: 2)
        let steps = 6
        for t in 1...steps { try AdamW.referenceStep(h, step: t, parameter: &w, gradient: g, state: &state) }
        let s = 1 - h.learningRate * h.weightDecay, st = pow(s, Double(steps))
        for i in w0.indices {
            let c = h.learningRate * g[i] / (abs(g[i]) + h.eps)
            XCTAssertEqual(w[i], st * w0[i] - c * (1 - st) / (1 - s), accuracy: 1e-12, "element \(i)")
        }
        XCTAssertThrowsError(try AdamW.referenceStep(h, step: 0, parameter: &w, gradient: g, state: &state)) {
            XCTAssertTrue("\($0)".contains("steps count from 1"), "\($0)")
        }
    }

    /// The CPU loop and the OpenCL kernel (where a device is present) give the reference's weights and
    /// moments over several steps of changing gradients, on a tensor that splits over threads.
    func testBackendsMatchTheReference() throws {
        var backends: [Backend] = [CPUBackend(threads: 2)]
        if let shared = try? OpenCLTestSupport.context() { backends.append(OpenCLBackend(context: shared)) }
        let h = hyper(0.02, decay: 0.05), count = 70_001, steps = 4
        var rng = SplitMix64(seed: 11)
        let w0 = (0..<count).map { _ in rng.nextFloat(in: -1...1) }
        let gradients = (0..<steps).map { _ in (0..<count).map { _ in rng.nextFloat(in: -2...2) } }
        var reference = w0.map(Double.init), state = [[Double]](repeating: [Double](repeating: 0, count: count), count: 2)
        for t in 1...steps {
            try AdamW.referenceStep(h, step: t, parameter: &reference, gradient: gradients[t - 1].map(Double.init), state: &state)
        }
        for backend in backends {
            let w = try backend.makeBuffer(w0), m = try backend.makeBuffer(count: count), v = try backend.makeBuffer(count: count)
            try backend.fill(m, with: 0)
            try backend.fill(v, with: 0)
            for t in 1...steps {
                try AdamW.step(h, step: t, on: backend, parameter: w, gradient: try backend.makeBuffer(gradients[t - 1]),
                               state: [m, v], count: count)
            }
            for (got, expected, what) in [(try backend.download(w), reference, "w"), (try backend.download(m), state[0], "m"),
                                          (try backend.download(v), state[1], "v")] {
                let worst = zip(got, expected).map { abs(Double($0) - $1) / max(1, abs($1)) }.max()!
                XCTAssertLessThan(worst, 2e-6, "\(backend.name) \(what) differs from the reference by \(worst)")
            }
        }
    }

    /// PyTorch's AdamW (weight decay 0.1) on the branches model: the executor's losses and weights on
    /// the reference and the CPU, and an `UpdateTask` asked for AdamW, follow it step by step.
    func testTrainingFollowsPyTorchsAdamW() throws {
        let (golden, model) = try GoldenRun.load("branches_adamw")
        XCTAssertEqual(golden.optimizer, "adamw")
        XCTAssertEqual(model.updateParameters?.optimizer?.kind, .adam, "the model holds Adam: Core ML has no AdamW")
        let graph = try NetworkGraph(model: model)
        let hyper = try TrainingParameters(optimizer: .adamW, hyperparameters: graph.hyperparameters,
                                           overrides: [.weightDecay: .double(try XCTUnwrap(golden.weightDecay))])
        for backend in [ReferenceBackend(), CPUBackend(threads: 2)] as [Backend] {
            let executor = try Executor(training: try TrainingGraph(graph: graph), optimizer: .adamW, backend: backend)
            let losses = try golden.trainLosses(executor, parameters: hyper)
            for (a, b) in zip(losses, golden.losses) {
                XCTAssertEqual(a, b, accuracy: 2e-5 * max(1, abs(b)), "\(backend.name): \(losses) vs PyTorch \(golden.losses)")
            }
            for (layer, expected) in golden.final {
                let (w, b) = try executor.weights(ofLayer: layer)
                let worst = zip(w.data + b!.data, expected.weights + expected.bias).map { abs($0 - $1) }.max()!
                XCTAssertLessThan(worst, 3e-5, "\(backend.name) \(layer) differs from PyTorch by \(worst)")
            }
        }
        var config = UpdateConfiguration()
        config.optimizer = .adamW
        config.parameters = [.weightDecay: .double(golden.weightDecay!)]
        config.placement.computeUnits = .cpuOnly
        config.parameters[.shuffle] = .bool(false)
        let recorded = Locked<[Double]>([])
        let task = UpdateTask(model: model, trainingData: try ArrayBatchProvider(examples: golden.examples), configuration: config,
                              handlers: UpdateHandlers(events: [.miniBatchEnd], progress: { recorded.append($0.metrics!.lossValue) }))
        let ended = task.run()
        XCTAssertNil(ended.error)
        XCTAssertEqual(ended.parameters.optimizer, .adamW)
        for (a, b) in zip(recorded.value, golden.losses) { XCTAssertEqual(a, b, accuracy: 2e-5 * max(1, abs(b))) }
        XCTAssertEqual(recorded.value.count, golden.losses.count)
        // The trained model keeps the Core ML optimizer it came with, and is written.
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("adamw-\(UUID().uuidString).mlmodel")
        defer { try? FileManager.default.removeItem(at: out) }
        let trained = try task.currentModel()
        XCTAssertEqual(trained.updateParameters?.optimizer?.kind, .adam)
        try trained.write(to: out)
    }

    /// No Core ML optimizer message holds AdamW: making a model updatable with it, or writing a model
    /// whose update parameters name it, is refused by name with the way out; reading never yields it.
    func testAdamWIsRefusedWhereCoreMLHasNoPlaceForIt() throws {
        XCTAssertFalse(OptimizerKind.adamW.isInCoreML)
        XCTAssertEqual(OptimizerKind.coreMLFields, [10, 11])
        let (_, model) = try GoldenRun.load("branches_adamw")
        XCTAssertThrowsError(try model.makingUpdatable(UpdatableModelOptions(optimizer: .adamW))) {
            let message = "\($0)"
            XCTAssertTrue(message.contains("AdamW has no place in a Core ML model"), message)
            XCTAssertTrue(message.contains("--optimizer adamw"), message)
        }
        var spec = model.spec
        spec.network.updateParameters?.optimizer?.kind = .adamW
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("adamw-\(UUID().uuidString).mlmodel")
        XCTAssertThrowsError(try CoreMLModel(spec: spec).write(to: out)) {
            XCTAssertTrue("\($0)".contains("name AdamW, which a Core ML model cannot hold"), "\($0)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: out.path), "nothing written")
        XCTAssertTrue(ModelValidator.validate(CoreMLModel(spec: spec)).contains { $0.message.contains("AdamW") })
    }

    /// `updraft train --optimizer adamw` trains the golden model as PyTorch's AdamW does (the JSON Lines
    /// log names the optimizer and the losses follow PyTorch's), and `updraft make-updatable --optimizer
    /// adamw` is refused by name with the way out, writing nothing.
    func testTheCommandLineTrainsWithAdamWAndRefusesToWriteIt() throws {
        let (golden, model) = try GoldenRun.load("branches_adamw")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-adamw-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        try NpyArray(shape: [golden.labels.count] + golden.shape, descr: "<f4", values: .float(golden.inputs)).serialized()
            .write(to: data.appendingPathComponent("inputs.npy"))
        try golden.labels.map(String.init).joined(separator: "\n").write(to: data.appendingPathComponent("labels.txt"),
                                                                           atomically: true, encoding: .utf8)
        let path = dir.appendingPathComponent("model.mlmodel"), log = dir.appendingPathComponent("run.jsonl")
        try model.write(to: path)
        let train = try runUpdraft(["train", path.path, "--train", data.path, "--optimizer", "adamw", "--weight-decay",
                                    "\(golden.weightDecay!)", "--no-shuffle", "--compute-units", "cpuOnly", "--log", log.path,
                                    "--out", dir.appendingPathComponent("trained.mlmodel").path], cacheDirectory: dir)
        XCTAssertEqual(train.status, 0, train.stderr)
        let events = try String(contentsOf: log, encoding: .utf8).split(separator: "\n")
            .compactMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(events.first { $0["event"] as? String == "trainingBegin" }?["optimizer"] as? String, "adamw")
        let losses = events.filter { $0["event"] as? String == "miniBatchEnd" }.compactMap { $0["loss"] as? Double }
        XCTAssertEqual(losses.count, golden.losses.count)
        for (a, b) in zip(losses, golden.losses) { XCTAssertEqual(a, b, accuracy: 2e-5 * max(1, abs(b)), "\(losses)") }
        let refused = dir.appendingPathComponent("refused.mlmodel")
        let make = try runUpdraft(["make-updatable", path.path, "--optimizer", "adamw", "--out", refused.path], cacheDirectory: dir)
        XCTAssertNotEqual(make.status, 0)
        XCTAssertTrue(make.stderr.contains("AdamW has no place in a Core ML model"), make.stderr)
        XCTAssertTrue(make.stderr.contains("updraft train --optimizer adamw"), make.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: refused.path))
    }
}
