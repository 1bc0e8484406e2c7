import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftPlacement
import UpdraftData

/// A pipeline whose last model is a k-NN, run forward: the neural networks before it joined into
/// one extractor (`CoreMLModel.pipelineNetwork`) on the device the scheduler picks, whose output
/// feature (the k-NN's input) comes back to the host for the exact search (`NearestNeighbors`).
/// A pipeline of a k-NN alone reads the pipeline's input as the k-NN does.
final class PipelineNearestNeighborsPredictor: ModelPredictor {
    /// The earlier models joined; nil when the k-NN is the pipeline's only model.
    let extractor: NeuralNetworkPredictor?
    /// The feature the k-NN reads (the extractor's output).
    let feature: String
    let nearestNeighbors: NearestNeighborsPredictor

    /// - Parameter searches: false when only the extractor's vectors are wanted (an update appends
    ///   them): the search stays on the host and no device is opened for it.
    init(pipeline model: CoreMLModel, configuration: UpdateConfiguration, searches: Bool = true, batchSize: Int, batchSource: String,
         environment: [String: String], warn: @escaping (String) -> Void) throws {
        let models = try model.pipelineModels()
        guard let last = models.last, case let .kNearestNeighbors(knn) = last.spec.body else {
            throw UpdraftError(.invalidModel, "the pipeline's last model is not a k-nearest-neighbors classifier")
        }
        guard let input = last.spec.description.inputs.first else {
            throw UpdraftError(.invalidModel, "the pipeline's k-NN declares no input feature", hint: "`updraft inspect` lists the problems")
        }
        feature = input.name
        let device = searches ? try NearestNeighborsDevice.choose(configuration, environment: environment,
                                                                  work: NearestNeighborsDevice.work(knn, queries: configuration.placement.job?.examples),
                                                                  warn: warn) : nil
        nearestNeighbors = try NearestNeighborsPredictor(model: last, k: configuration.nearestNeighbors.k, unknownDistance: configuration.nearestNeighbors.unknownDistance,
                                                         device: device, warn: warn)
        if models.count > 1 {
            let joined = try model.pipelineNetwork(through: models.count - 2, output: feature)
            let e = try NeuralNetworkPredictor(model: joined, configuration: configuration, batchSize: batchSize, batchSource: batchSource,
                                               environment: environment, warn: warn)
            let width = e.runner.graph.blobShapes[feature].map(\.itemCount) ?? 0
            guard width == Int(knn.dimension) else {
                throw UpdraftError(.invalidModel,
                    "the k-NN stores \(knn.dimension)-dimensional samples, but the models before it output '\(feature)' of \(width) values",
                    hint: "make the k-NN's dimension the extractor's output size (`updraft create knn` sets it)")
            }
            extractor = e
        } else {
            extractor = nil
        }
    }

    var deviceName: String { extractor?.deviceName ?? nearestNeighbors.deviceName }
    var classLabels: [String]? { nearestNeighbors.classLabels }

    func checkMemory(batchSize: Int, work: MemoryPreflight.Work) throws { try extractor?.checkMemory(batchSize: batchSize, work: work) }
    func prepare(batchSize: Int, work: MemoryPreflight.Work) -> Double { extractor?.prepare(batchSize: batchSize, work: work) ?? 0 }

    /// The k-NN's input vectors `[n, D]` of the examples `range` of `data` (the extractor's output,
    /// or the inputs themselves), and their targets.
    func vectors(_ data: BatchProvider, range: Range<Int>, position: String) throws -> (vectors: Tensor, targets: [TrainingExample.Target]) {
        guard let extractor else {
            let b = try data.batch(at: range)
            return (b.inputs, b.targets)
        }
        let (out, targets) = try extractor.outputs(data, range: range, blob: feature, position: position)
        return (out.reshaped(Shape([range.count, out.count / max(1, range.count)])), targets)
    }

    func classify(_ data: BatchProvider, range: Range<Int>, position: String) throws
        -> (probabilities: Tensor, targets: [TrainingExample.Target]) {
        let (v, targets) = try vectors(data, range: range, position: position)
        return (try nearestNeighbors.probabilities(v), targets)
    }

    func classify(_ input: Tensor, position: String) throws -> Tensor {
        try nearestNeighbors.classify(try vector(input, position: position), position: position)
    }

    func neighbors(_ input: Tensor, position: String) throws -> [PredictedNeighbor]? {
        try nearestNeighbors.neighbors(try vector(input, position: position), position: position)
    }

    /// The k-NN's input vector for one preprocessed input.
    private func vector(_ input: Tensor, position: String) throws -> Tensor {
        guard let extractor else { return input }
        let v = try extractor.runner.run(position: position) { try $0.predict(input.reshaped(Shape([1] + input.shape.dims)), blob: feature) }
        return v.reshaped(Shape([v.count]))
    }

    func loss(_ data: BatchProvider, range: Range<Int>, position: String) throws -> (loss: Double, count: Int) {
        let (p, targets) = try classify(data, range: range, position: position)
        return (crossEntropy(p, targets), targets.count)
    }
}

/// The mean cross-entropy of class probabilities `[n, classes]` against class-index targets (a
/// class given no probability costs -log 1e-12; other targets are left out of the sum).
func crossEntropy(_ probabilities: Tensor, _ targets: [TrainingExample.Target]) -> Double {
    let classes = probabilities.count / max(1, targets.count)
    var sum = 0.0
    for (i, t) in targets.enumerated() {
        guard case let .classIndex(c) = t, c < classes else { continue }
        sum -= log(max(Double(probabilities.data[i * classes + c]), 1e-12))
    }
    return sum / Double(max(1, targets.count))
}
