/// How an updatable model trains (NetworkUpdateParameters): loss, optimizer, epochs, shuffling,
/// each hyperparameter with its default and the values a caller may override it with.

/// DoubleRange: inclusive bounds. Not a `ClosedRange`, because a file may hold min > max.
public struct DoubleBounds: Hashable, Sendable {
    public var min: Double
    public var max: Double
    public init(min: Double, max: Double) { self.min = min; self.max = max }
    public func contains(_ v: Double) -> Bool { v >= min && v <= max }
}

/// DoubleParameter: a default and an optional allowed range.
public struct DoubleParameter: Hashable, Sendable {
    public var defaultValue: Double
    public var range: DoubleBounds?
    public init(defaultValue: Double, range: DoubleBounds? = nil) { self.defaultValue = defaultValue; self.range = range }
    public func allows(_ v: Double) -> Bool { v.isFinite && (range?.contains(v) ?? true) }
}

/// Int64Parameter's oneof AllowedValues.
public enum Int64Constraint: Hashable, Sendable {
    case range(min: Int64, max: Int64)
    case set([Int64])

    public func allows(_ v: Int64) -> Bool {
        switch self {
        case let .range(lo, hi): return v >= lo && v <= hi
        case let .set(values): return values.contains(v)
        }
    }
}

public struct Int64Parameter: Hashable, Sendable {
    public var defaultValue: Int64
    public var allowed: Int64Constraint?
    public init(defaultValue: Int64, allowed: Int64Constraint? = nil) { self.defaultValue = defaultValue; self.allowed = allowed }
    public func allows(_ v: Int64) -> Bool { allowed?.allows(v) ?? true }
}

public struct BoolParameter: Hashable, Sendable {
    public var defaultValue: Bool
    public init(defaultValue: Bool) { self.defaultValue = defaultValue }
}

public enum LossKind: String, Hashable, Sendable {
    /// categoricalCrossEntropyLossLayer (10): input is a softmax output, target a class.
    case categoricalCrossEntropy
    /// meanSquaredErrorLossLayer (11).
    case meanSquaredError
}

/// LossLayer: name, kind, the blob it reads and the target feature it compares against.
public struct LossLayerSpec: Hashable, Sendable {
    public var name: String
    /// nil when the file holds a loss type Updraft does not know (see `unknownTypeField`).
    public var kind: LossKind?
    public var input: String
    public var target: String
    /// The LossLayer oneof field number of an unknown loss type.
    public var unknownTypeField: Int?

    public init(name: String, kind: LossKind?, input: String, target: String, unknownTypeField: Int? = nil) {
        self.name = name; self.kind = kind; self.input = input; self.target = target; self.unknownTypeField = unknownTypeField
    }
}

public enum OptimizerKind: String, Hashable, Sendable { case sgd, adam }

/// Optimizer: SGDOptimizer {learningRate, miniBatchSize, momentum} or
/// AdamOptimizer {learningRate, miniBatchSize, beta1, beta2, eps}. Absent parameters are nil.
public struct OptimizerSpec: Hashable, Sendable {
    public var kind: OptimizerKind
    public var learningRate: DoubleParameter?
    public var miniBatchSize: Int64Parameter?
    /// SGD only.
    public var momentum: DoubleParameter?
    /// Adam only.
    public var beta1: DoubleParameter?
    public var beta2: DoubleParameter?
    public var eps: DoubleParameter?

    public init(kind: OptimizerKind, learningRate: DoubleParameter?, miniBatchSize: Int64Parameter?,
                momentum: DoubleParameter? = nil, beta1: DoubleParameter? = nil, beta2: DoubleParameter? = nil,
                eps: DoubleParameter? = nil) {
        self.kind = kind; self.learningRate = learningRate; self.miniBatchSize = miniBatchSize
        self.momentum = momentum; self.beta1 = beta1; self.beta2 = beta2; self.eps = eps
    }
}

public struct UpdateParameters: Hashable, Sendable {
    public var lossLayers: [LossLayerSpec]
    public var optimizer: OptimizerSpec?
    public var epochs: Int64Parameter?
    public var shuffle: BoolParameter?
    public var seed: Int64Parameter?

    public init(lossLayers: [LossLayerSpec] = [], optimizer: OptimizerSpec? = nil, epochs: Int64Parameter? = nil,
                shuffle: BoolParameter? = nil, seed: Int64Parameter? = nil) {
        self.lossLayers = lossLayers; self.optimizer = optimizer; self.epochs = epochs
        self.shuffle = shuffle; self.seed = seed
    }
}

// MARK: One list of hyperparameters (Core ML's MLParameterKey view)

/// Core ML's names for the update hyperparameters (MLParameterKey).
public enum HyperparameterKey: String, CaseIterable, Hashable, Sendable {
    case learningRate, miniBatchSize, momentum, beta1, beta2, eps, epochs, shuffle, seed
}

public enum HyperparameterValue: Hashable, Sendable, CustomStringConvertible {
    case double(Double)
    case int(Int64)
    case bool(Bool)

    /// An integer value from an `Int` (Core ML stores them as Int64), so `.int(epochs)` compiles.
    public static func int(_ value: Int) -> HyperparameterValue { .int(Int64(value)) }

    public var description: String {
        switch self {
        case let .double(d): return formatHyperparameter(d)
        case let .int(i): return String(i)
        case let .bool(b): return String(b)
        }
    }
}

public enum HyperparameterConstraint: Hashable, Sendable, CustomStringConvertible {
    case none
    case doubleRange(DoubleBounds)
    case int(Int64Constraint)

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
    public var key: HyperparameterKey
    public var defaultValue: HyperparameterValue
    public var constraint: HyperparameterConstraint
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

func formatHyperparameter(_ d: Double) -> String {
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
            switch o.kind {
            case .sgd:
                double(.momentum, o.momentum, fallback: 0)
            case .adam:
                double(.beta1, o.beta1, fallback: 0.9)
                double(.beta2, o.beta2, fallback: 0.999)
                double(.eps, o.eps, fallback: 1e-8)
            }
        }
        int(.epochs, epochs, fallback: nil)
        out.append(Hyperparameter(key: .shuffle, defaultValue: .bool(shuffle?.defaultValue ?? true),
                                  constraint: .none, inModel: shuffle != nil))
        int(.seed, seed, fallback: 0)
        return out
    }

    func hyperparameter(_ key: HyperparameterKey) -> Hyperparameter? { hyperparameters.first { $0.key == key } }
}
