/// Softmax over channels and the losses. Logits/probabilities are `[N, C, S]` in memory with S = H*W
/// (softmax runs over C for every (n, s)); losses take `[N, C]`.
public struct SoftmaxGeometry: Hashable, Sendable {
    public var batch: Int, channels: Int, spatial: Int
    public init(batch: Int, channels: Int, spatial: Int = 1) { self.batch = batch; self.channels = channels; self.spatial = spatial }
    public init(shape: Shape) { self.init(batch: shape.n, channels: shape.c, spatial: shape.h * shape.w) }
    public var count: Int { batch * channels * spatial }
    public var cost: OpCost { OpCost(flops: Double(4 * count), bytes: f32Bytes(count, count)) }
}

/// SGD with momentum and weight decay, one fused pass per parameter tensor:
/// g = grad + weightDecay * w;  v = momentum * v + g;  w -= learningRate * v.
public struct SGDHyperparameters: Hashable, Sendable {
    public var learningRate: Float
    public var momentum: Float
    public var weightDecay: Float
    public init(learningRate: Float, momentum: Float = 0, weightDecay: Float = 0) {
        self.learningRate = learningRate; self.momentum = momentum; self.weightDecay = weightDecay
    }
}

/// Adam with bias correction, step t counted from 1:
/// g = grad + weightDecay * w;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g²;
/// w -= learningRate * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
public struct AdamHyperparameters: Hashable, Sendable {
    public var learningRate: Float
    public var beta1: Float
    public var beta2: Float
    public var eps: Float
    public var weightDecay: Float
    public init(learningRate: Float, beta1: Float = 0.9, beta2: Float = 0.999, eps: Float = 1e-8, weightDecay: Float = 0) {
        self.learningRate = learningRate; self.beta1 = beta1; self.beta2 = beta2; self.eps = eps; self.weightDecay = weightDecay
    }
}
