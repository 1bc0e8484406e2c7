// Optimizer updates, exactly the formulas documented on SGDHyperparameters and AdamHyperparameters,
// in Double (the Float hyperparameters are widened exactly). Each call is one step over one
// parameter tensor; the state arrays (velocity, m, v) are updated in place, as a backend updates its buffers.

import Foundation

extension Reference {
    /// SGD with momentum and weight decay, for every element i:
    ///   g = grad + weightDecay * w;  v = momentum * v + g;  w -= learningRate * v.
    public static func sgdStep(_ h: SGDHyperparameters, parameter w: inout [Double], gradient grad: [Double],
                               velocity v: inout [Double]) throws {
        try require(grad, count: w.count, "SGD gradient")
        try require(v, count: w.count, "SGD velocity")
        let (lr, momentum, decay) = (Double(h.learningRate), Double(h.momentum), Double(h.weightDecay))
        for i in 0..<w.count {
            let g = grad[i] + decay * w[i]
            v[i] = momentum * v[i] + g
            w[i] -= lr * v[i]
        }
    }

    /// Adam with bias correction, `step` counted from 1, for every element i:
    ///   g = grad + weightDecay * w;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
    ///   w -= learningRate * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps).
    public static func adamStep(_ h: AdamHyperparameters, step: Int, parameter w: inout [Double], gradient grad: [Double],
                                m: inout [Double], v: inout [Double]) throws {
        guard step >= 1 else {
            throw UpdraftError(.invalidArgument, "Adam step is \(step); steps count from 1")
        }
        try require(grad, count: w.count, "Adam gradient")
        try require(m, count: w.count, "Adam first moment")
        try require(v, count: w.count, "Adam second moment")
        let (lr, b1, b2, eps, decay) = (Double(h.learningRate), Double(h.beta1), Double(h.beta2),
                                        Double(h.eps), Double(h.weightDecay))
        let correction1 = 1 - pow(b1, Double(step)), correction2 = 1 - pow(b2, Double(step))
        for i in 0..<w.count {
            let g = grad[i] + decay * w[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            w[i] -= lr * (m[i] / correction1) / ((v[i] / correction2).squareRoot() + eps)
        }
    }
}
