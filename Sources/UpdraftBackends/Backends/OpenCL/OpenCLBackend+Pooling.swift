// Max, average and global pooling (Kernels/pooling.cl). Forward runs one work-item per output; backward
// one work-item per input, gathering over the windows that cover it (deterministic, no atomics). A
// geometry whose single window is the whole unpadded plane (global pooling) runs one work-group per
// plane instead, so large planes are reduced in parallel.
import UpdraftCore

extension OpenCLBackend {
    /// One work-item per output (pooling.cl); global pooling (one unpadded window over the whole plane) runs one work-group per plane.
    public func poolingForward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try validate(g, op: "pooling")
        let x = try operand(input, holds: g.inputShape.count, "pooling input \(g.inputShape)")
        let y = try operand(output, holds: g.outputShape.count, "pooling output \(g.outputShape)")
        let planes = g.batch * g.channels, planeSize = g.inHeight * g.inWidth
        if isGlobal(g) {
            let k = try opsKernel("pooling.cl", g.kind == .max ? "global_max_pool_forward" : "global_average_pool_forward")
            try k.setArguments([.buffer(x), .buffer(y), .int(planeSize)])
            try launchGroups(k, groups: planes)
        } else {
            let k = try opsKernel("pooling.cl", "pool_forward")
            try k.setArguments([.buffer(x), .buffer(y)] + windowArguments(g) + [.int(g.outputShape.count)])
            try launchElementwise(k, count: g.outputShape.count)
        }
    }

    /// Half input and/or output (`-D X_HALF` / `-D Y_HALF`, Kernels/storage.h) for windowed pooling;
    /// false for global pooling (the executor converts around it).
    public func poolingForward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer, storage: HalfStorage) throws -> Bool {
        if storage == .none { try poolingForward(g, input: input, output: output); return true }
        try validate(g, op: "pooling")
        if isGlobal(g) { return false }
        let x = try operand(input, holds: HalfStorage.floats(for: g.inputShape.count, half: storage.input), "pooling input \(g.inputShape)")
        let y = try operand(output, holds: HalfStorage.floats(for: g.outputShape.count, half: storage.output), "pooling output \(g.outputShape)")
        let k = try kernel("pooling.cl", "pool_forward", defines: ["WG_SIZE": "\(reductionGroupSize)",
                                                                  "X_HALF": storage.input ? "1" : "0", "Y_HALF": storage.output ? "1" : "0"])
        try k.setArguments([.buffer(x), .buffer(y)] + windowArguments(g) + [.int(g.outputShape.count)])
        try launchElementwise(k, count: g.outputShape.count)
        return true
    }

    /// `output` is not read: max pooling recomputes each window's first maximum from `input`.
    public func poolingBackward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer,
                                outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        try validate(g, op: "pooling backward")
        let x = try operand(input, holds: g.inputShape.count, "pooling input \(g.inputShape)")
        _ = try operand(output, holds: g.outputShape.count, "pooling output \(g.outputShape)")
        let dy = try operand(outputGradient, holds: g.outputShape.count, "pooling output gradient \(g.outputShape)")
        let dx = try operand(inputGradient, holds: g.inputShape.count, "pooling input gradient \(g.inputShape)")
        let planes = g.batch * g.channels, planeSize = g.inHeight * g.inWidth
        switch (isGlobal(g), g.kind) {
        case (true, .max):
            let k = try opsKernel("pooling.cl", "global_max_pool_backward")
            try k.setArguments([.buffer(x), .buffer(dy), .buffer(dx), .int(planeSize)])
            try launchGroups(k, groups: planes)
        case (true, .average):
            let k = try opsKernel("pooling.cl", "global_average_pool_backward")
            try k.setArguments([.buffer(dy), .buffer(dx), .int(planeSize), .int(g.inputShape.count)])
            try launchElementwise(k, count: g.inputShape.count)
        case (false, _):
            let k = try opsKernel("pooling.cl", "pool_backward")
            try k.setArguments([.buffer(x), .buffer(dy), .buffer(dx)] + windowArguments(g) + [.int(g.inputShape.count)])
            try launchElementwise(k, count: g.inputShape.count)
        }
    }

    /// A single window covering the whole (non-empty) plane with no padding: every divisor is H*W and
    /// the max is over the plane.
    private func isGlobal(_ g: PoolGeometry) -> Bool {
        g.outHeight == 1 && g.outWidth == 1 && g.kernelH >= g.inHeight && g.kernelW >= g.inWidth
            && g.padTop == 0 && g.padLeft == 0 && g.padBottom == 0 && g.padRight == 0
            && g.inHeight > 0 && g.inWidth > 0
    }

    /// POOL_GEOMETRY_ARGS of pooling.cl then the kind and padding rule, in order.
    private func windowArguments(_ g: PoolGeometry) -> [KernelArgument] {
        [g.inHeight, g.inWidth, g.outHeight, g.outWidth, g.kernelH, g.kernelW, g.strideH, g.strideW,
         g.padTop, g.padLeft, g.padBottom, g.padRight, g.kind == .max ? 1 : 0, g.excludePadding ? 1 : 0].map { .int($0) }
    }

    private func validate(_ g: PoolGeometry, op: String) throws {
        try requireSizes([("batch", g.batch), ("channels", g.channels), ("input height", g.inHeight),
                          ("input width", g.inWidth), ("output height", g.outHeight), ("output width", g.outWidth),
                          ("top padding", g.padTop), ("bottom padding", g.padBottom),
                          ("left padding", g.padLeft), ("right padding", g.padRight)],
                         total: max(g.inputShape.count, g.outputShape.count), op: op)
        try requireSizes([("kernel height", g.kernelH), ("kernel width", g.kernelW),
                          ("stride height", g.strideH), ("stride width", g.strideW)], positive: true,
                         total: 0, op: op)
    }
}
