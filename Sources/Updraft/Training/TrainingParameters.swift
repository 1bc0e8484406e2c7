/// The hyperparameters a training run uses, named as Core ML names them (MLParameterKey), plus
/// weight decay, which Core ML lacks.
public enum ParameterKey: String, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    case learningRate, momentum, miniBatchSize, epochs, shuffle, seed, beta1, beta2, eps, weightDecay

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
    public var doubleValue: Double? {
        switch self {
        case let .int(v): return Double(v)
        case let .double(v): return v
        case .bool: return nil
        }
    }
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
    public private(set) var values: [ParameterKey: ParameterValue]
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

    public subscript(key: ParameterKey) -> ParameterValue? { values[key] }

    public var learningRate: Double { values[.learningRate]?.doubleValue ?? 0.001 }
    public var momentum: Double { values[.momentum]?.doubleValue ?? 0 }
    public var miniBatchSize: Int { values[.miniBatchSize]?.intValue ?? 8 }
    public var epochs: Int { values[.epochs]?.intValue ?? 1 }
    public var shuffle: Bool { if case let .bool(b)? = values[.shuffle] { return b }; return true }
    public var seed: UInt64 { UInt64(bitPattern: Int64(values[.seed]?.intValue ?? 0)) }
    public var beta1: Double { values[.beta1]?.doubleValue ?? 0.9 }
    public var beta2: Double { values[.beta2]?.doubleValue ?? 0.999 }
    public var eps: Double { values[.eps]?.doubleValue ?? 1e-8 }
    public var weightDecay: Double { values[.weightDecay]?.doubleValue ?? 0 }

    public var sgd: SGDHyperparameters {
        SGDHyperparameters(learningRate: Float(learningRate), momentum: Float(momentum), weightDecay: Float(weightDecay))
    }
    public var adam: AdamHyperparameters {
        AdamHyperparameters(learningRate: Float(learningRate), beta1: Float(beta1), beta2: Float(beta2),
                            eps: Float(eps), weightDecay: Float(weightDecay))
    }

    public var description: String {
        let keys: [ParameterKey] = optimizer == .sgd
            ? [.learningRate, .momentum, .weightDecay, .miniBatchSize, .epochs, .shuffle, .seed]
            : [.learningRate, .beta1, .beta2, .eps, .weightDecay, .miniBatchSize, .epochs, .shuffle, .seed]
        return "\(optimizer): " + keys.map { "\($0)=\(values[$0]!)" }.joined(separator: " ")
    }
}
