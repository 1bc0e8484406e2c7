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
}

extension Optimizer {
    /// The value of `key` in `values`, else this optimizer's default for it (0 for a key it does not read).
    static func setting(_ key: ParameterKey, in values: [ParameterKey: ParameterValue]) -> Double {
        (values[key] ?? settings.first { $0.key == key }?.defaultValue)?.doubleValue ?? 0
    }

    /// One fused optimizer kernel per non-empty parameter tensor (the cost model's optimizer work).
    static func stepWork(parameterCounts: [Int]) -> [KernelWork] {
        parameterCounts.filter { $0 > 0 }.map { KernelWork(stepCost(count: $0)) }
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
        }
    }

    /// Every optimizer a model can name, in Core ML's order.
    public static let all: [OptimizerKind] = [.sgd, .adam]
}
