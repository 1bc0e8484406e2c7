import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// Adam's step: one fused kernel per tensor (`Backend.adamStep`), `Reference.adamStep` its definition.
extension Adam: Optimizer {
    public static func hyperparameters(_ values: [ParameterKey: ParameterValue]) -> AdamHyperparameters {
        AdamHyperparameters(learningRate: Float(setting(.learningRate, in: values)), beta1: Float(setting(.beta1, in: values)),
                            beta2: Float(setting(.beta2, in: values)), eps: Float(setting(.eps, in: values)),
                            weightDecay: Float(setting(.weightDecay, in: values)))
    }

    public static func step(_ h: AdamHyperparameters, step: Int, on backend: Backend, parameter: DeviceBuffer,
                            gradient: DeviceBuffer, state: [DeviceBuffer], count: Int) throws {
        try backend.adamStep(h, step: step, parameter: parameter, gradient: gradient, m: state[0], v: state[1], count: count)
    }

    public static func referenceStep(_ h: AdamHyperparameters, step: Int, parameter: inout [Double], gradient: [Double],
                                     state: inout [[Double]]) throws {
        var (m, v) = (state[0], state[1])
        try Reference.adamStep(h, step: step, parameter: &parameter, gradient: gradient, m: &m, v: &v)
        state[0] = m; state[1] = v
    }

    /// Reads parameter, gradient, m and v and writes three.
    public static func stepCost(count n: Int) -> OpCost { OpCost(flops: Double(12 * n), bytes: f32Bytes(7 * n)) }
}
