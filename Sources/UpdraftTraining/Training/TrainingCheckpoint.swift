import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftData

/// Where a run stands between two mini-batches: what continuing it exactly needs besides the
/// trained tensors and their optimizer state.
public struct TrainingPosition: Equatable, Sendable {
    /// The epoch under way (0-based); `epochs` once the last one has ended.
    public var epoch = 0
    /// Mini-batches of `epoch` completed.
    public var miniBatch = 0
    /// Optimizer steps completed in the whole run.
    public var steps = 0
    /// The epoch's running sums, for its mean loss and accuracy.
    var lossSum = 0.0, correct = 0, seen = 0, lastLoss = 0.0
    /// The epoch's mini-batch losses so far (the history keeps them).
    var batchLosses: [Double] = []

    /// The start of a run: epoch 0, no mini-batches or steps done.
    public init() {}

    /// A mini-batch completed.
    mutating func complete(_ r: Executor.BatchResult) {
        lossSum += r.loss * Double(r.count)
        correct += r.correct
        seen += r.count
        lastLoss = r.loss
        batchLosses.append(r.loss)
        miniBatch += 1
        steps += 1
    }

    /// The epoch ended: the next one starts.
    mutating func nextEpoch() {
        var next = TrainingPosition()
        next.epoch = epoch + 1
        next.steps = steps
        self = next
    }

    /// Where the run stands, 1-based epoch for people: "epoch 2, after mini-batch 5 (step 37)".
    public var description: String { "epoch \(epoch + 1), after mini-batch \(miniBatch) (step \(steps))" }
}

/// Everything a training run needs to continue exactly where it stood, so that a run killed and
/// resumed from its last checkpoint ends with the weights of a run never interrupted, bit for bit:
/// the trained tensors with their optimizer state (SGD velocities; Adam's moments and step count),
/// the position (epoch, mini-batch, the epoch's running sums), every hyperparameter in force
/// (including changes a handler made with `resume(withParameters:)`), the seeds, the batching and
/// augmentation settings, and the history so far. It also identifies what it belongs to: the
/// model (its layers and frozen weights) and the training data; resuming against anything else is
/// refused. The feature cache is not part of it: a resumed run recomputes what it needs.
///
/// Written next to the checkpoint model as `<model>.resume` (`url(forModel:)`): the model file stays
/// a plain Core ML model that coremltools opens. The state file holds the trained tensors itself,
/// so a kill between writing the two files (the state is written first) still resumes exactly.
public struct TrainingCheckpoint: Sendable {
    /// Identifies the model's structure and frozen weights (not the trained ones).
    public var modelFingerprint: UInt64
    /// Identifies the training data the run read; a resume with other data is refused.
    public var data: DataFingerprint
    /// The optimizer the run trained with (SGD or Adam); must match the model's when resuming.
    public var optimizer: OptimizerKind
    /// Every hyperparameter in force at the checkpoint.
    public var parameters: TrainingParameters
    /// Whether the run kept a short last mini-batch instead of wrapping round; a resumed run must agree.
    public var shortLastBatch: Bool
    /// The augmentation (flips, crop, seed) the run applied; a resumed run must use the same.
    public var augmentation: ImageAugmentation
    /// Whether the run stored its frozen activations as halves (`--frozen-fp16`); a resumed run must
    /// agree, or its losses would not continue the run's (checkpoints written before this was kept read as false).
    public var frozenActivationsHalfPrecision = false
    /// The checkpoint schedule of the run (continued by a resumed run unless it sets its own).
    public var checkpointEvery: Int?
    /// Checkpoint every N mini-batches, as `UpdateConfiguration.checkpoints.everyMiniBatches`; nil: not used.
    public var checkpointEveryMiniBatches: Int?
    /// Data-parallel shares in use (a resumed run given the same devices splits batches the same way).
    public var dataParallelShares: [Double]?
    /// Where the run trained, e.g. "cpu" (for messages).
    public var device: String
    /// Where the run stood: epoch, mini-batch, steps and the epoch's running sums.
    public var position: TrainingPosition
    /// Every ended epoch's metrics.
    public var history: [TrainingMetrics]
    /// The trained tensors with their optimizer state (SGD velocities, Adam moments and step count).
    public var state: ExecutorState

