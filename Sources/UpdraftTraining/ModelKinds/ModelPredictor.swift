import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftPlacement
import UpdraftData

/// Forward work on a model of any kind: what `updraft evaluate` and `updraft predict` run, made by
/// the model's kind (`ModelKinds.predictor`). A network's predictor runs its graph forward on the
/// device the scheduler picks, with training's fallback when the device fails
/// (`NeuralNetworkPredictor`, over `InferenceRunner`).
public protocol ModelPredictor: AnyObject {
    /// Where the work runs now ("cpu", "opencl:…").
    var deviceName: String { get }
    /// A classifier's class labels, in the order of its probabilities; nil when the model is not a classifier.
    var classLabels: [String]? { get }
    /// Throws a named error when passes of `batchSize` examples would not fit the device's memory
    /// or the host's, saying the largest batch that fits.
    func checkMemory(batchSize: Int, work: MemoryPreflight.Work) throws
    /// Makes the device ready for `work` in passes of `batchSize` examples before the first one (a
    /// network's programs and primitives: `InferenceRunner.prepare`) and returns the seconds it
    /// took; 0 for a model with nothing to make. Optional: a first pass makes what it needs itself.
    /// `UPDRAFT_PREPARE=off` in the configuration's environment skips it.
    func prepare(batchSize: Int, work: MemoryPreflight.Work) -> Double
    /// The class probabilities `[n, classes]` of the examples `range` of `data`, and their targets.
    /// - Parameter position: where the work stands, for a fallback warning ("examples 1-32").
    func classify(_ data: BatchProvider, range: Range<Int>, position: String) throws
        -> (probabilities: Tensor, targets: [TrainingExample.Target])
    /// The class probabilities of one preprocessed input (the model input's shape, no batch axis).
    func classify(_ input: Tensor, position: String) throws -> Tensor
    /// The mean loss over the examples `range` of `data` and how many there were (how a model that
    /// is not a classifier is evaluated).
    func loss(_ data: BatchProvider, range: Range<Int>, position: String) throws -> (loss: Double, count: Int)
    /// The neighbours that answered one preprocessed input, nearest first, for a model that answers
    /// by neighbours (a k-NN); nil for other models.
    func neighbors(_ input: Tensor, position: String) throws -> [PredictedNeighbor]?
}

extension ModelPredictor {
    /// Default: nothing to make ahead.
    public func prepare(batchSize: Int, work: MemoryPreflight.Work) -> Double { 0 }

    /// Default: the model does not answer by neighbours.
    public func neighbors(_ input: Tensor, position: String) throws -> [PredictedNeighbor]? { nil }
}

/// One neighbour of a k-NN's answer, as `updraft predict --json` reports it.
public struct PredictedNeighbor: Hashable, Sendable {
    /// The sample's index among the model's samples.
    public var sample: Int
    /// Its label, as text.
    public var label: String
    /// Its Euclidean distance to the input (the square root of the model's squared-Euclidean distance).
    public var distance: Double
}

/// A network run forward: the graph on the devices the scheduler picks within the configuration's
/// compute units (or its pinned device), one device for the whole pass.
final class NeuralNetworkPredictor: ModelPredictor {
    let runner: InferenceRunner
    let classLabels: [String]?
    let preparesDevice: Bool

    /// - Parameter batchSource: what set `batchSize`, for the error when the network cannot hold it ("--batch-size").
    init(model: CoreMLModel, configuration: UpdateConfiguration, batchSize: Int, batchSource: String,
         environment: [String: String], warn: @escaping (String) -> Void) throws {
        let graph = try NetworkGraph(model: model)
        try SizeLimits.checkBatchSize(batchSize, graph: graph, source: batchSource)
        var config = configuration
        config.placement.dataParallelMode = .off
        let schedule = try Scheduler.schedule(graph: graph, batchSize: batchSize, configuration: config, environment: environment)
        schedule.warnings.forEach(warn)
        runner = try InferenceRunner(graph: graph, prefix: schedule.backends.prefix, tail: schedule.backends.tail,
                                     environment: configuration.environment, warn: warn)
        classLabels = graph.classLabels?.asStrings
        preparesDevice = configuration.environment.preparesDevices
    }

    var deviceName: String { runner.deviceName }

    func checkMemory(batchSize: Int, work: MemoryPreflight.Work) throws { try runner.checkMemory(batchSize: batchSize, work: work) }

    /// Prediction classifies one preprocessed tensor at a time; evaluation reads image batches as
    /// 8-bit pixels (`outputs`).
    func prepare(batchSize: Int, work: MemoryPreflight.Work) -> Double {
        guard preparesDevice else { return 0 }
        return runner.prepare(batchSize: batchSize, pixels: work != .prediction)
    }

    func classify(_ data: BatchProvider, range: Range<Int>, position: String) throws
        -> (probabilities: Tensor, targets: [TrainingExample.Target]) {
        let (p, targets) = try outputs(data, range: range, blob: nil, position: position)
        return (p, targets)
    }

    /// The blob `blob` (nil: the network's output) `[n, ...]` of the examples `range` of `data`, and their targets.
    func outputs(_ data: BatchProvider, range: Range<Int>, blob: String?, position: String) throws
        -> (outputs: Tensor, targets: [TrainingExample.Target]) {
        // Images go to the device as 8-bit samples (scaled there), other data as float tensors.
        if let pixels = data as? PixelBatchProvider, pixels.writesPixels {
            let b = try pixels.pixelBatch(at: range)
            return (try runner.run(position: position) { try $0.predict(b, blob: blob) }, b.targets)
        }
        // Float examples are stacked in the executor's staging array, not a new tensor per batch.
        let examples = try range.map { try data.example(at: $0) }
        return (try runner.run(position: position) { try $0.predict(examples: examples, blob: blob) }, examples.map(\.target))
    }

    func classify(_ input: Tensor, position: String) throws -> Tensor {
        try runner.run(position: position) { try $0.predict(input.reshaped(Shape([1] + input.shape.dims))) }
    }

    func loss(_ data: BatchProvider, range: Range<Int>, position: String) throws -> (loss: Double, count: Int) {
        let b = try data.batch(at: range)
        let r = try runner.run(position: position) { try $0.evaluate(b) }
        return (r.loss, r.count)
    }
}
