import Foundation
@testable import UpdraftCore
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// Locates committed fixtures (Tests/UpdraftTests/Fixtures is excluded from the target's sources).
enum Fixtures {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures")
    static func url(_ name: String) -> URL { root.appendingPathComponent(name) }
    static let repositoryRoot = root.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

/// A PyTorch training trajectory written by Tests/Scripts/make_golden.py.
struct GoldenRun: Decodable {
    struct Layer: Decodable { var weights: [Float]; var bias: [Float] }
    var optimizer: String
    var batch: Int
    var epochs: Int
    var shape: [Int]
    var inputs: [Float]
    var labels: [Int]
    var losses: [Double]
    var final: [String: Layer]
    /// The run's weight decay (AdamW's runs); nil: none.
    var weightDecay: Double?

    static func load(_ name: String) throws -> (GoldenRun, CoreMLModel) {
        let json = try JSONDecoder().decode(GoldenRun.self, from: Data(contentsOf: Fixtures.url("golden/\(name).json")))
        let model = try CoreMLModel(contentsOf: Fixtures.url("golden/\(name).mlmodel"))
        return (json, model)
    }

    /// The run's losses with `executor`: its epochs of mini-batches of `batch` examples, in order, one
    /// training step each.
    func trainLosses(_ executor: Executor, parameters: TrainingParameters) throws -> [Double] {
        let provider = try ArrayBatchProvider(examples: examples)
        var losses: [Double] = []
        for _ in 0..<epochs {
            for start in stride(from: 0, to: provider.count, by: batch) {
                let b = try provider.batch(at: start..<min(start + batch, provider.count))
                losses.append(try executor.trainStep(b, parameters: parameters).loss)
            }
        }
        return losses
    }

    /// The examples as an in-memory batch provider.
    var examples: [TrainingExample] {
        let item = shape.reduce(1, *)
        return labels.indices.map { i in
            TrainingExample(input: Tensor(shape: Shape(shape), data: Array(inputs[i * item..<(i + 1) * item])),
                            target: .classIndex(labels[i]))
        }
    }
}