    /// The state file that belongs to a checkpoint model: `run.mlmodel` -> `run.resume`.
    public static func url(forModel model: URL) -> URL {
        model.deletingPathExtension().appendingPathExtension("resume")
    }

    /// Reads the state file of the checkpoint model at `model`.
    public static func read(forModel model: URL) throws -> TrainingCheckpoint {
        let url = url(forModel: model)
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw UpdraftError(.io, "\(model.lastPathComponent) has no resume state: \(url.lastPathComponent) is missing",
                               hint: "resume from a model written by `updraft train --checkpoint-every N` (or "
                                   + "--checkpoint-every-batches N, or a run stopped with Ctrl-C); to train on from "
                                   + "its weights as a new run, pass it as the model without --resume")
        }
        return try CheckpointFile.read(from: url)
    }
}

extension TrainingCheckpoint {
    /// The parameters of a resumed run: the checkpoint's, with `overrides` applied. Optimizer
    /// settings may change (as with `resume(withParameters:)`; the run is then no longer the
    /// uninterrupted one); the rest fix the run's shape and must stay as they were.
    public func resumedParameters(overrides: [ParameterKey: ParameterValue], hyperparameters: [Hyperparameter]) throws -> TrainingParameters {
        var p = parameters
        for (key, value) in overrides.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            let normalized = try TrainingParameters.normalize(key, value)
            if key.isOptimizerSetting {
                try p.set(key, normalized, descriptions: hyperparameters)
            } else if normalized != p[key] {
                throw UpdraftError(.invalidArgument,
                    "\(key) is \(p[key].map { "\($0)" } ?? "unset") in the checkpoint; a resumed run cannot change it to \(normalized)",
                    hint: "leave \(key) out when resuming (the checkpoint's value is used), or start a new run")
            }
        }
        return p
    }

    /// Throws unless the checkpoint belongs to `model` and `data` and the run settings agree.
    func check(model: CoreMLModel, data: BatchProvider, optimizer: OptimizerKind,
               configuration config: UpdateConfiguration) throws {
        guard try Self.fingerprint(of: model) == modelFingerprint else {
            throw UpdraftError(.invalidArgument,
                "the checkpoint belongs to another model: the layers or frozen weights of the model differ from the checkpoint's",
                hint: "resume with the checkpoint model itself (or the model the run started from)")
        }
        guard optimizer == self.optimizer else {
            throw UpdraftError(.invalidArgument, "the checkpoint trained with \(self.optimizer), this run's optimizer is \(optimizer)",
                               hint: "resume with the model the run started from and its optimizer (--optimizer, UpdateConfiguration.optimizer)")
        }
        if let difference = self.data.mismatch(try DataFingerprint(of: data)) {
            throw UpdraftError(.data, "the training data is not the checkpoint's: \(difference)",
                               hint: "resume with the same training data (same folder and files, or the same .npy arrays)")
        }
        guard config.data.shortLastBatch == shortLastBatch else {
            throw UpdraftError(.invalidArgument,
                "the checkpoint's run \(shortLastBatch ? "kept" : "wrapped round") its short last mini-batch; this run would \(config.data.shortLastBatch ? "keep" : "wrap") it",
                hint: "resume with the checkpoint's setting (--short-last-batch \(shortLastBatch ? "given" : "left out"))")
        }
        guard config.frozenActivationsHalfPrecision == frozenActivationsHalfPrecision else {
            throw UpdraftError(.invalidArgument,
                "the checkpoint's run stored its frozen activations in \(frozenActivationsHalfPrecision ? "half precision (--frozen-fp16)" : "fp32"); this run would store them in \(config.frozenActivationsHalfPrecision ? "half precision" : "fp32")",
                hint: "resume with the checkpoint's setting (--frozen-fp16 \(frozenActivationsHalfPrecision ? "given" : "left out"))")
        }
        guard config.data.augmentation == augmentation else {
            throw UpdraftError(.invalidArgument,
                "the checkpoint's run used augmentation \(Self.describe(augmentation)); this run would use \(Self.describe(config.data.augmentation))",
                hint: "resume with the checkpoint's augmentation and seed")
        }
        guard position.epoch <= parameters.epochs else {
            throw UpdraftError(.invalidArgument, "the checkpoint is at epoch \(position.epoch + 1) of a \(parameters.epochs)-epoch run")
        }
    }

    static func describe(_ a: ImageAugmentation) -> String {
        let flips = [a.horizontalFlip ? "flip" : nil, a.verticalFlip ? "vflip" : nil,
                     a.randomResizedCrop.map { "crop \($0.lowerBound)-\($0.upperBound)" }].compactMap { $0 }
        return flips.isEmpty ? "none" : flips.joined(separator: ",") + " (seed \(a.seed))"
    }

    /// The model's structure and frozen weights: the model with every updatable layer's weights and
    /// bias set to zeros, serialized and hashed. A checkpoint model and the model its run started
    /// from have the same fingerprint.
    public static func fingerprint(of model: CoreMLModel) throws -> UInt64 {
        var m = model
        for name in model.updatableLayerNames {
            guard let w = try? m.weights(ofLayer: name) else { continue }
            try m.setWeights(Tensor(shape: w.shape, data: [Float](repeating: 0, count: w.count)), ofLayer: name)
            if let b = try m.bias(ofLayer: name) {
                try m.setBias(Tensor(shape: b.shape, data: [Float](repeating: 0, count: b.count)), ofLayer: name)
            }
        }
        var h = FingerprintHasher()
        h.add(m.serializedBytes())
        return h.value
    }
}

