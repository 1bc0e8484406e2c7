// The spatial ops on OpenCL: padding (Kernels/padding.cl), resampling (OpenCLBackend+Resample.swift,
// Kernels/resample.cl), LRN, L2 and instance normalization (Kernels/normalization.cl). Element-wise
// kernels for the first three, one work-group per example (L2) or per plane (instance normalization)
// for the reductions.
import UpdraftCore

extension OpenCLBackend {
    /// Padding and resampling one work-item per element; LRN element-wise; L2 normalization one work-group per example, instance normalization one per plane.
    public func spatialForward(_ g: SpatialGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        let op = g.op.familyName
        try requireSizes(g.inputShape.dims.map { ("input dimension", $0) } + g.outputShape.dims.map { ("output dimension", $0) },
                         total: max(g.inputShape.count, g.outputShape.count), op: op)
        let x = try operand(input, holds: g.inputShape.count, "\(op) input \(g.inputShape)")
        let y = try operand(output, holds: g.outputShape.count, "\(op) output \(g.outputShape)")
        let count = g.outputShape.count
        switch g.op {
        case let .padding(p):
            let (mode, value) = paddingArguments(p.mode)
            let k = try opsKernel("padding.cl", "padding_forward")
            try k.setArguments([.buffer(x), .buffer(y), .int(g.inHeight), .int(g.inWidth), .int(g.outHeight), .int(g.outWidth),
                                .int(p.top), .int(p.left), .int(mode), .float(value), .int(count)])
            try launchElementwise(k, count: count)
        case .resampling:
            try resampleForward(g, x, y)
        case let .lrn(l):
            let k = try opsKernel("normalization.cl", "lrn_forward")
            try k.setArguments([.buffer(x), .buffer(y)] + lrnArguments(g, l) + [.int(count)])
            try launchElementwise(k, count: count)
        case let .l2Normalize(eps):
            let k = try opsKernel("normalization.cl", "l2_normalize_forward")
            try k.setArguments([.buffer(x), .buffer(y), .int(g.inputShape.itemCount), .float(eps)])
            try launchGroups(k, groups: g.inputShape.itemCount > 0 ? g.batch : 0)
        case let .instanceNormalization(eps):
            let k = try opsKernel("normalization.cl", "instance_norm_forward")
            let spatial = g.inHeight * g.inWidth
            try k.setArguments([.buffer(x), .buffer(y), .int(spatial), .float(eps)])
            try launchGroups(k, groups: spatial > 0 ? g.batch * g.channels : 0)
        }
    }

    /// Padding, resampling and LRN gather one work-item per input element (no atomics); L2 normalization
    /// runs one work-group per example, instance normalization one per plane. `output` is only size-checked.
    public func spatialBackward(_ g: SpatialGeometry, input: DeviceBuffer, output: DeviceBuffer, outputGradient: DeviceBuffer,
                                inputGradient: DeviceBuffer) throws {
        let op = g.op.familyName + " backward"
        try requireSizes(g.inputShape.dims.map { ("input dimension", $0) } + g.outputShape.dims.map { ("output dimension", $0) },
                         total: max(g.inputShape.count, g.outputShape.count), op: op)
        let x = try operand(input, holds: g.inputShape.count, "\(op) input \(g.inputShape)")
        _ = try operand(output, holds: g.outputShape.count, "\(op) output \(g.outputShape)")
        let dy = try operand(outputGradient, holds: g.outputShape.count, "\(op) output gradient \(g.outputShape)")
        let dx = try operand(inputGradient, holds: g.inputShape.count, "\(op) input gradient \(g.inputShape)")
        let count = g.inputShape.count
        switch g.op {
        case let .padding(p):
            let (mode, _) = paddingArguments(p.mode)
            let k = try opsKernel("padding.cl", "padding_backward")
            try k.setArguments([.buffer(dy), .buffer(dx), .int(g.inHeight), .int(g.inWidth), .int(g.outHeight), .int(g.outWidth),
                                .int(p.top), .int(p.bottom), .int(p.left), .int(p.right), .int(mode), .int(count)])
            try launchElementwise(k, count: count)
        case .resampling:
            try resampleBackward(g, dy, dx)
        case let .lrn(l):
            let k = try opsKernel("normalization.cl", "lrn_backward")
            try k.setArguments([.buffer(x), .buffer(dy), .buffer(dx)] + lrnArguments(g, l) + [.int(count)])
            try launchElementwise(k, count: count)
        case let .l2Normalize(eps):
            let k = try opsKernel("normalization.cl", "l2_normalize_backward")
            try k.setArguments([.buffer(x), .buffer(dy), .buffer(dx), .int(g.inputShape.itemCount), .float(eps)])
            try launchGroups(k, groups: g.inputShape.itemCount > 0 ? g.batch : 0)
        case let .instanceNormalization(eps):
            let k = try opsKernel("normalization.cl", "instance_norm_backward")
            let spatial = g.inHeight * g.inWidth
            try k.setArguments([.buffer(x), .buffer(dy), .buffer(dx), .int(spatial), .float(eps)])
            try launchGroups(k, groups: spatial > 0 ? g.batch * g.channels : 0)
        }
    }

    /// padding.cl's mode code and constant.
    private func paddingArguments(_ mode: PaddingMode) -> (Int, Float) {
        switch mode {
        case let .constant(v): return (0, v)
        case .reflection: return (1, 0)
        case .replication: return (2, 0)
        }
    }

    /// normalization.cl's C, S, size, before, k, alpha / size, beta for LRN.
    private func lrnArguments(_ g: SpatialGeometry, _ l: LRNSpec) -> [KernelArgument] {
        [.int(g.channels), .int(g.inHeight * g.inWidth), .int(l.localSize), .int(l.before), .float(l.k),
         .float(l.alpha / Float(l.localSize)), .float(l.beta)]
    }
}
