import Foundation
import Updraft

/// One task of `updraft-bench soak`, drawn from the soak's seed and the task's index alone (so a
/// seed replays the same kinds, hyperparameters, bad inputs and cancel points; only when a
/// cancellation after a delay lands depends on timing).
struct SoakPlan: Codable {
    enum Kind: String, Codable, CaseIterable {
        /// `TasksBench`'s tasks: the network's last layer trains; its embeddings go into a k-NN pipeline.
        case lastLayer = "last-layer", knnPipeline = "knn-pipeline"
        /// Vectors appended to a bare k-NN; the image network trained on a PNG folder.
        case bareKnn = "knn", imageNetwork = "image-network"
        /// Bad inputs, each of which must fail with an `UpdraftError`.
        case corruptModel = "corrupt-model", unreadableImage = "unreadable-image",
             badHyperparameter = "bad-hyperparameter", missingFile = "missing-file"

        var isBadInput: Bool { [.corruptModel, .unreadableImage, .badHyperparameter, .missingFile].contains(self) }
    }

    /// When the task is cancelled: never, before it starts, from the progress handler after a
    /// mini-batch, or from another thread after a delay.
    enum Cancel: Codable, Equatable {
        case none, beforeStart, afterMiniBatch(Int), afterMicroseconds(Int)
    }

    var index: Int
    var kind: Kind
    var dataSeed: UInt64
    var learningRate: Double
    var momentum: Double
    var miniBatchSize: Int
    var epochs: Int
    var neighbors: Int
    var cancel: Cancel
    /// Which bad input of the kind (see `SoakTasks.makeBad`), or which image folder / optimizer.
    var variant: Int

    /// Kinds by share of 100: 36 last-layer, 18 pipeline, 14 bare k-NN, 12 image network, 5 each bad input.
    static let shares: [(Kind, Int)] = [(.lastLayer, 36), (.knnPipeline, 18), (.bareKnn, 14), (.imageNetwork, 12),
                                        (.corruptModel, 5), (.unreadableImage, 5), (.badHyperparameter, 5), (.missingFile, 5)]

    /// Plan `index` of `seed`; with `kinds`, a kind outside them is replaced by one of them (the other draws stay).
    init(index: Int, seed: UInt64, kinds: [Kind]? = nil) {
        self.index = index
        var rng = SplitMix64(seed: seed &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(index) &* 0xBF58_476D_1CE4_E5B9)
        func pick<T>(_ values: [T]) -> T { values[Int(rng.next() % UInt64(values.count))] }
        var roll = Int(rng.next() % 100)
        kind = .lastLayer
        for (k, share) in Self.shares {
            if roll < share { kind = k; break }
            roll -= share
        }
        if let kinds, !kinds.isEmpty, !kinds.contains(kind) { kind = kinds[index % kinds.count] }
        // A few data sets and settings, so that identical plans recur and must give identical models.
        dataSeed = 1000 + rng.next() % 6
        learningRate = pick([0.005, 0.01, 0.02, 0.05])
        momentum = pick([0, 0.5, 0.9])
        miniBatchSize = kind == .imageNetwork ? pick([4, 8]) : pick([8, 16, 32])
        epochs = kind == .imageNetwork ? pick([2, 3]) : pick([1, 2, 3])
        neighbors = pick([1, 3, 5])
        variant = Int(rng.next() % 12)
        // One valid task in five is cancelled: before it starts, after a mini-batch, or after a delay.
        switch kind.isBadInput ? 99 : Int(rng.next() % 20) {
        case 0: cancel = .beforeStart
        case 1, 2: cancel = .afterMiniBatch(1 + Int(rng.next() % 12))
        case 3: cancel = .afterMicroseconds(Int(rng.next() % 40_000))
        default: cancel = .none
        }
    }

    /// Completed tasks with the same key must have byte-equal models (nil: no such check).
    var key: String? {
        guard cancel == .none, !kind.isBadInput else { return nil }
        switch kind {
        case .lastLayer: return "\(kind.rawValue) data \(dataSeed) lr \(learningRate) m \(momentum) batch \(miniBatchSize) epochs \(epochs)"
        case .knnPipeline, .bareKnn: return "\(kind.rawValue) data \(dataSeed) k \(neighbors) batch \(miniBatchSize)"
        case .imageNetwork: return "\(kind.rawValue) adam \(variant % 2) lr \(learningRate) batch \(miniBatchSize) epochs \(epochs)"
        default: return nil
        }
    }
}
