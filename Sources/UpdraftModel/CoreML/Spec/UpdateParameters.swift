/// How an updatable model trains (NetworkUpdateParameters): loss, optimizer, epochs, shuffling,
/// each hyperparameter with its default and the values a caller may override it with.

/// DoubleRange: inclusive bounds. Not a `ClosedRange`, because a file may hold min > max.
public struct DoubleBounds: Hashable, Sendable {
    /// Lower bound (inclusive).
    public var min: Double
    /// Upper bound (inclusive).
    public var max: Double
    /// Bounds as given; `min > max` is kept (the validator reports it).
    public init(min: Double, max: Double) { self.min = min; self.max = max }
    /// Whether `min <= v <= max` (never true when min > max or v is NaN).
    public func contains(_ v: Double) -> Bool { v >= min && v <= max }
}

/// DoubleParameter: a default and an optional allowed range.
public struct DoubleParameter: Hashable, Sendable {
    /// DoubleParameter.defaultValue: used when the caller does not override the parameter.
    public var defaultValue: Double
    /// DoubleParameter.range; nil means any finite value is allowed.
    public var range: DoubleBounds?
    /// A parameter with `defaultValue` and, optionally, an allowed range.
    public init(defaultValue: Double, range: DoubleBounds? = nil) { self.defaultValue = defaultValue; self.range = range }
    /// Whether `v` is finite and inside `range` (any finite value when there is no range).
    public func allows(_ v: Double) -> Bool { v.isFinite && (range?.contains(v) ?? true) }
}

/// Int64Parameter's oneof AllowedValues.
public enum Int64Constraint: Hashable, Sendable {
    /// Int64Range: any value from `min` to `max`, both included.
    case range(min: Int64, max: Int64)
    /// Int64Set: only the listed values (e.g. the allowed mini-batch sizes).
    case set([Int64])

    /// Whether `v` is inside the range or in the set.
    public func allows(_ v: Int64) -> Bool {
        switch self {
        case let .range(lo, hi): return v >= lo && v <= hi
        case let .set(values): return values.contains(v)
        }
    }
}

/// Int64Parameter: an integer hyperparameter (mini-batch size, epochs, seed) with a default and optional allowed values.
public struct Int64Parameter: Hashable, Sendable {
    /// Int64Parameter.defaultValue: used when the caller does not override the parameter.
    public var defaultValue: Int64
    /// Int64Parameter.AllowedValues (a range or a set); nil means any value is allowed.
    public var allowed: Int64Constraint?
    /// A parameter with `defaultValue` and, optionally, the values allowed as overrides.
    public init(defaultValue: Int64, allowed: Int64Constraint? = nil) { self.defaultValue = defaultValue; self.allowed = allowed }
    /// Whether `v` satisfies `allowed` (always true without a constraint).
    public func allows(_ v: Int64) -> Bool { allowed?.allows(v) ?? true }
}

/// BoolParameter: a boolean hyperparameter (shuffle); it has a default and no constraint.
public struct BoolParameter: Hashable, Sendable {
    /// BoolParameter.defaultValue: used when the caller does not override the parameter.
    public var defaultValue: Bool
    /// A parameter whose default is `defaultValue`.
    public init(defaultValue: Bool) { self.defaultValue = defaultValue }
}

/// The loss function of a LossLayer (its oneof case); the raw value is the Updraft spelling.
public enum LossKind: String, Hashable, Sendable {
    /// categoricalCrossEntropyLossLayer (10): input is a softmax output, target a class.
    case categoricalCrossEntropy
    /// meanSquaredErrorLossLayer (11).
    case meanSquaredError
}

/// LossLayer: name, kind, the blob it reads and the target feature it compares against.
public struct LossLayerSpec: Hashable, Sendable {
    /// LossLayer.name: the loss layer's name, unique among the model's layers.
    public var name: String
    /// nil when the file holds a loss type Updraft does not know (see `unknownTypeField`).
    public var kind: LossKind?
    /// The loss's input blob: the network output it scores (a softmax output for cross-entropy).
    public var input: String
    /// The loss's target: the name of the training input holding the expected values or class labels.
    public var target: String
    /// The LossLayer oneof field number of an unknown loss type.
    public var unknownTypeField: Int?

