import Foundation
import UpdraftCore

// Optimizer updates (Kernels/optimizers.cl): one fused pass over a parameter tensor, updating the
// parameter and its state buffers in place.
extension OpenCLBackend {
    /// One fused kernel pass (optimizers.cl `sgd_step`) updating `parameter` and `velocity` in place.
    public func sgdStep(_ h: SGDHyperparameters, parameter: DeviceBuffer, gradient: DeviceBuffer,
                        velocity: DeviceBuffer, count: Int) throws {
        try requireSizes([("element count", count)], total: count, op: "SGD step")
        let w = try operand(parameter, holds: count, "SGD parameter")
        let g = try operand(gradient, holds: count, "SGD gradient")
        let v = try operand(velocity, holds: count, "SGD velocity")
        let k = try opsKernel("optimizers.cl", "sgd_step")
        try k.setArguments([.buffer(w), .buffer(g), .buffer(v), .int(count),
                            .float(h.learningRate), .float(h.momentum), .float(h.weightDecay)])
        try launchElementwise(k, count: count)
    }

    /// One fused kernel pass updating `parameter`, `m` and `v` in place; bias corrections computed in Double on the host. Throws `.invalidArgument` when `step` < 1.
    public func adamStep(_ h: AdamHyperparameters, step: Int, parameter: DeviceBuffer, gradient: DeviceBuffer,
                         m: DeviceBuffer, v: DeviceBuffer, count: Int) throws {
        guard step >= 1 else {
            throw UpdraftError(.invalidArgument, "Adam step is \(step); steps count from 1")
        }
        try requireSizes([("element count", count)], total: count, op: "Adam step")
        let w = try operand(parameter, holds: count, "Adam parameter")
        let g = try operand(gradient, holds: count, "Adam gradient")
        let mb = try operand(m, holds: count, "Adam first moment")
        let vb = try operand(v, holds: count, "Adam second moment")
        // Bias corrections in double precision: 1 - beta^t loses everything in float for beta near 1.
        let correction1 = 1 - pow(Double(h.beta1), Double(step))
        let correction2 = 1 - pow(Double(h.beta2), Double(step))
        let k = try opsKernel("optimizers.cl", "adam_step")
        try k.setArguments([.buffer(w), .buffer(g), .buffer(mb), .buffer(vb), .int(count),
                            .float(h.learningRate), .float(h.beta1), .float(h.beta2), .float(h.eps),
                            .float(h.weightDecay), .float(Float(correction1)), .float(Float(correction2))])
        try launchElementwise(k, count: count)
    }
}
