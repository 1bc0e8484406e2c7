import Foundation
import UpdraftCore

/// What `CoreMLModel.makingUpdatable(_:)` (and `updraft make-updatable`) should set: the layers to
/// train, the loss, the optimizer and each hyperparameter's default and allowed values.
///
/// Every field is optional: nil means "keep what the model has", and for a model that has no update
/// parameters yet, "what coremltools' NeuralNetworkBuilder writes": `make_updatable` + `set_*` with
/// `SgdParams()` / `AdamParams()` defaults (learning rate 0.01 in [0, 1], mini-batch 10 of {10},
/// momentum 0 in [0, 1], beta1 0.9, beta2 0.999 and eps 1e-8 each in [0, 1]), `set_epochs()` (1 of
/// {1}) and `set_shuffle()` (shuffle on, no seed). A new default without new allowed values keeps
/// the model's allowed values, which must then contain it; a new model gets coremltools' (a range
/// [0, 1] for the real-valued ones, the one-element set {default} for mini-batch size and epochs).
public struct UpdatableModelOptions: Hashable, Sendable {
    /// The layers to train (convolution or innerProduct). Given, they replace the model's updatable
    /// layers (the others are frozen); nil keeps the model's (which must have some).
    public var layers: [String]?
    /// nil: the model's loss, else categorical cross-entropy for a classifier or when the loss input
    /// comes from a softmax (converted classifiers are often plain networks), mean squared error otherwise.
    public var loss: LossKind?
    /// The blob the loss reads. nil: the model's, else a classifier's probabilities output (the
    /// output of its softmax) or the model's only output.
    public var lossInput: String?
    /// The loss layer's name. nil: the model's, else "lossLayer".
    public var lossName: String?
    /// nil: the model's optimizer, else SGD. Switching keeps the learning rate and mini-batch size.
    public var optimizer: OptimizerKind?

    /// The learning rate's default. nil: the model's, else 0.01.
    public var learningRate: Double?
    /// Allowed learning rates. nil: the model's, else [0, 1].
    public var allowedLearningRate: DoubleBounds?
    /// The mini-batch size's default. nil: the model's, else 10.
    public var miniBatchSize: Int64?
    /// Allowed mini-batch sizes (range or set). nil: the model's, else the set {default}.
    public var allowedMiniBatchSizes: Int64Constraint?
    /// SGD only.
    public var momentum: Double?
    /// SGD only: allowed momentum values. nil: the model's, else [0, 1].
    public var allowedMomentum: DoubleBounds?
    /// Adam only.
    public var beta1: Double?
    /// Adam only: allowed beta1 values. nil: the model's, else [0, 1].
    public var allowedBeta1: DoubleBounds?
    /// Adam only: the second-moment decay's default. nil: the model's, else 0.999.
    public var beta2: Double?
    /// Adam only: allowed beta2 values. nil: the model's, else [0, 1].
    public var allowedBeta2: DoubleBounds?
    /// Adam only: the epsilon's default. nil: the model's, else 1e-8.
    public var eps: Double?
    /// Adam only: allowed eps values. nil: the model's, else [0, 1].
    public var allowedEps: DoubleBounds?
    /// The number of epochs' default. nil: the model's, else 1.
    public var epochs: Int64?
    /// Allowed epoch counts (range or set). nil: the model's, else the set {default}.
    public var allowedEpochs: Int64Constraint?
    /// nil: the model's, else on (coremltools always turns it on).
    public var shuffle: Bool?
    /// nil: the model's, else none stored (Core ML's default seed 0).
    public var seed: Int64?

    /// Options that change only what is passed; hyperparameters are set through the properties.
    public init(layers: [String]? = nil, loss: LossKind? = nil, lossInput: String? = nil, lossName: String? = nil,
                optimizer: OptimizerKind? = nil) {
        self.layers = layers; self.loss = loss; self.lossInput = lossInput; self.lossName = lossName
        self.optimizer = optimizer
    }

