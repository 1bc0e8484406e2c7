// Element-wise arithmetic (Kernels/elementwise.cl): one work-item per element (activations:
// OpenCLBackend+Activation.swift).
import UpdraftCore

extension OpenCLBackend {
    /// One work-item per element (elementwise.cl `accumulate`); queued, returns without waiting.
    public func accumulate(_ source: DeviceBuffer, into destination: DeviceBuffer) throws {
        let src = try cl(source)
        try requireSizes([], total: src.count, op: "accumulate")
        let dst = try operand(destination, holds: src.count, "accumulate destination")
        let k = try opsKernel("elementwise.cl", "accumulate")
        try k.setArguments([.buffer(src), .buffer(dst), .int(src.count)])
        try launchElementwise(k, count: src.count)
    }

    /// One work-item per element (elementwise.cl); in place is allowed.
    public func elementwise(_ op: ElementwiseOp, _ a: DeviceBuffer, _ b: DeviceBuffer, output: DeviceBuffer,
                            count: Int) throws {
        try requireSizes([("element count", count)], total: count, op: "element-wise \(op)")
        let ab = try operand(a, holds: count, "element-wise first operand")
        let bb = try operand(b, holds: count, "element-wise second operand")
        let y = try operand(output, holds: count, "element-wise output")
        let k = try opsKernel("elementwise.cl", op == .add ? "elementwise_add" : "elementwise_multiply")
        try k.setArguments([.buffer(ab), .buffer(bb), .buffer(y), .int(count)])
        try launchElementwise(k, count: count)
    }

    /// y = scale[c] * x + shift[c], one work-item per element.
    public func channelAffine(_ shape: Shape, input: DeviceBuffer, scale: DeviceBuffer, shift: DeviceBuffer,
                              output: DeviceBuffer) throws {
        let (channels, spatial, count) = try affineSizes(shape, op: "channel affine")
        let x = try operand(input, holds: count, "channel affine input \(shape)")
        let s = try operand(scale, holds: channels, "channel affine scale")
        let t = try operand(shift, holds: channels, "channel affine shift")
        let y = try operand(output, holds: count, "channel affine output \(shape)")
        let k = try opsKernel("elementwise.cl", "channel_affine_forward")
        try k.setArguments([.buffer(x), .buffer(s), .buffer(t), .buffer(y), .int(channels), .int(spatial), .int(count)])
        try launchElementwise(k, count: count)
    }

    /// dx = scale[c] * dy, one work-item per element (frozen scale and shift get no gradient).
    public func channelAffineBackward(_ shape: Shape, outputGradient: DeviceBuffer, scale: DeviceBuffer,
                                      inputGradient: DeviceBuffer) throws {
        let (channels, spatial, count) = try affineSizes(shape, op: "channel affine backward")
        let dy = try operand(outputGradient, holds: count, "channel affine output gradient \(shape)")
        let s = try operand(scale, holds: channels, "channel affine scale")
        let dx = try operand(inputGradient, holds: count, "channel affine input gradient \(shape)")
        let k = try opsKernel("elementwise.cl", "channel_affine_backward")
        try k.setArguments([.buffer(dy), .buffer(s), .buffer(dx), .int(channels), .int(spatial), .int(count)])
        try launchElementwise(k, count: count)
    }

    /// C, S = H*W and N*C*S of an NCHW (or [N, C]) shape, checked.
    private func affineSizes(_ shape: Shape, op: String) throws -> (channels: Int, spatial: Int, count: Int) {
        let (n, c, s) = (shape.n, shape.c, shape.h * shape.w)
        try requireSizes([("smallest dimension of \(shape)", shape.dims.min() ?? 0)], total: n * c * s, op: op)
        // An empty plane means no elements; the kernel's (i / S) is then never evaluated.
        return (c, max(s, 1), n * c * s)
    }
}
