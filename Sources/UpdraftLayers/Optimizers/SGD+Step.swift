import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// SGD's step: one fused kernel per tensor (`Backend.sgdStep`), `Reference.sgdStep` its definition.
extension SGD: Optimizer {
    public static func hyperparameters(_ values: [ParameterKey: ParameterValue]) -> SGDHyperparameters {
        SGDHyperparameters(learningRate: Float(setting(.learningRate, in: values)), momentum: Float(setting(.momentum, in: values)),
                           weightDecay: Float(setting(.weightDecay, in: values)))
    }

    public static func step(_ h: SGDHyperparameters, step: Int, on backend: Backend, parameter: DeviceBuffer,
                            gradient: DeviceBuffer, state: [DeviceBuffer], count: Int) throws {
        try backend.sgdStep(h, parameter: parameter, gradient: gradient, velocity: state[0], count: count)
    }

    public static func referenceStep(_ h: SGDHyperparameters, step: Int, parameter: inout [Double], gradient: [Double],
                                     state: inout [[Double]]) throws {
        try Reference.sgdStep(h, parameter: &parameter, gradient: gradient, velocity: &state[0])
    }

    /// Reads parameter, gradient and velocity and writes two.
    public static func stepCost(count n: Int) -> OpCost { OpCost(flops: Double(4 * n), bytes: f32Bytes(5 * n)) }
}
