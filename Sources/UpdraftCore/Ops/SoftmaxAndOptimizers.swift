/// Softmax over channels and the losses. Logits/probabilities are `[N, C, S]` in memory with S = H*W
/// (softmax runs over C for every (n, s)); losses take `[N, C]`.
public struct SoftmaxGeometry: Hashable, Sendable {
    /// Rows N, classes C (the softmax axis), and positions S = H*W per row, each softmaxed separately.
    public var batch: Int, channels: Int, spatial: Int
    /// A softmax over `channels` for each of `batch` x `spatial` positions; `spatial` defaults to 1 (`[N, C]` logits).
    public init(batch: Int, channels: Int, spatial: Int = 1) { self.batch = batch; self.channels = channels; self.spatial = spatial }
    /// An NCHW shape as `[N, C, H*W]`: softmax over C at every pixel.
    public init(shape: Shape) { self.init(batch: shape.n, channels: shape.c, spatial: shape.h * shape.w) }
    /// Total elements: batch * channels * spatial.
    public var count: Int { batch * channels * spatial }
    /// About 4 flops per element (max, exp, sum, divide); reads the input once, writes the output.
    public var cost: OpCost { OpCost(flops: Double(4 * count), bytes: f32Bytes(count, count)) }
}

/// SGD with momentum and weight decay, one fused pass per parameter tensor:
/// g = grad + weightDecay * w;  v = momentum * v + g;  w -= learningRate * v.
public struct SGDHyperparameters: Hashable, Sendable {
    /// Step size (Core ML's SGDOptimizer.learningRate); must be positive to make progress.
    public var learningRate: Float
    /// Velocity decay in [0, 1) (SGDOptimizer.momentum); 0 is plain SGD.
    public var momentum: Float
    /// L2 penalty factor added to the gradient as `weightDecay * w`; 0 (Core ML has no such field) turns it off.
    public var weightDecay: Float
    /// SGD settings; momentum and weight decay default to 0 (plain SGD).
    public init(learningRate: Float, momentum: Float = 0, weightDecay: Float = 0) {
        self.learningRate = learningRate; self.momentum = momentum; self.weightDecay = weightDecay
    }
}

/// Adam with bias correction, step t counted from 1:
/// g = grad + weightDecay * w;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g²;
/// w -= learningRate * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
public struct AdamHyperparameters: Hashable, Sendable {
    /// Step size (Core ML's AdamOptimizer.learningRate).
    public var learningRate: Float
    /// Decay of the first-moment (mean) estimate, in [0, 1) (AdamOptimizer.beta1; default 0.9).
    public var beta1: Float
    /// Decay of the second-moment (squared) estimate, in [0, 1) (AdamOptimizer.beta2; default 0.999).
    public var beta2: Float
    /// Added to the denominator's square root to avoid division by zero (AdamOptimizer.eps; default 1e-8).
    public var eps: Float
    /// L2 penalty factor added to the gradient as `weightDecay * w` before the moments; 0 (Core ML has no such field) turns it off.
    public var weightDecay: Float
    /// Adam settings; the defaults are Adam's usual ones (0.9, 0.999, 1e-8) and no weight decay.
    public init(learningRate: Float, beta1: Float = 0.9, beta2: Float = 0.999, eps: Float = 1e-8, weightDecay: Float = 0) {
        self.learningRate = learningRate; self.beta1 = beta1; self.beta2 = beta2; self.eps = eps; self.weightDecay = weightDecay
    }
}
