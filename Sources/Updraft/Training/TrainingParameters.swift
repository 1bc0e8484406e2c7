/// The hyperparameters a training run uses, named as Core ML names them (MLParameterKey), plus
/// weight decay, which Core ML lacks.
public enum ParameterKey: String, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    case learningRate, momentum, miniBatchSize, epochs, shuffle, seed, beta1, beta2, eps, weightDecay

    public var description: String { rawValue }

    /// Optimizer settings may change during training (`resume(withParameters:)`); the rest are fixed
    /// once training starts, as in Core ML.
    public var isOptimizerSetting: Bool {
        switch self {
        case .learningRate, .momentum, .beta1, .beta2, .eps, .weightDecay: return true
        case .miniBatchSize, .epochs, .shuffle, .seed: return false
        }
    }
}

public enum ParameterValue: Hashable, Sendable, CustomStringConvertible {
    case int(Int)
    case double(Double)
    case bool(Bool)

    public var description: String {
        switch self {
        case let .int(v): return "\(v)"
        case let .double(v): return "\(v)"
        case let .bool(v): return "\(v)"
        }
    }
    public var doubleValue: Double? {
        switch self {
        case let .int(v): return Double(v)
        case let .double(v): return v
        case .bool: return nil
        }
    }
    public var intValue: Int? {
        switch self {
        case let .int(v): return v
        case let .double(v): return v.rounded() == v ? Int(exactly: v) : nil
        case .bool: return nil
        }
    }
}

/// What values a parameter may take (Core ML's numericConstraint: a range or an enumerated set).
public enum ParameterConstraint: Hashable, Sendable, CustomStringConvertible {
    case any
    case range(min: Double, max: Double)
    case set([Double])

    public func allows(_ value: ParameterValue) -> Bool {
        guard let v = value.doubleValue else { return self == .any }
        switch self {
        case .any: return true
        case let .range(lo, hi): return v >= lo && v <= hi
        case let .set(values): return values.contains(v)
        }
    }

    public var description: String {
        func fmt(_ d: Double) -> String { d.rounded() == d && abs(d) < 1e15 ? String(Int(d)) : "\(d)" }
        switch self {
        case .any: return "any value"
        case let .range(lo, hi): return "\(fmt(lo))...\(fmt(hi))"
        case let .set(values): return "{" + values.sorted().map(fmt).joined(separator: ", ") + "}"
        }
    }
}

/// A parameter as the model describes it: default and allowed values (MLParameterDescription).
public struct ParameterDescription: Hashable, Sendable {
    public var key: ParameterKey
    public var defaultValue: ParameterValue
    public var constraint: ParameterConstraint
    public init(key: ParameterKey, defaultValue: ParameterValue, constraint: ParameterConstraint = .any) {
        self.key = key; self.defaultValue = defaultValue; self.constraint = constraint
    }
}

public enum OptimizerKind: String, Hashable, Sendable { case sgd, adam }

/// The values in force for a run: the model's defaults with the caller's overrides, each checked
/// against what the model allows.
public struct TrainingParameters: Hashable, Sendable, CustomStringConvertible {
    public private(set) var values: [ParameterKey: ParameterValue]
    public var optimizer: OptimizerKind

    /// Defaults from the model's descriptions, then `overrides`, each validated.
    /// Parameters the model does not describe get Updraft's defaults (momentum 0, Adam's betas, …).
    public init(optimizer: OptimizerKind, descriptions: [ParameterDescription],
                overrides: [ParameterKey: ParameterValue] = [:]) throws {
        self.optimizer = optimizer
        var v: [ParameterKey: ParameterValue] = [
            .learningRate: .double(0.001), .momentum: .double(0), .miniBatchSize: .int(8), .epochs: .int(1),
            .shuffle: .bool(true), .seed: .int(0), .beta1: .double(0.9), .beta2: .double(0.999), .eps: .double(1e-8),
            .weightDecay: .double(0),
        ]
        for d in descriptions { v[d.key] = d.defaultValue }
        self.values = v
        for (key, value) in overrides.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            try set(key, value, descriptions: descriptions)
        }
    }

    /// Sets one value after checking its type and the model's constraint.
    public mutating func set(_ key: ParameterKey, _ value: ParameterValue, descriptions: [ParameterDescription]) throws {
        let normalized = try Self.normalize(key, value)
        if let d = descriptions.first(where: { $0.key == key }), !d.constraint.allows(normalized) {
            throw UpdraftError(.invalidArgument,
                "\(key) = \(normalized) is not allowed by this model: allowed values are \(d.constraint)",
                hint: "pick one of the allowed values, or change the model's update parameters")
        }
        values[key] = normalized
    }

    static func normalize(_ key: ParameterKey, _ value: ParameterValue) throws -> ParameterValue {
        switch key {
        case .miniBatchSize, .epochs, .seed:
            guard let i = value.intValue else { throw UpdraftError(.invalidArgument, "\(key) must be an integer, got \(value)") }
            if key != .seed && i < 1 { throw UpdraftError(.invalidArgument, "\(key) must be at least 1, got \(i)") }
            return .int(i)
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
