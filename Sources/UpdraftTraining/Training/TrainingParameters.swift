import UpdraftCore
import UpdraftModel
import UpdraftData

/// The values in force for a run: the model's defaults with the caller's overrides, each checked
/// against what the model allows.
public struct TrainingParameters: Hashable, Sendable, CustomStringConvertible {
    /// Every key's value in force, normalized (integers for size/epochs/seed, bool for shuffle, doubles otherwise).
    public private(set) var values: [ParameterKey: ParameterValue]
    /// The optimizer the run trains with (the model's, or `UpdateConfiguration.optimizer`); its type (`optimizerType`) says which settings apply.
    public var optimizer: OptimizerKind

    /// The model's defaults (`hyperparameters`, as `NetworkGraph.hyperparameters` lists them), then
    /// `overrides`, each checked against what the model allows. Parameters the model does not describe
    /// get Core ML's defaults (momentum 0, Adam's betas, …) and weight decay 0.
    public init(optimizer: OptimizerKind, hyperparameters: [Hyperparameter],
                overrides: [ParameterKey: ParameterValue] = [:]) throws {
        let descriptions = hyperparameters
        self.optimizer = optimizer
        // Every key has a value: the run's own, then each optimizer's settings (this run's optimizer's last).
        var v: [ParameterKey: ParameterValue] = [.miniBatchSize: .int(8), .epochs: .int(1), .shuffle: .bool(true), .seed: .int(0)]
        for kind in OptimizerKind.all + [optimizer] {
            for s in kind.optimizerType.settings { v[s.key] = s.defaultValue }
        }
        for h in descriptions {
            if let key = ParameterKey(rawValue: h.key.rawValue) { v[key] = try Self.normalize(key, h.defaultValue) }
        }
        self.values = v
        for (key, value) in overrides.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            try set(key, value, descriptions: descriptions)
        }
    }

    /// Sets one value after checking its type and the model's constraint.
    /// A setting of another optimizer than the model's (momentum for an Adam model, beta1 for an SGD
    /// one) is refused: the run would ignore it.
    public mutating func set(_ key: ParameterKey, _ value: ParameterValue, descriptions: [Hyperparameter]) throws {
        if let other = Self.otherOptimizer(owning: key, besides: optimizer) {
            let own = optimizer.optimizerType.settings.map(\.key)
            throw UpdraftError(.invalidArgument,
                "\(key) is a setting of the \(other) optimizer; this model trains with \(optimizer), which would ignore it",
                hint: "leave \(key) out; \(optimizer)'s settings are " + own.map { "\($0)" }.joined(separator: ", ")
                    + " (to train with \(other), change the model's optimizer: updraft make-updatable MODEL --optimizer \(other) ... --out MODEL)")
        }
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

    /// The optimizer whose setting `key` is, when it is not `optimizer`'s own (nil for the run's
    /// settings and for `optimizer`'s).
    static func otherOptimizer(owning key: ParameterKey, besides optimizer: OptimizerKind) -> OptimizerKind? {
        if optimizer.optimizerType.settings.contains(where: { $0.key == key }) { return nil }
        return OptimizerKind.all.first { $0.optimizerType.settings.contains { $0.key == key } }
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
    public var sgd: SGDHyperparameters { SGD.hyperparameters(values) }
    /// The Adam settings (learning rate, betas, eps, weight decay) as Float, for the optimizer kernels.
    public var adam: AdamHyperparameters { Adam.hyperparameters(values) }

    /// One line: the optimizer, then the settings that apply to it (`sgd: learningRate=0.01 momentum=0 ...`).
    public var description: String {
        let keys = optimizer.optimizerType.settings.map(\.key) + [.miniBatchSize, .epochs, .shuffle, .seed]
        return "\(optimizer): " + keys.map { "\($0)=\(values[$0]!)" }.joined(separator: " ")
    }
}
