// The run settings' keys and values. They live beside the optimizers, which declare the keys they read
// (`Optimizer.settings`); `TrainingParameters` (Training/) holds a run's values.

/// The hyperparameters a training run uses, named as Core ML names them (MLParameterKey), plus
/// weight decay, which Core ML lacks.
public enum ParameterKey: String, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    /// The Core ML keys (learningRate, momentum, miniBatchSize, epochs, shuffle, seed, beta1, beta2, eps), and `weightDecay`, Updraft's own L2 penalty on the weights.
    case learningRate, momentum, miniBatchSize, epochs, shuffle, seed, beta1, beta2, eps, weightDecay

    /// The Core ML key name (`"learningRate"`, `"miniBatchSize"`, ...), as used in options and history files.
    public var description: String { rawValue }

    /// The `updraft make-updatable` option that sets this parameter's allowed values.
    package var makeUpdatableOption: String? {
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
    package var hyperparameterKey: HyperparameterKey? { HyperparameterKey(rawValue: rawValue) }
}

