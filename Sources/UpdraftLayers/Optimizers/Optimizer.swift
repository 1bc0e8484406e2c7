import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// One optimizer's step, beside its description (`OptimizerDescription`, UpdraftModel): its fused step
/// on a backend, its Double reference step and the cost model's price of a step. The executor
/// allocates one zeroed buffer per declared slot for each trained tensor and hands them to `step` in
/// that order; checkpoints and recovery store them in the same order. `OptimizerKind.stepType` is the
/// table from the model's optimizer to its type. A new optimizer writes its step as one
/// `ElementwiseUpdate` (`AdamW+Step.swift`) or calls a fused op of its own (`SGD+Step.swift`).
public protocol Optimizer: OptimizerDescription {
    /// The settings one step reads, as the kernels take them.
    associatedtype Hyperparameters: Sendable
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
    /// One fused optimizer kernel per non-empty parameter tensor (the cost model's optimizer work).
    package static func stepWork(parameterCounts: [Int]) -> [KernelWork] {
        parameterCounts.filter { $0 > 0 }.map { KernelWork(stepCost(count: $0)) }
    }

    /// `hyperparameters` of a run's values, then `step`: for callers holding `any Optimizer.Type`.
    static func step(_ values: [ParameterKey: ParameterValue], step: Int, on backend: Backend, parameter: DeviceBuffer,
                     gradient: DeviceBuffer, state: [DeviceBuffer], count: Int) throws {
        try self.step(hyperparameters(values), step: step, on: backend, parameter: parameter, gradient: gradient,
                      state: state, count: count)
    }
}

extension OptimizerKind {
    /// The optimizer's step type for the model's optimizer (its description: `optimizerType`).
    public var stepType: any Optimizer.Type {
        switch self {
        case .sgd: return SGD.self
        case .adam: return Adam.self
        case .adamW: return AdamW.self
        }
    }
}
