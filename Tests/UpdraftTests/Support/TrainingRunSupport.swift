import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// One training run through `UpdateTask`, with what the multi-device and fallback tests compare.
struct TrainingRun {
    var task: UpdateTask
    var state: UpdateTaskState
    var error: Error?
    /// Every mini-batch's loss, in order.
    var losses: [Double]
    var epochs: [TrainingMetrics]
    /// Updatable layer -> trained weights and bias.
    var weights: [String: (weights: [Float], bias: [Float]?)]
    var warnings: [String]
    /// Warnings as the handler saw them (must equal `warnings`).
    var handlerWarnings: [String]

    /// Trains `model` on `data` with the configuration `configure` makes.
    static func train(_ model: CoreMLModel, _ data: BatchProvider,
                      configure: (inout UpdateConfiguration) throws -> Void = { _ in }) throws -> TrainingRun {
        var config = UpdateConfiguration()
        try configure(&config)
        let losses = Locked<[Double]>([]), epochs = Locked<[TrainingMetrics]>([]), seen = Locked<[String]>([])
        let task = UpdateTask(model: model, trainingData: data, configuration: config, handlers: UpdateHandlers(
            progress: { ctx in
                if ctx.event == .miniBatchEnd, let m = ctx.metrics { losses.append(m.lossValue) }
                if ctx.event == .epochEnd, let m = ctx.metrics { epochs.append(m) }
            },
            warning: { seen.append($0) }))
        let final = task.run()
        var weights: [String: (weights: [Float], bias: [Float]?)] = [:]
        if final.task.state == .completed {
            for layer in try NetworkGraph(model: model).updatableLayers {
                let (w, b) = try task.weights(ofLayer: layer.name)
                weights[layer.name] = (w.data, b?.data)
            }
        }
        return TrainingRun(task: task, state: final.task.state, error: final.error, losses: losses.value, epochs: epochs.value,
                           weights: weights, warnings: task.warnings, handlerWarnings: seen.value)
    }

    /// The largest difference between two runs' weights (infinity when the layers differ).
    func maxWeightDifference(from other: TrainingRun) -> Float {
        guard Set(weights.keys) == Set(other.weights.keys), !weights.isEmpty else { return .infinity }
        var worst: Float = 0
        for (name, mine) in weights {
            guard let theirs = other.weights[name], mine.weights.count == theirs.weights.count,
                  (mine.bias?.count ?? 0) == (theirs.bias?.count ?? 0) else { return .infinity }
            for (a, b) in zip(mine.weights + (mine.bias ?? []), theirs.weights + (theirs.bias ?? [])) { worst = max(worst, abs(a - b)) }
        }
        return worst
    }
}

/// Asserts two runs completed with the same losses and weights within `tolerance` (relative for the
/// losses, absolute for the weights).
func assertSameTraining(_ a: TrainingRun, _ b: TrainingRun, tolerance: Double = 1e-5, _ what: String = "",
                        file: StaticString = #filePath, line: UInt = #line) {
    XCTAssertEqual(a.state, .completed, "\(what): \(a.error.map { "\($0)" } ?? "")", file: file, line: line)
    XCTAssertEqual(b.state, .completed, "\(what): \(b.error.map { "\($0)" } ?? "")", file: file, line: line)
    XCTAssertEqual(a.losses.count, b.losses.count, "\(what): mini-batch counts differ", file: file, line: line)
    for (x, y) in zip(a.losses, b.losses) {
        XCTAssertEqual(x, y, accuracy: tolerance * max(1, abs(y)), "\(what): losses \(a.losses) vs \(b.losses)", file: file, line: line)
    }
    let d = a.maxWeightDifference(from: b)
    XCTAssertLessThanOrEqual(d, Float(tolerance), "\(what): weights differ by \(d)", file: file, line: line)
}

/// A small model with SqueezeNet's shape: a strided convolution and a ceil-mode max pool, one fire
/// module (squeeze 1x1, expand 1x1 and 3x3 concatenated), conv10 to the classes with ReLU, global
/// average pooling, flatten, a fully connected head and softmax. The expands, conv10 and the head
/// train (gradients flow through concat, ReLU and pooling); conv1 and the squeeze are the frozen prefix.
enum SqueezeShaped {
    static let classes = 4

    static func model(optimizer: OptimizerKind = .sgd, batch: Int64 = 4, colorSpace: ImageColorSpace = .rgb,
                      scaler: ImageScaler? = nil) throws -> CoreMLModel {
        let image = ImageFeatureType(width: 15, height: 15, colorSpace: colorSpace)
        var b = try ModelBuilder(input: FeatureDescription(name: "image", type: .image(image)), seed: 7)
        if let scaler { b.setImageScaler(scaler) }
        try b.convolution("conv1", outputChannels: 8, kernel: (3, 3), stride: (2, 2))
        try b.activation("relu_conv1", .relu)
        try b.pooling("pool1", .max, kernel: (3, 3), stride: (2, 2), padding: .includeLastPixel(height: 0, width: 0))
        try b.fireModule("fire2", squeeze: 4, expand1x1: 6, expand3x3: 6)
        try b.convolution("conv10", outputChannels: classes, kernel: (1, 1))
        try b.activation("relu_conv10", .relu)
        try b.globalPoolClassifierHead(pool: "pool10", dense: "fullyconnected0", labels: .numbered(classes))
        try b.makeUpdatable(["fire2/expand1x1", "fire2/expand3x3", "conv10", "fullyconnected0"])
        try b.setCrossEntropyLoss(input: "probabilities")
        switch optimizer {
        case .sgd: b.setOptimizer(.sgd(learningRate: 0.05, miniBatchSize: batch, momentum: 0.9))
        case .adam: b.setOptimizer(.adam(learningRate: 0.01, miniBatchSize: batch))
        default: preconditionFailure("a model holds SGD or Adam; a run trains with AdamW (UpdateConfiguration.optimizer)")
        }
        b.setEpochs(2)
        b.setShuffle(true, seed: 3)
        return try b.build()
    }

