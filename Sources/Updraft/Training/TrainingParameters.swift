/// The hyperparameters a training run uses, named as Core ML names them (MLParameterKey), plus
/// weight decay, which Core ML lacks.
public enum ParameterKey: String, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    /// The Core ML keys (learningRate, momentum, miniBatchSize, epochs, shuffle, seed, beta1, beta2, eps), and `weightDecay`, Updraft's own L2 penalty on the weights.
    case learningRate, momentum, miniBatchSize, epochs, shuffle, seed, beta1, beta2, eps, weightDecay

    /// The Core ML key name (`"learningRate"`, `"miniBatchSize"`, ...), as used in options and history files.
    public var description: String { rawValue }

    /// The `updraft make-updatable` option that sets this parameter's allowed values.
    var makeUpdatableOption: String? {
        switch self {
        case .learningRate: return "allowed-learning-rate"
        case .miniBatchSize: return "allowed-batch-sizes"
        case .epochs: return "allowed-epochs"
        case .momentum, .beta1, .beta2, .eps: return "allowed-\(rawValue)"
        case .shuffle, .seed, .weightDecay: return nil
        }
    }

    /// Optimizer settings may change during training (`resume(withParameters:)`); the rest are fixed
    /// once training starts, as in Core ML.
    public var isOptimizerSetting: Bool {
        switch self {
        case .learningRate, .momentum, .beta1, .beta2, .eps, .weightDecay: return true
        case .miniBatchSize, .epochs, .shuffle, .seed: return false
        }
    }
}

/// Parameter values use the Core ML layer's value type (`HyperparameterValue`: double, int, bool).
public typealias ParameterValue = HyperparameterValue

extension HyperparameterValue {
    /// The value as a Double (an int converted); nil for a bool.
    public var doubleValue: Double? {
        switch self {
        case let .int(v): return Double(v)
        case let .double(v): return v
        case .bool: return nil
        }
    }
    /// The value as an Int: an int, or a double with no fractional part; nil otherwise (and for a bool).
    public var intValue: Int? {
        switch self {
        case let .int(v): return Int(exactly: v)
        case let .double(v): return v.rounded() == v ? Int(exactly: v) : nil
        case .bool: return nil
        }
    }
}

extension ParameterKey {
    /// The model's name for this key, if the model can describe it (weight decay is Updraft's own).
    var hyperparameterKey: HyperparameterKey? { HyperparameterKey(rawValue: rawValue) }
}

/// The values in force for a run: the model's defaults with the caller's overrides, each checked
/// against what the model allows.
public struct TrainingParameters: Hashable, Sendable, CustomStringConvertible {
    /// Every key's value in force, normalized (integers for size/epochs/seed, bool for shuffle, doubles otherwise).
    public private(set) var values: [ParameterKey: ParameterValue]
    /// The optimizer the model's update parameters name (SGD or Adam); decides which settings apply.
    public var optimizer: OptimizerKind

