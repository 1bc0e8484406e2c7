import UpdraftCore

/// SGD with momentum and weight decay (Core ML's SGDOptimizer; weight decay is Updraft's own):
/// g = grad + weightDecay * w;  v = momentum * v + g;  w -= learningRate * v.
/// What a model and a run's settings know of it; its step: UpdraftLayers' Optimizers/SGD+Step.swift.
public enum SGD: OptimizerDescription {
    public static let name = "SGD"
    public static let stateSlots = ["velocity"]
    public static let coreML: CoreMLOptimizerFields? = CoreMLOptimizerFields(field: 10, name: "sgdOptimizer", parameters: [(3, .momentum)])
    public static var settings: [(key: ParameterKey, defaultValue: ParameterValue)] {
        [(.learningRate, .double(0.001)), (.momentum, .double(0)), (.weightDecay, .double(0))]
    }
}
