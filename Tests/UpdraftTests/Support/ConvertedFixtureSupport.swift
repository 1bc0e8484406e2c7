import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftData
@testable import UpdraftTraining

/// A torchvision model converted by coremltools and PyTorch's fine-tuning of it, written by
/// Tests/Scripts/make_converted_fixtures.py into Fixtures/converted:
/// `<name>.mlmodel` (made updatable by coremltools), `<name>.converted.mlmodel` (as converted),
/// `<name>.inputs.npy` (the batch) and `<name>.json` (this).
struct ConvertedFixture: Decodable {
    struct Layer: Decodable { var weights: [Float]; var bias: [Float] }
    var architecture: String
    /// "image" (pixels 0...255, the model's scaler maps them) or "tensor".
    var input: String
    var shape: [Int]
    var optimizer: String
    var batch: Int
    var steps: Int
    /// The Core ML layers fine-tuned, in the model's order.
    var trained: [String]
    /// Core ML layer type (with the activation, pooling or reduce kind) -> how many the model has.
    var layerTypes: [String: Int]
    var inputsFile: String
    var labels: [Int]
    /// PyTorch's batch loss at each step (before that step's update).
    var losses: [Double]
    /// The trained layers' weights and biases after `steps` updates, in Core ML's layout.
    var final: [String: Layer]
    /// The optimizer's settings as the script gave them to coremltools and PyTorch
    /// (lr and momentum for SGD; lr, beta1, beta2 and eps for Adam).
    var hyperparameters: [String: Double]

    static let folder = "converted"

    /// Every architecture the script makes, listed explicitly (a test checks the folder holds these).
    static let names = [
        "squeezenet1_1", "mobilenet_v2", "mobilenet_v3_small", "resnet18", "efficientnet_b0", "densenet121",
        "alexnet", "googlenet", "mnasnet", "regnet", "vgg_bn", "mlp", "layernorm_mlp",
    ]

    static func url(_ file: String) -> URL { Fixtures.url("\(folder)/\(file)") }

    static func load(_ name: String) throws -> ConvertedFixture {
        try JSONDecoder().decode(ConvertedFixture.self, from: Data(contentsOf: url("\(name).json")))
    }

    /// The fixed batch, one example per row of the `.npy` array.
    func inputBatch() throws -> TrainingBatch {
        let array = try NpyArray(contentsOf: ConvertedFixture.url(inputsFile))
        guard case let .float(values) = array.values, array.shape.first == labels.count else {
            throw UpdraftError(.data, "\(inputsFile): expected float32 of shape [\(labels.count), ...], got \(array.descr) \(array.shape)")
        }
        let item = values.count / labels.count
        let examples = labels.indices.map { i in
            TrainingExample(input: Tensor(shape: Shape(Array(array.shape.dropFirst())), data: Array(values[i * item..<(i + 1) * item])),
                            target: .classIndex(labels[i]))
        }
        return try ArrayBatchProvider(examples: examples).batch(at: 0..<labels.count)
    }

    /// The as-converted model made updatable by Updraft (`updraft make-updatable`'s library call) with
    /// what the script asked of coremltools: the same layers, loss, optimizer and hyperparameters.
    func madeUpdatableByUpdraft() throws -> CoreMLModel {
        let converted = try CoreMLModel(contentsOf: ConvertedFixture.url("\(architecture).converted.mlmodel"))
        var o = UpdatableModelOptions(layers: trained, loss: .categoricalCrossEntropy, lossInput: "probs", lossName: "loss",
                                      optimizer: optimizer == "sgd" ? .sgd : .adam)
        o.learningRate = hyperparameters["lr"]
        o.miniBatchSize = Int64(batch)
        o.epochs = Int64(steps)
        o.shuffle = false
        if optimizer == "sgd" {
            o.momentum = hyperparameters["momentum"]
        } else {
            o.beta1 = hyperparameters["beta1"]; o.beta2 = hyperparameters["beta2"]; o.eps = hyperparameters["eps"]
        }
        return try converted.makingUpdatable(o)
    }

    /// What training `model` for `steps` steps on the batch gives on `backend`: the per-step losses,
    /// and the trained layers' weights (and biases) before and after.
    func train(_ model: CoreMLModel, on backend: Backend) throws
        -> (losses: [Double], before: [String: (Tensor, Tensor?)], after: [String: (Tensor, Tensor?)]) {
        let graph = try NetworkGraph(model: model)
        let training = try TrainingGraph(graph: graph)
        let kind: OptimizerKind = optimizer == "sgd" ? .sgd : .adam
        let hyper = try TrainingParameters(optimizer: kind, hyperparameters: graph.hyperparameters)
        let executor = try Executor(training: training, optimizer: kind, backend: backend)
        var before: [String: (Tensor, Tensor?)] = [:], after: [String: (Tensor, Tensor?)] = [:]
        for layer in trained { before[layer] = try executor.weights(ofLayer: layer) }
        let batch = try inputBatch()
        var losses: [Double] = []
        for _ in 0..<steps { losses.append(try executor.trainStep(batch, parameters: hyper).loss) }
        for layer in trained { after[layer] = try executor.weights(ofLayer: layer) }
        return (losses, before, after)
    }

    /// The largest difference between Updraft's and PyTorch's update (after - before) of `values`,
    /// relative to PyTorch's largest update of that tensor.
    static func updateError(before: [Float], after: [Float], expected: [Float]) -> (error: Float, largest: Float) {
        var largest: Float = 0, worst: Float = 0
        for i in before.indices {
            let mine = after[i] - before[i], theirs = expected[i] - before[i]
            largest = max(largest, abs(theirs))
            worst = max(worst, abs(mine - theirs))
        }
        return (largest > 0 ? worst / largest : worst, largest)
    }
}