    /// `count` random images (values in 0...1) with labels cycling through the classes.
    static func data(count: Int = 12, seed: UInt64 = 11) throws -> ArrayBatchProvider {
        let examples = (0..<count).map { i in
            TrainingExample(input: Tensor(shape: [3, 15, 15], uniformIn: 0...1, seed: seed &+ UInt64(i)),
                            target: .classIndex(i % classes))
        }
        return try ArrayBatchProvider(examples: examples)
    }
}

/// The runs the fallback and feature-cache tests make: the SqueezeNet-shaped model, 12 examples in
/// batches of 4, 2 epochs (6 steps, 3 per epoch, 8 trained tensors: 4 layers' weights and biases).
/// Snapshots are taken after every step unless `configure` says otherwise: the automatic interval
/// follows measured times, and what a test expects must not.
class SqueezeShapedRunTestCase: XCTestCase {
    let model = Result { try SqueezeShaped.model(batch: 4) }
    let data = Result { try SqueezeShaped.data(count: 12) }

    func run(_ configure: (inout UpdateConfiguration) throws -> Void) throws -> TrainingRun {
        try TrainingRun.train(try model.get(), try data.get()) { config in
            config.placement.snapshots = .every(1)
            try configure(&config)
        }
    }
}

/// Trains `model` on `data` on the Double reference, the fast CPU path and OpenCL: `steps` mini-batch
/// losses that move and agree within 1e-4 relative, and `firstLayer`'s weights, which must have
/// moved (its gradient came back `through` the layers under test), agreeing too.
func assertTrainsAlikeOnEveryBackend(_ model: CoreMLModel, _ data: BatchProvider, steps: Int, firstLayer: String,
                                     through what: String, file: StaticString = #filePath, line: UInt = #line) throws {
    func run(_ backend: Backend) throws -> (losses: [Double], weights: [Float]) {
        let run = try TrainingRun.train(model, data) { $0.placement.backends = (backend, backend) }
        XCTAssertEqual(run.state, .completed, "\(backend.name): \(run.error.map { "\($0)" } ?? "")", file: file, line: line)
        return (run.losses, try XCTUnwrap(run.weights[firstLayer], file: file, line: line).weights)
    }
    let reference = try run(ReferenceBackend())
    XCTAssertEqual(reference.losses.count, steps, file: file, line: line)
    XCTAssertNotEqual(reference.losses.first, reference.losses.last, "the loss must move", file: file, line: line)
    let moved = zip(try model.weights(ofLayer: firstLayer).data, reference.weights).map { abs($0 - $1) }.max() ?? 0
    XCTAssertGreaterThan(moved, 1e-4, "\(firstLayer) must train through \(what)", file: file, line: line)
    for backend in [CPUBackend() as Backend, OpenCLBackend(context: try OpenCLTestSupport.context())] {
        let other = try run(backend)
        XCTAssertEqual(other.losses.count, reference.losses.count, file: file, line: line)
        for (i, (a, b)) in zip(reference.losses, other.losses).enumerated() {
            XCTAssertEqual(a, b, accuracy: 1e-4 * max(abs(a), 1e-3), "\(backend.name), step \(i)", file: file, line: line)
        }
        for (a, b) in zip(reference.weights, other.weights) {
            XCTAssertEqual(a, b, accuracy: 1e-4 * max(abs(a), 1e-2), "\(backend.name): \(firstLayer) weights", file: file, line: line)
        }
    }
}

/// Forward-only runs of `graph` (`TrainingGraph.inference`, fused) on the CPU and, when present,
/// OpenCL, each through a `FailingBackend` that counts its calls: the probabilities and every blob,
/// fused away or not, match the Double reference. `check` then sees the backend, its counts and
/// the executor (after the probabilities and before the blobs are asked for).
func assertFusedForwardMatchesReference(_ graph: NetworkGraph, inputs: Tensor, file: StaticString = #filePath, line: UInt = #line,
                                        _ check: (Backend, FailingBackend, Executor) throws -> Void) throws {
    func maxDifference(_ a: Tensor, _ b: Tensor) -> Float { zip(a.data, b.data).map { abs($0 - $1) }.max() ?? .infinity }
    let reference = try Executor(training: .inference(graph: graph), optimizer: .sgd, backend: ReferenceBackend())
    var backends: [Backend] = [CPUBackend(threads: 2)]
    if let ctx = try? OpenCLTestSupport.context() { backends.append(OpenCLBackend(context: ctx)) }
    for backend in backends {
        let counted = FailingBackend(backend)
        let executor = try Executor(training: .inference(graph: graph), optimizer: .sgd, backend: counted)
        let probabilities = try executor.predict(inputs)
        XCTAssertLessThanOrEqual(maxDifference(probabilities, try reference.predict(inputs)), 1e-5, backend.name, file: file, line: line)
        try check(backend, counted, executor)
        for layer in graph.layers {
            let got = try executor.predict(inputs, blob: layer.output)
            let want = try reference.predict(inputs, blob: layer.output)
            XCTAssertEqual(got.shape, want.shape, "\(backend.name) \(layer.output)", file: file, line: line)
            let scale = max(1, want.data.map(abs).max() ?? 0)
            XCTAssertLessThanOrEqual(maxDifference(got, want) / scale, 1e-5, "\(backend.name) \(layer.output)", file: file, line: line)
        }
    }
}
