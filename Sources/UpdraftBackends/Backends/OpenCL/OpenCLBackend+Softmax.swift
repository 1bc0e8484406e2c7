// Softmax over channels, the fused softmax + cross-entropy loss and mean squared error
// (Kernels/softmax.cl). Losses are reduced on the device in two deterministic stages: per-row or
// per-group partials into a scratch buffer, then one work-group sums them in a fixed order.
import UpdraftCore

extension OpenCLBackend {
    /// Softmax over channels (softmax.cl), max-subtracted, per (image, spatial position).
    public func softmaxForward(_ g: SoftmaxGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try validate(g, op: "softmax")
        let x = try operand(input, holds: g.count, "softmax input")
        let y = try operand(output, holds: g.count, "softmax output")
        if g.spatial == 1 {
            let k = try opsKernel("softmax.cl", "softmax_rows_forward")
            try k.setArguments([.buffer(x), .buffer(y), .int(g.channels)])
            try launchGroups(k, groups: g.channels > 0 ? g.batch : 0)
        } else {
            let k = try opsKernel("softmax.cl", "softmax_forward")
            try k.setArguments([.buffer(x), .buffer(y), .int(g.channels), .int(g.spatial), .int(g.batch * g.spatial)])
            try launchElementwise(k, count: g.channels > 0 ? g.batch * g.spatial : 0)
        }
    }

    /// dx = y * (dy - sum_c dy * y) per (image, spatial position).
    public func softmaxBackward(_ g: SoftmaxGeometry, output: DeviceBuffer, outputGradient: DeviceBuffer,
                                inputGradient: DeviceBuffer) throws {
        try validate(g, op: "softmax backward")
        let y = try operand(output, holds: g.count, "softmax output")
        let dy = try operand(outputGradient, holds: g.count, "softmax output gradient")
        let dx = try operand(inputGradient, holds: g.count, "softmax input gradient")
        if g.spatial == 1 {
            let k = try opsKernel("softmax.cl", "softmax_rows_backward")
            try k.setArguments([.buffer(y), .buffer(dy), .buffer(dx), .int(g.channels)])
            try launchGroups(k, groups: g.channels > 0 ? g.batch : 0)
        } else {
            let k = try opsKernel("softmax.cl", "softmax_backward")
            try k.setArguments([.buffer(y), .buffer(dy), .buffer(dx), .int(g.channels), .int(g.spatial),
                                .int(g.batch * g.spatial)])
            try launchElementwise(k, count: g.channels > 0 ? g.batch * g.spatial : 0)
        }
    }

    /// Labels are read on the device only: a label that is not a class index in 0..<C makes the loss
    /// NaN (the host would have to download the labels to throw).
    public func softmaxCrossEntropy(_ g: SoftmaxGeometry, logits: DeviceBuffer, labels: DeviceBuffer, loss: DeviceBuffer,
                                    logitsGradient: DeviceBuffer?, correct: DeviceBuffer?) throws {
        try validate(g, op: "softmax cross-entropy")
        guard g.spatial == 1 else {
            throw UpdraftError(.invalidArgument, "softmax cross-entropy takes logits [N, C], got spatial size \(g.spatial)",
                               hint: "flatten the logits or use a geometry with spatial = 1")
        }
        guard g.channels >= 1 else {
            throw UpdraftError(.invalidArgument, "softmax cross-entropy needs at least one class, got \(g.channels)")
        }
        let n = g.batch
        let z = try operand(logits, holds: g.count, "cross-entropy logits")
        let t = try operand(labels, holds: n, "cross-entropy labels")
        let l = try operand(loss, holds: 1, "cross-entropy loss")
        let dz = try logitsGradient.map { try operand($0, holds: g.count, "cross-entropy logits gradient") }
        let c = try correct.map { try operand($0, holds: 1, "cross-entropy correct count") }
        guard n > 0 else {
            try context.fill(l, with: 0, count: 1)
            if let c { try context.fill(c, with: 0, count: 1) }
            return
        }
        // partials[0..<N] = row losses, partials[N..<2N] = 1 where the first arg-max is the label.
        let partials = try context.makeBuffer(count: 2 * n)
        let rows = try opsKernel("softmax.cl", "softmax_cross_entropy_rows")
        try rows.setArguments([.buffer(z), .buffer(t), .buffer(dz ?? z), .buffer(partials), .int(g.channels), .int(n),
                               .int(dz == nil ? 0 : 1), .float(Float(1 / Double(n)))])
        try launchGroups(rows, groups: n)
        try sumToScalar(partials, offset: 0, count: n, into: l, scale: Float(1 / Double(n)))
        if let c { try sumToScalar(partials, offset: n, count: n, into: c, scale: 1) }
    }

    /// Loss reduced on the device in two deterministic stages (per-group partials, then one work-group sums them).
    public func meanSquaredError(count: Int, input: DeviceBuffer, target: DeviceBuffer, loss: DeviceBuffer,
                                 inputGradient: DeviceBuffer?) throws {
        try requireSizes([("element count", count)], total: count, op: "mean squared error")
        let x = try operand(input, holds: count, "mean squared error input")
        let t = try operand(target, holds: count, "mean squared error target")
        let l = try operand(loss, holds: 1, "mean squared error loss")
        let dx = try inputGradient.map { try operand($0, holds: count, "mean squared error input gradient") }
        guard count > 0 else { return try context.fill(l, with: 0, count: 1) }
        // A fixed number of groups for a given size and device: the summation order never varies.
        let groups = min(Self.maxPartialGroups, (count + reductionGroupSize - 1) / reductionGroupSize)
        let partials = try context.makeBuffer(count: groups)
        let k = try opsKernel("softmax.cl", "squared_error_partials")
        try k.setArguments([.buffer(x), .buffer(t), .buffer(dx ?? x), .buffer(partials), .int(count),
                            .int(dx == nil ? 0 : 1), .float(Float(2 / Double(count)))])
        try launchGroups(k, groups: groups)
        try sumToScalar(partials, offset: 0, count: groups, into: l, scale: Float(1 / Double(count)))
    }

    /// Work-groups of the first stage of a full reduction; the second stage sums their partials.
    static let maxPartialGroups = 256

    /// destination[0] = scale * sum(source[offset ..< offset + count]), by one work-group.
    private func sumToScalar(_ source: OpenCLBuffer, offset: Int, count: Int, into destination: OpenCLBuffer,
                             scale: Float) throws {
        let k = try opsKernel("softmax.cl", "sum_to_scalar")
        try k.setArguments([.buffer(source), .int(offset), .int(count), .buffer(destination), .float(scale)])
        try launchGroups(k, groups: 1)
    }

    private func validate(_ g: SoftmaxGeometry, op: String) throws {
        try requireSizes([("batch", g.batch), ("channels", g.channels), ("spatial size", g.spatial)],
                         total: g.count, op: op)
    }
}