    /// coremltools' defaults (update_optimizer_utils.py: SgdParams, AdamParams, RangeParam; builder.py: set_epochs).
    public static let defaultLearningRate = 0.01
    /// Mini-batch size coremltools' SgdParams/AdamParams write: 10.
    public static let defaultMiniBatchSize: Int64 = 10
    /// SGD momentum coremltools writes: 0.
    public static let defaultMomentum = 0.0
    /// Adam beta1 coremltools writes: 0.9.
    public static let defaultBeta1 = 0.9
    /// Adam beta2 coremltools writes: 0.999.
    public static let defaultBeta2 = 0.999
    /// Adam eps coremltools writes: 1e-8.
    public static let defaultEps = 1e-8
    /// Epochs coremltools' set_epochs() writes: 1.
    public static let defaultEpochs: Int64 = 1
    /// RangeParam's default bounds.
    public static let defaultRange = DoubleBounds(min: 0, max: 1)
    /// The loss layer name used when neither the model nor the options give one.
    public static let defaultLossName = "lossLayer"

    /// Whether anything about the update parameters (not the layers) is asked to change.
    var changesUpdateParameters: Bool {
        loss != nil || lossInput != nil || lossName != nil || optimizer != nil
            || learningRate != nil || allowedLearningRate != nil || miniBatchSize != nil || allowedMiniBatchSizes != nil
            || momentum != nil || allowedMomentum != nil || beta1 != nil || allowedBeta1 != nil
            || beta2 != nil || allowedBeta2 != nil || eps != nil || allowedEps != nil
            || epochs != nil || allowedEpochs != nil || shuffle != nil || seed != nil
    }
}

// MARK: Reading allowed values from text (the command line's syntax)

public extension DoubleBounds {
    /// "MIN..MAX" (inclusive), e.g. "0..1" or "1e-6..0.5".
    static func parse(_ text: String, what: String) throws -> DoubleBounds {
        let parts = text.components(separatedBy: "..")
        guard parts.count == 2, let lo = Double(parts[0].trimmed), let hi = Double(parts[1].trimmed),
              lo.isFinite, hi.isFinite else {
            throw UpdraftError(.invalidArgument, "\(what) '\(text)' is not a range MIN..MAX", hint: "for example 0..1 or 1e-6..0.5")
        }
        guard lo <= hi else { throw UpdraftError(.invalidArgument, "\(what) \(text) is empty (MIN > MAX)") }
        return DoubleBounds(min: lo, max: hi)
    }
}

public extension Int64Constraint {
    /// "MIN..MAX" (an inclusive range) or "A,B,C" (a set), e.g. "1..1000" or "8,16,32".
    static func parse(_ text: String, what: String) throws -> Int64Constraint {
        if text.contains("..") {
            let parts = text.components(separatedBy: "..")
            guard parts.count == 2, let lo = Int64(parts[0].trimmed), let hi = Int64(parts[1].trimmed) else {
                throw UpdraftError(.invalidArgument, "\(what) '\(text)' is not a range MIN..MAX of integers", hint: "for example 1..1000")
            }
            guard lo <= hi else { throw UpdraftError(.invalidArgument, "\(what) \(text) is empty (MIN > MAX)") }
            return .range(min: lo, max: hi)
        }
        var values: [Int64] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard let v = Int64(part.trimmingCharacters(in: .whitespaces)) else {
                throw UpdraftError(.invalidArgument, "\(what) '\(text)': '\(part)' is not an integer",
                                   hint: "a set is comma-separated (8,16,32), a range MIN..MAX (1..1000)")
            }
            guard !values.contains(v) else { throw UpdraftError(.invalidArgument, "\(what) '\(text)' lists \(v) twice") }
            values.append(v)
        }
        return .set(values)
    }
}

private extension String {
    var trimmed: String { trimmingCharacters(in: .whitespaces) }
}
