import UpdraftCore

/// AdamW (Loshchilov and Hutter; PyTorch's `torch.optim.AdamW`): Adam whose weight decay shrinks the
/// weights instead of joining the gradient, step t from 1:
/// w *= 1 - learningRate * weightDecay;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g²;
/// w -= learningRate * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
/// Past Core ML: no Core ML optimizer message holds it (`coreML` is nil). A model keeps SGD or Adam in
/// its update parameters; a run trains with AdamW when asked (`UpdateConfiguration.optimizer`,
/// `updraft train --optimizer adamw`), and writing AdamW into a model's update parameters is refused.
/// Its step (one `ElementwiseUpdate`: the reference, the CPU and OpenCL): UpdraftLayers' Optimizers/AdamW+Step.swift.
public enum AdamW: OptimizerDescription {
    public static let name = "AdamW"
    public static let stateSlots = ["m", "v"]
    public static let coreML: CoreMLOptimizerFields? = nil
    public static var settings: [(key: ParameterKey, defaultValue: ParameterValue)] {
        [(.learningRate, .double(0.001)), (.beta1, .double(0.9)), (.beta2, .double(0.999)), (.eps, .double(1e-8)),
         (.weightDecay, .double(0.01))]
    }
}