    /// The model's defaults (`hyperparameters`, as `NetworkGraph.hyperparameters` lists them), then
    /// `overrides`, each checked against what the model allows. Parameters the model does not describe
    /// get Core ML's defaults (momentum 0, Adam's betas, …) and weight decay 0.
    public init(optimizer: OptimizerKind, hyperparameters: [Hyperparameter],
                overrides: [ParameterKey: ParameterValue] = [:]) throws {
        let descriptions = hyperparameters
        self.optimizer = optimizer
        var v: [ParameterKey: ParameterValue] = [
            .learningRate: .double(0.001), .momentum: .double(0), .miniBatchSize: .int(8), .epochs: .int(1),
            .shuffle: .bool(true), .seed: .int(0), .beta1: .double(0.9), .beta2: .double(0.999), .eps: .double(1e-8),
            .weightDecay: .double(0),
        ]
        for h in descriptions {
            if let key = ParameterKey(rawValue: h.key.rawValue) { v[key] = try Self.normalize(key, h.defaultValue) }
        }
        self.values = v
        for (key, value) in overrides.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            try set(key, value, descriptions: descriptions)
        }
    }

    /// Sets one value after checking its type and the model's constraint.
    public mutating func set(_ key: ParameterKey, _ value: ParameterValue, descriptions: [Hyperparameter]) throws {
        let normalized = try Self.normalize(key, value)
        if let d = descriptions.first(where: { $0.key == key.hyperparameterKey }), !d.allows(normalized) {
            throw UpdraftError(.invalidArgument,
                "\(key) = \(normalized) is not allowed by this model: allowed values are \(d.constraint)",
                hint: key.makeUpdatableOption.map {
                    "pick one of the allowed values, or widen them in the model: updraft make-updatable MODEL --\($0) ... --out MODEL (CoreMLModel.makingUpdatable)"
                } ?? "pick one of the allowed values")
        }
        values[key] = normalized
    }

    static func normalize(_ key: ParameterKey, _ value: ParameterValue) throws -> ParameterValue {
        switch key {
        case .miniBatchSize, .epochs, .seed:
            guard let i = value.intValue else { throw UpdraftError(.invalidArgument, "\(key) must be an integer, got \(value)") }
            if key != .seed && i < 1 { throw UpdraftError(.invalidArgument, "\(key) must be at least 1, got \(i)") }
            return .int(Int64(i))
        case .shuffle:
            if case let .bool(b) = value { return .bool(b) }
            if let i = value.intValue, i == 0 || i == 1 { return .bool(i == 1) }
            throw UpdraftError(.invalidArgument, "shuffle must be true or false, got \(value)")
        default:
            guard let d = value.doubleValue, d.isFinite else { throw UpdraftError(.invalidArgument, "\(key) must be a number, got \(value)") }
            if d < 0 { throw UpdraftError(.invalidArgument, "\(key) must not be negative, got \(d)") }
            if key == .learningRate && d == 0 { throw UpdraftError(.invalidArgument, "learningRate must be greater than 0") }
            if (key == .beta1 || key == .beta2 || key == .momentum) && d >= 1 {
                throw UpdraftError(.invalidArgument, "\(key) must be below 1, got \(d)")
            }
            return .double(d)
        }
    }

    /// The value in force for `key` (every key has one once initialized).
    public subscript(key: ParameterKey) -> ParameterValue? { values[key] }

    /// Step size, > 0; default 0.001.
    public var learningRate: Double { values[.learningRate]?.doubleValue ?? 0.001 }
    /// SGD momentum, in [0, 1); default 0 (SGD only).
    public var momentum: Double { values[.momentum]?.doubleValue ?? 0 }
    /// Examples per mini-batch, >= 1; default 8.
    public var miniBatchSize: Int { values[.miniBatchSize]?.intValue ?? 8 }
    /// Passes over the training data, >= 1; default 1.
    public var epochs: Int { values[.epochs]?.intValue ?? 1 }
    /// Whether the examples are reshuffled every epoch; default true.
    public var shuffle: Bool { if case let .bool(b)? = values[.shuffle] { return b }; return true }
    /// Seed of the per-epoch shuffle order (the Int64 value's bit pattern); default 0. Augmentation has its own seed.
    public var seed: UInt64 { UInt64(bitPattern: Int64(values[.seed]?.intValue ?? 0)) }
    /// Adam's first-moment decay, in [0, 1); default 0.9.
    public var beta1: Double { values[.beta1]?.doubleValue ?? 0.9 }
    /// Adam's second-moment decay, in [0, 1); default 0.999.
    public var beta2: Double { values[.beta2]?.doubleValue ?? 0.999 }
    /// Adam's denominator epsilon, >= 0; default 1e-8.
    public var eps: Double { values[.eps]?.doubleValue ?? 1e-8 }
    /// L2 weight decay, >= 0, added to the gradient as `weightDecay * w` before the optimizer step; default 0 (off). Updraft's own; Core ML has none.
    public var weightDecay: Double { values[.weightDecay]?.doubleValue ?? 0 }

    /// The SGD settings (learning rate, momentum, weight decay) as Float, for the optimizer kernels.
    public var sgd: SGDHyperparameters {
        SGDHyperparameters(learningRate: Float(learningRate), momentum: Float(momentum), weightDecay: Float(weightDecay))
    }
    /// The Adam settings (learning rate, betas, eps, weight decay) as Float, for the optimizer kernels.
    public var adam: AdamHyperparameters {
        AdamHyperparameters(learningRate: Float(learningRate), beta1: Float(beta1), beta2: Float(beta2),
                            eps: Float(eps), weightDecay: Float(weightDecay))
    }

    /// One line: the optimizer, then the settings that apply to it (`sgd: learningRate=0.01 momentum=0 ...`).
    public var description: String {
        let keys: [ParameterKey] = optimizer == .sgd
            ? [.learningRate, .momentum, .weightDecay, .miniBatchSize, .epochs, .shuffle, .seed]
            : [.learningRate, .beta1, .beta2, .eps, .weightDecay, .miniBatchSize, .epochs, .shuffle, .seed]
        return "\(optimizer): " + keys.map { "\($0)=\(values[$0]!)" }.joined(separator: " ")
    }
}
