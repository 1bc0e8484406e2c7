import CUpdraftKernels
import Foundation
import UpdraftCore

// Optimizer steps, one fused pass per parameter tensor, exactly the formulas on the hyperparameter types:
//   SGD:  g = grad + weightDecay * w;  v = momentum * v + g;  w -= learningRate * v
//   Adam: g = grad + weightDecay * w;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//         w -= learningRate * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps),  t counted from 1
// The loops are CUpdraftKernels' (upd_sgd_step, upd_adam_step), at the vector level chosen at start-up.
extension CPUBackend {
    /// One fused float32 pass updating `parameter` and `velocity` in place, split over threads.
    public func sgdStep(_ h: SGDHyperparameters, parameter: DeviceBuffer, gradient: DeviceBuffer,
                        velocity: DeviceBuffer, count: Int) throws {
        try requireSizes(["element count": count], op: "SGD")
        let w = try pointer(parameter, count, "SGD parameter")
        let grad = try pointer(gradient, count, "SGD gradient")
        let v = try pointer(velocity, count, "SGD velocity")
        let (lr, momentum, decay) = (h.learningRate, h.momentum, h.weightDecay)
        parallelChunks(count, grain: CPUParallel.elementGrain) { r in
            let i = r.lowerBound
            upd_sgd_step(w + i, grad + i, v + i, r.count, lr, momentum, decay)
        }
    }

    /// One fused float32 pass updating `parameter`, `m` and `v` in place; throws `.invalidArgument` when `step` < 1.
    public func adamStep(_ h: AdamHyperparameters, step: Int, parameter: DeviceBuffer, gradient: DeviceBuffer,
                         m: DeviceBuffer, v: DeviceBuffer, count: Int) throws {
        guard step >= 1 else {
            throw UpdraftError(.invalidArgument, "Adam step is \(step); steps count from 1")
        }
        try requireSizes(["element count": count], op: "Adam")
        let w = try pointer(parameter, count, "Adam parameter")
        let grad = try pointer(gradient, count, "Adam gradient")
        let m1 = try pointer(m, count, "Adam first moment")
        let m2 = try pointer(v, count, "Adam second moment")
        let (lr, b1, b2, eps, decay) = (h.learningRate, h.beta1, h.beta2, h.eps, h.weightDecay)
        // The corrections in Double (b^t underflows gracefully), used as float reciprocals.
        let inv1 = Float(1 / (1 - pow(Double(b1), Double(step))))
        let inv2 = Float(1 / (1 - pow(Double(b2), Double(step))))
        parallelChunks(count, grain: CPUParallel.elementGrain) { r in
            let i = r.lowerBound
            upd_adam_step(w + i, grad + i, m1 + i, m2 + i, r.count, lr, b1, b2, eps, decay, inv1, inv2)
        }
    }
}

extension CPUBackend {
    /// An optimizer's `ElementwiseUpdate`: its float loop over the tensor, split over threads.
    public func elementwiseStep(_ update: ElementwiseUpdate, parameter: DeviceBuffer, gradient: DeviceBuffer,
                                state: [DeviceBuffer], scalars: [Double], count: Int) throws {
        try requireSizes(["element count": count], op: update.name)
        let w = try pointer(parameter, count, "\(update.name) parameter")
        let g = try pointer(gradient, count, "\(update.name) gradient")
        let s = try zip(state, update.state).map { try pointer($0, count, "\(update.name) \($1)") }
        let k = scalars.map(Float.init)
        parallelChunks(count, grain: CPUParallel.elementGrain) { r in
            update.cpu(w + r.lowerBound, g + r.lowerBound, s.map { $0 + r.lowerBound }, r.count, k)
        }
    }
}