    /// A loss layer; `unknownTypeField` only for a loss type Updraft cannot read (then `kind` is nil).
    public init(name: String, kind: LossKind?, input: String, target: String, unknownTypeField: Int? = nil) {
        self.name = name; self.kind = kind; self.input = input; self.target = target; self.unknownTypeField = unknownTypeField
    }
}

/// Optimizer: SGDOptimizer {learningRate, miniBatchSize, momentum} or
/// AdamOptimizer {learningRate, miniBatchSize, beta1, beta2, eps}. Absent parameters are nil.
public struct OptimizerSpec: Hashable, Sendable {
    /// Which optimizer this is; decides which of momentum/beta1/beta2/eps apply.
    public var kind: OptimizerKind
    /// Step size; Core ML requires it in the model (no fallback).
    public var learningRate: DoubleParameter?
    /// Examples per update step; Core ML requires it in the model (no fallback).
    public var miniBatchSize: Int64Parameter?
    /// SGD only.
    public var momentum: DoubleParameter?
    /// Adam only.
    public var beta1: DoubleParameter?
    /// Adam only: exponential decay rate of the second-moment estimate (Core ML's fallback 0.999).
    public var beta2: DoubleParameter?
    /// Adam only: the epsilon added to the denominator for numerical stability (Core ML's fallback 1e-8).
    public var eps: DoubleParameter?

    /// An optimizer of `kind`; pass nil for parameters the model does not state, and only the ones that kind uses.
    public init(kind: OptimizerKind, learningRate: DoubleParameter?, miniBatchSize: Int64Parameter?,
                momentum: DoubleParameter? = nil, beta1: DoubleParameter? = nil, beta2: DoubleParameter? = nil,
                eps: DoubleParameter? = nil) {
        self.kind = kind; self.learningRate = learningRate; self.miniBatchSize = miniBatchSize
        self.momentum = momentum; self.beta1 = beta1; self.beta2 = beta2; self.eps = eps
    }
}

/// NetworkUpdateParameters: the model's training configuration (loss, optimizer, epochs, shuffle, seed).
public struct UpdateParameters: Hashable, Sendable {
    /// NetworkUpdateParameters.lossLayers; Core ML accepts exactly one.
    public var lossLayers: [LossLayerSpec]
    /// NetworkUpdateParameters.optimizer; nil when the file has none (the validator reports it).
    public var optimizer: OptimizerSpec?
    /// Number of passes over the training data; required by Core ML.
    public var epochs: Int64Parameter?
    /// Whether the training data is reshuffled each epoch (Core ML's fallback: true).
    public var shuffle: BoolParameter?
    /// Seed for shuffling (Core ML's fallback: 0).
    public var seed: Int64Parameter?

    /// Update parameters; every part defaults to absent.
    public init(lossLayers: [LossLayerSpec] = [], optimizer: OptimizerSpec? = nil, epochs: Int64Parameter? = nil,
                shuffle: BoolParameter? = nil, seed: Int64Parameter? = nil) {
        self.lossLayers = lossLayers; self.optimizer = optimizer; self.epochs = epochs
        self.shuffle = shuffle; self.seed = seed
    }
}

// MARK: One list of hyperparameters (Core ML's MLParameterKey view)

/// Core ML's names for the update hyperparameters (MLParameterKey).
public enum HyperparameterKey: String, CaseIterable, Hashable, Sendable {
    /// Each names the MLParameterKey of the same name: the optimizer's learningRate, momentum (SGD), beta1/beta2/eps (Adam), and the run's miniBatchSize, epochs, shuffle and seed.
    case learningRate, miniBatchSize, momentum, beta1, beta2, eps, epochs, shuffle, seed
}

/// A hyperparameter value as Core ML types it: double, Int64 or bool.
public enum HyperparameterValue: Hashable, Sendable, CustomStringConvertible {
    /// A DoubleParameter value (learningRate, momentum, beta1, beta2, eps).
    case double(Double)
    /// An Int64Parameter value (miniBatchSize, epochs, seed).
    case int(Int64)
    /// A BoolParameter value (shuffle).
    case bool(Bool)

    /// An integer value from an `Int` (Core ML stores them as Int64), so `.int(epochs)` compiles.
    public static func int(_ value: Int) -> HyperparameterValue { .int(Int64(value)) }

    /// The value as text: whole doubles without a fraction (`3`), others in Swift's shortest form.
    public var description: String {
        switch self {
        case let .double(d): return formatHyperparameter(d)
        case let .int(i): return String(i)
        case let .bool(b): return String(b)
        }
    }
}

