import UpdraftCore

/// What a model file and a run's settings know of an optimizer: its name, the state it keeps per
/// trained tensor (`stateSlots`), the run settings it reads and its Core ML message. One type per
/// optimizer (`SGD`, `Adam`, `AdamW`); `OptimizerKind.optimizerType` is the table from the model's
/// optimizer to its type. Its step on a backend, its Double reference and its cost are the
/// `Optimizer` protocol's (UpdraftLayers' Optimizers/), where the backends are known: the codec and
/// the graph here link no device library. Nothing outside these two folders switches over
/// optimizers, except the Core ML codec of the Optimizer oneof (`CoreML/Spec`: its fields are Core ML's).
public protocol OptimizerDescription {
    /// The optimizer's name in messages ("SGD", "Adam").
    static var name: String { get }
    /// The names of the state buffers kept per trained tensor, in the order its step takes them (SGD:
    /// velocity; Adam: m, v). Each starts at zero.
    static var stateSlots: [String] { get }
    /// The run settings this optimizer reads, with the default each has when the model does not
    /// state it, in the order a run's description lists them.
    static var settings: [(key: ParameterKey, defaultValue: ParameterValue)] { get }
    /// Where Core ML keeps this optimizer: its case of the Optimizer oneof and its own fields; nil for
    /// an optimizer past Core ML, which a model's update parameters cannot name (a run trains with it).
    static var coreML: CoreMLOptimizerFields? { get }
}

/// One optimizer's message in Core ML's `Optimizer` oneof: the oneof field number and name, and the
/// optimizer's own DoubleParameter fields after learningRate (1) and miniBatchSize (2), which every
/// optimizer message has. The spec's decoder, encoder and hyperparameter list read this, so the
/// field numbers are written once.
public struct CoreMLOptimizerFields: Sendable {
    /// The oneof field number (SGDOptimizer 10, AdamOptimizer 11).
    public var field: Int
    /// The oneof case name, for messages ("sgdOptimizer").
    public var name: String
    /// The optimizer's own fields, in field order: number, the hyperparameter each holds.
    public var parameters: [(field: Int, key: HyperparameterKey)]
}

extension OptimizerDescription {
    /// The value of `key` in `values`, else this optimizer's default for it (0 for a key it does not read).
    package static func setting(_ key: ParameterKey, in values: [ParameterKey: ParameterValue]) -> Double {
        (values[key] ?? settings.first { $0.key == key }?.defaultValue)?.doubleValue ?? 0
    }

    /// The default of an optimizer setting the model does not state (Core ML's fallback), from `settings`.
    static func fallback(_ key: HyperparameterKey) -> Double? {
        settings.first { $0.key.rawValue == key.rawValue }?.defaultValue.doubleValue
    }
}

// MARK: The optimizer table

/// An optimizer a run trains with: Core ML's two, which the Optimizer oneof holds (`sgd`: SGDOptimizer, `adam`:
/// AdamOptimizer), and Updraft's own past them.
public enum OptimizerKind: String, Hashable, Sendable {
    case sgd, adam
    /// Past Core ML: a run's choice (`AdamW`), never a model's update parameters.
    case adamW = "adamw"
}

extension OptimizerKind {
    /// The optimizer type for the model's optimizer: the one table from `OptimizerKind` to a type
    /// (its step: `OptimizerKind.stepType`, UpdraftLayers).
    public var optimizerType: any OptimizerDescription.Type {
        switch self {
        case .sgd: return SGD.self
        case .adam: return Adam.self
        case .adamW: return AdamW.self
        }
    }

    /// Every optimizer a run can train with: Core ML's, in its order, then Updraft's own.
    public static let all: [OptimizerKind] = [.sgd, .adam, .adamW]

    /// Whether a model's update parameters (Core ML's Optimizer oneof) can name this optimizer.
    public var isInCoreML: Bool { optimizerType.coreML != nil }

    /// The Core ML oneof field numbers of every optimizer Core ML has.
    static var coreMLFields: Set<Int> { Set(all.compactMap { $0.optimizerType.coreML?.field }) }

    /// The optimizer whose Core ML oneof field is `field`.
    init?(coreMLField field: Int) {
        guard let kind = Self.all.first(where: { $0.optimizerType.coreML?.field == field }) else { return nil }
        self = kind
    }
}

extension OptimizerSpec {
    /// An optimizer's own Core ML field by its hyperparameter (momentum, beta1, beta2, eps); nil for others.
    subscript(key: HyperparameterKey) -> DoubleParameter? {
        get {
            switch key {
            case .momentum: return momentum
            case .beta1: return beta1
            case .beta2: return beta2
            case .eps: return eps
            default: return nil
            }
        }
        set {
            switch key {
            case .momentum: momentum = newValue
            case .beta1: beta1 = newValue
            case .beta2: beta2 = newValue
            case .eps: eps = newValue
            default: break
            }
        }
    }
}