/// Identifies a training set without keeping it: the example count, every target, the image files'
/// names (for image folders), and the inputs of a few examples.
public struct DataFingerprint: Equatable, Sendable {
    /// Number of examples in the data set.
    public var count: Int
    /// Hash of every example's target, in order.
    public var targets: UInt64
    /// Hash of the image files' folder/name pairs, in order; nil for data that is not an image folder.
    public var names: UInt64?
    /// Hash of the inputs of up to four examples (first, a third, two thirds, last).
    public var samples: UInt64

    init(count: Int, targets: UInt64, names: UInt64?, samples: UInt64) {
        self.count = count; self.targets = targets; self.names = names; self.samples = samples
    }

    /// Fingerprints `data`: reads every target and four examples' inputs. Throws when an example cannot be read.
    public init(of data: BatchProvider) throws {
        count = data.count
        var t = FingerprintHasher()
        for i in 0..<data.count {
            switch try data.target(at: i) {
            case let .classIndex(c): t.add(UInt64(bitPattern: Int64(c)))
            case let .values(v): t.add(floats: v.data)
            }
        }
        targets = t.value
        if let folder = data as? ImageFolderDataset {
            var n = FingerprintHasher()
            for f in folder.files { n.add(Array((f.deletingLastPathComponent().lastPathComponent + "/" + f.lastPathComponent).utf8)) }
            names = n.value
        } else {
            names = nil
        }
        var s = FingerprintHasher()
        for i in Set([0, data.count / 3, 2 * data.count / 3, data.count - 1]).sorted() where i >= 0 && i < data.count {
            s.add(floats: try data.example(at: i).input.data)
        }
        samples = s.value
    }

    /// What differs from `other` (the data now), or nil.
    func mismatch(_ other: DataFingerprint) -> String? {
        if count != other.count { return "it has \(other.count) examples, the checkpoint's run had \(count)" }
        if names != other.names { return "the image files are not the same (their names differ)" }
        if targets != other.targets { return "the labels (targets) of the examples differ" }
        if samples != other.samples { return "the contents of the examples differ" }
        return nil
    }
}

/// A 64-bit hash over bytes, words at a time (identity, not security).
struct FingerprintHasher {
    private(set) var value: UInt64 = 0xCBF2_9CE4_8422_2325

    mutating func add(_ word: UInt64) {
        value = (value ^ word) &* 0x0000_0100_0000_01B3
        value ^= value >> 29
    }

    mutating func add(_ bytes: [UInt8]) {
        add(UInt64(bytes.count))
        bytes.withUnsafeBytes { raw in
            var i = 0
            while i + 8 <= raw.count { add(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)); i += 8 }
            var tail: UInt64 = 0
            for (k, b) in raw[i...].enumerated() { tail |= UInt64(b) << (8 * UInt64(k)) }
            add(tail)
        }
    }

    mutating func add(floats: [Float]) {
        add(UInt64(floats.count))
        for f in floats { add(UInt64(f.bitPattern)) }
    }
}
