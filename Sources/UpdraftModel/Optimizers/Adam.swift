import UpdraftCore

/// Adam with bias correction (Core ML's AdamOptimizer; weight decay is Updraft's own), step t from 1:
/// g = grad + weightDecay * w;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g²;
/// w -= learningRate * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
/// What a model and a run's settings know of it; its step: UpdraftLayers' Optimizers/Adam+Step.swift.
public enum Adam: OptimizerDescription {
    public static let name = "Adam"
    public static let stateSlots = ["m", "v"]
    public static let coreML: CoreMLOptimizerFields? = CoreMLOptimizerFields(field: 11, name: "adamOptimizer", parameters: [(3, .beta1), (4, .beta2), (5, .eps)])
    public static var settings: [(key: ParameterKey, defaultValue: ParameterValue)] {
        [(.learningRate, .double(0.001)), (.beta1, .double(0.9)), (.beta2, .double(0.999)), (.eps, .double(1e-8)),
         (.weightDecay, .double(0))]
    }
}
