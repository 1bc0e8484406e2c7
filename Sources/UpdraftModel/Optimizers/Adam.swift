import UpdraftCore
import UpdraftBackends

/// Adam with bias correction (Core ML's AdamOptimizer; weight decay is Updraft's own), step t from 1:
/// g = grad + weightDecay * w;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g²;
/// w -= learningRate * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
public enum Adam: Optimizer {
    public static let name = "Adam"
    public static let stateSlots = ["m", "v"]
    public static let coreML: CoreMLOptimizerFields? = CoreMLOptimizerFields(field: 11, name: "adamOptimizer", parameters: [(3, .beta1), (4, .beta2), (5, .eps)])
    public static var settings: [(key: ParameterKey, defaultValue: ParameterValue)] {
        [(.learningRate, .double(0.001)), (.beta1, .double(0.9)), (.beta2, .double(0.999)), (.eps, .double(1e-8)),
         (.weightDecay, .double(0))]
    }

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