/// The values a hyperparameter may be overridden with.
public enum HyperparameterConstraint: Hashable, Sendable, CustomStringConvertible {
    /// No constraint stored: any value of the right type is allowed (bool parameters, or a parameter without a range).
    case none
    /// A DoubleParameter's range: the value must lie within these bounds.
    case doubleRange(DoubleBounds)
    /// An Int64Parameter's AllowedValues: a range or a set of integers.
    case int(Int64Constraint)

    /// `any`, `[min, max]` for a range, or `{a, b, …}` for a set.
    public var description: String {
        switch self {
        case .none: return "any"
        case let .doubleRange(r): return "[\(formatHyperparameter(r.min)), \(formatHyperparameter(r.max))]"
        case let .int(.range(lo, hi)): return "[\(lo), \(hi)]"
        case let .int(.set(values)): return "{" + values.map(String.init).joined(separator: ", ") + "}"
        }
    }
}

/// One hyperparameter: its default, the values a caller may override it with, and whether the
/// model states it (`inModel`) or the default is Updraft's fallback (Core ML's documented defaults:
/// momentum 0, beta1 0.9, beta2 0.999, eps 1e-8, shuffle true, seed 0).
public struct Hyperparameter: Hashable, Sendable {
    /// Which hyperparameter this is (its MLParameterKey name).
    public var key: HyperparameterKey
    /// The value training uses unless overridden: the model's default, or Core ML's fallback when `inModel` is false.
    public var defaultValue: HyperparameterValue
    /// The model's allowed range or set; `.none` when it states none (or the value is a fallback).
    public var constraint: HyperparameterConstraint
    /// True when the model states this parameter; false when `defaultValue` is Core ML's documented fallback.
    public var inModel: Bool

    /// Whether `value` is an allowed override (Core ML throws at training start otherwise).
    public func allows(_ value: HyperparameterValue) -> Bool {
        switch (constraint, value) {
        case (.none, .double(let d)): return d.isFinite
        case (.none, _): return true
        case let (.doubleRange(r), .double(d)): return d.isFinite && r.contains(d)
        case let (.int(c), .int(i)): return c.allows(i)
        default: return false
        }
    }
}

package func formatHyperparameter(_ d: Double) -> String {
    if d == d.rounded(), abs(d) < 1e15 { return String(Int64(d)) }
    return String(d)
}

public extension UpdateParameters {
    /// Every hyperparameter that applies to this model's optimizer, in MLParameterKey order.
    /// Learning rate, mini-batch size and epochs appear only when the model states them (the
    /// validator reports them missing); the others fall back to Core ML's defaults.
    var hyperparameters: [Hyperparameter] {
        var out: [Hyperparameter] = []
        func double(_ key: HyperparameterKey, _ p: DoubleParameter?, fallback: Double?) {
            if let p {
                out.append(Hyperparameter(key: key, defaultValue: .double(p.defaultValue),
                                          constraint: p.range.map { .doubleRange($0) } ?? .none, inModel: true))
            } else if let fallback {
                out.append(Hyperparameter(key: key, defaultValue: .double(fallback), constraint: .none, inModel: false))
            }
        }
        func int(_ key: HyperparameterKey, _ p: Int64Parameter?, fallback: Int64?) {
            if let p {
                out.append(Hyperparameter(key: key, defaultValue: .int(p.defaultValue),
                                          constraint: p.allowed.map { .int($0) } ?? .none, inModel: true))
            } else if let fallback {
                out.append(Hyperparameter(key: key, defaultValue: .int(fallback), constraint: .none, inModel: false))
            }
        }
        if let o = optimizer {
            double(.learningRate, o.learningRate, fallback: nil)
            int(.miniBatchSize, o.miniBatchSize, fallback: nil)
            let type = o.kind.optimizerType
            for f in type.coreML?.parameters ?? [] { double(f.key, o[f.key], fallback: type.fallback(f.key)) }
        }
        int(.epochs, epochs, fallback: nil)
        out.append(Hyperparameter(key: .shuffle, defaultValue: .bool(shuffle?.defaultValue ?? true),
                                  constraint: .none, inModel: shuffle != nil))
        int(.seed, seed, fallback: 0)
        return out
    }

    func hyperparameter(_ key: HyperparameterKey) -> Hyperparameter? { hyperparameters.first { $0.key == key } }
}
