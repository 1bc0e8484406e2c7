import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// AdamW's step (`AdamW`, UpdraftModel, says what it is): one `ElementwiseUpdate`, the same formula in
/// Double, float and OpenCL C, run by the generic `ElementwiseStep` op on every backend.
extension AdamW: Optimizer {
    /// The settings a step reads (PyTorch's defaults but the learning rate, which the run gives).
    public struct Hyperparameters: Sendable {
        public var learningRate: Double, beta1: Double, beta2: Double, eps: Double, weightDecay: Double
    }

    public static func hyperparameters(_ values: [ParameterKey: ParameterValue]) -> Hyperparameters {
        Hyperparameters(learningRate: setting(.learningRate, in: values), beta1: setting(.beta1, in: values),
                        beta2: setting(.beta2, in: values), eps: setting(.eps, in: values),
                        weightDecay: setting(.weightDecay, in: values))
    }

    /// The step's scalars: the rate, the decays, eps, the weights' shrink factor and the reciprocal bias
    /// corrections (in Double: 1 - beta^t loses everything in float for beta near 1).
    static func scalars(_ h: Hyperparameters, step: Int) throws -> [Double] {
        guard step >= 1 else { throw UpdraftError(.invalidArgument, "AdamW step is \(step); steps count from 1") }
        let t = Double(step)
        return [h.learningRate, h.beta1, h.beta2, h.eps, 1 - h.learningRate * h.weightDecay,
                1 / (1 - pow(h.beta1, t)), 1 / (1 - pow(h.beta2, t))]
    }

    /// One element: the same formula in Double, float and OpenCL C.
    static let update = ElementwiseUpdate(
        name: "adamw", state: ["m", "v"], scalars: ["lr", "b1", "b2", "eps", "shrink", "inv1", "inv2"],
        reference: { p, g, s, k in
            let (lr, b1, b2, eps, shrink, inv1, inv2) = (k[0], k[1], k[2], k[3], k[4], k[5], k[6])
            for i in p.indices {
                s[0][i] = b1 * s[0][i] + (1 - b1) * g[i]
                s[1][i] = b2 * s[1][i] + (1 - b2) * g[i] * g[i]
                p[i] = p[i] * shrink - lr * (s[0][i] * inv1) / ((s[1][i] * inv2).squareRoot() + eps)
            }
        },
        cpu: { p, g, s, count, k in
            let (lr, b1, b2, eps, shrink, inv1, inv2) = (k[0], k[1], k[2], k[3], k[4], k[5], k[6])
            let (m, v) = (s[0], s[1])
            for i in 0..<count {
                m[i] = b1 * m[i] + (1 - b1) * g[i]
                v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i]
                p[i] = p[i] * shrink - lr * (m[i] * inv1) / ((v[i] * inv2).squareRoot() + eps)
            }
        },
        openCL: """
            m = b1 * m + (1.0f - b1) * g;
            v = b2 * v + (1.0f - b2) * g * g;
            p = p * shrink - lr * (m * inv1) / (sqrt(v * inv2) + eps);
        """)

    public static func step(_ h: Hyperparameters, step: Int, on backend: Backend, parameter: DeviceBuffer,
                            gradient: DeviceBuffer, state: [DeviceBuffer], count: Int) throws {
        try backend.elementwiseStep(update, parameter: parameter, gradient: gradient, state: state,
                                    scalars: try scalars(h, step: step), count: count)
    }

    public static func referenceStep(_ h: Hyperparameters, step: Int, parameter: inout [Double], gradient: [Double],
                                     state: inout [[Double]]) throws {
        update.reference(&parameter, gradient, &state, try scalars(h, step: step))
    }

    /// Reads parameter, gradient, m and v and writes three.
    public static func stepCost(count n: Int) -> OpCost { OpCost(flops: Double(13 * n), bytes: f32Bytes(7 * n)) }
}
