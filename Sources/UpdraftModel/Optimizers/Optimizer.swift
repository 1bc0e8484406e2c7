import UpdraftCore
import UpdraftBackends

/// One optimizer, in one place: the state it keeps per trained tensor (`stateSlots`), its fused step
/// on a backend, its Double reference step, the cost model's price of a step, and the run settings it
/// reads. One type per optimizer (`SGD`, `Adam`); `OptimizerKind.optimizerType` is the table from the
/// model's optimizer to its type. The executor allocates one zeroed buffer per declared slot for each
/// trained tensor and hands them to `step` in that order; checkpoints and recovery store them in the
/// same order. Nothing outside this folder switches over optimizers, except the Core ML codec of the
/// Optimizer oneof (`CoreML/Spec`: its fields are Core ML's).
public protocol Optimizer {
    /// The settings one step reads, as the kernels take them.
    associatedtype Hyperparameters: Sendable
    /// The optimizer's name in messages ("SGD", "Adam").
    static var name: String { get }
    /// The names of the state buffers kept per trained tensor, in the order `step` takes them (SGD:
    /// velocity; Adam: m, v). Each starts at zero.
    static var stateSlots: [String] { get }
    /// The run settings this optimizer reads, with the default each has when the model does not
    /// state it, in the order a run's description lists them.
    static var settings: [(key: ParameterKey, defaultValue: ParameterValue)] { get }
    /// This optimizer's settings from a run's values (`TrainingParameters.values`).
    static func hyperparameters(_ values: [ParameterKey: ParameterValue]) -> Hyperparameters
    /// One fused step over one parameter tensor of `count` values on `backend`; `state` holds one
    /// buffer per `stateSlots` name. `step` counts from 1.
    static func step(_ h: Hyperparameters, step: Int, on backend: Backend, parameter: DeviceBuffer, gradient: DeviceBuffer,
                     state: [DeviceBuffer], count: Int) throws
    /// The same step in Double (`Reference`): the definition the backends are checked against.
    static func referenceStep(_ h: Hyperparameters, step: Int, parameter: inout [Double], gradient: [Double],
                              state: inout [[Double]]) throws
    /// What one step over `count` values costs (one fused kernel).
    static func stepCost(count: Int) -> OpCost
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

extension Optimizer {
    /// The value of `key` in `values`, else this optimizer's default for it (0 for a key it does not read).
    static func setting(_ key: ParameterKey, in values: [ParameterKey: ParameterValue]) -> Double {
        (values[key] ?? settings.first { $0.key == key }?.defaultValue)?.doubleValue ?? 0
    }

    /// One fused optimizer kernel per non-empty parameter tensor (the cost model's optimizer work).
    package static func stepWork(parameterCounts: [Int]) -> [KernelWork] {
        parameterCounts.filter { $0 > 0 }.map { KernelWork(stepCost(count: $0)) }
    }

    /// The default of an optimizer setting the model does not state (Core ML's fallback), from `settings`.
    static func fallback(_ key: HyperparameterKey) -> Double? {
        settings.first { $0.key.rawValue == key.rawValue }?.defaultValue.doubleValue
    }

    /// `hyperparameters` of a run's values, then `step`: for callers holding `any Optimizer.Type`.
    static func step(_ values: [ParameterKey: ParameterValue], step: Int, on backend: Backend, parameter: DeviceBuffer,
                     gradient: DeviceBuffer, state: [DeviceBuffer], count: Int) throws {
        try self.step(hyperparameters(values), step: step, on: backend, parameter: parameter, gradient: gradient,
                      state: state, count: count)
    }
}

// MARK: The optimizer table

extension OptimizerKind {
    /// The optimizer type for the model's optimizer: the one table from `OptimizerKind` to a type.
    public var optimizerType: any Optimizer.Type {
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
