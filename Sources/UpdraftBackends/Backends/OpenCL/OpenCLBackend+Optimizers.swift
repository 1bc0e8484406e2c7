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

extension OpenCLBackend {
    /// An optimizer's `ElementwiseUpdate` as one kernel, one work-item per element: the program is its
    /// OpenCL statements inside a kernel that loads and stores the element (built once per context,
    /// kept in the program binary cache like the embedded ones).
    public func elementwiseStep(_ update: ElementwiseUpdate, parameter: DeviceBuffer, gradient: DeviceBuffer,
                                state: [DeviceBuffer], scalars: [Double], count: Int) throws {
        try requireSizes([("element count", count)], total: count, op: update.name)
        let w = try operand(parameter, holds: count, "\(update.name) parameter")
        let g = try operand(gradient, holds: count, "\(update.name) gradient")
        let s = try zip(state, update.state).map { try operand($0, holds: count, "\(update.name) \($1)") }
        let k = try kernels.kernel(file: "update:" + update.name, name: "elementwise_update", defines: [:]) {
            try context.program(source: Self.updateSource(update), named: update.name + " update").makeKernel("elementwise_update")
        }
        try k.setArguments([.buffer(w), .buffer(g)] + s.map { .buffer($0) } + [.int(count)] + scalars.map { .float(Float($0)) })
        try launchElementwise(k, count: count)
    }

    /// The kernel around an update's statements: its arguments are the parameter, the gradient, each
    /// state array, the element count and each scalar.
    static func updateSource(_ u: ElementwiseUpdate) -> String {
        let states = u.state.map { "__global float* \($0)_" }.joined(separator: ", ")
        let scalars = u.scalars.map { "const float \($0)" }.joined(separator: ", ")
        return """
        __kernel void elementwise_update(__global float* w_, __global const float* g_, \(states.isEmpty ? "" : states + ", ")\
        const int count\(scalars.isEmpty ? "" : ", " + scalars)) {
            const int i = get_global_id(0);
            if (i >= count) return;
            float p = w_[i];
            const float g = g_[i];
        \(u.state.map { "    float \($0) = \($0)_[i];" }.joined(separator: "\n"))
            {
        \(u.openCL)
            }
            w_[i] = p;
        \(u.state.map { "    \($0)_[i] = \($0);" }.joined(separator: "\n"))
        }
        """
    }
}
