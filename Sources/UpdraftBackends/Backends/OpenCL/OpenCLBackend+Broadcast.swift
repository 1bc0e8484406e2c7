// Broadcasting binary ops and reductions on OpenCL (Kernels/broadcast.cl): one work-item per output
// element; shapes travel as kernel arguments (six padded dimensions and strides, or the reduction's
// kept and reduced runs).
import UpdraftCore

extension OpenCLBackend {
    /// One work-item per output element (broadcast.cl), shapes padded to six dimensions and passed as arguments.
    public func broadcastBinary(_ g: BroadcastGeometry, _ a: DeviceBuffer, _ b: DeviceBuffer, output: DeviceBuffer) throws {
        let op = "broadcasting \(g.op.rawValue)"
        try requireSizes(g.outputDims.map { ("output dimension", $0) }, total: max(g.outputCount, g.aCount, g.bCount), op: op)
        let x = try operand(a, holds: g.aCount, "\(op) first operand \(g.aDims)")
        let z = try operand(b, holds: g.bCount, "\(op) second operand \(g.bDims)")
        let y = try operand(output, holds: g.outputCount, "\(op) output \(g.outputDims)")
        let pad = BroadcastGeometry.maxRank - g.outputDims.count
        let dims = [Int](repeating: 1, count: pad) + g.outputDims.map { max($0, 1) }
        let sa = [Int](repeating: 0, count: pad) + g.strides(g.aDims)
        let sb = [Int](repeating: 0, count: pad) + g.strides(g.bDims)
        let code = BinaryOp.allCases.firstIndex(of: g.op)!
        let k = try opsKernel("broadcast.cl", "broadcast_binary")
        try k.setArguments([.buffer(x), .buffer(z), .buffer(y), .int(code)] + (dims + sa + sb).map { .int($0) } + [.int(g.outputCount)])
        try launchElementwise(k, count: g.outputCount)
    }

    /// One work-item per output element walking its group (broadcast.cl); max keeps the first maximum, sum is scaled by `g.scale`.
    public func reduce(_ g: ReductionGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try g.validate()
        try requireSizes([], total: g.inputCount, op: "reduction")
        let x = try operand(input, holds: g.inputCount, "reduction input \(g.inputDims)")
        let y = try operand(output, holds: g.outputCount, "reduction output \(g.outputDims)")
        let k = try opsKernel("broadcast.cl", "reduce_forward")
        try k.setArguments([.buffer(x), .buffer(y)] + reductionArguments(g) + [.int(g.outputCount)])
        try launchElementwise(k, count: g.outputCount)
    }

    /// One work-item per output element writing its whole group of the input gradient, so no atomics are needed.
    public func reduceBackward(_ g: ReductionGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                               inputGradient: DeviceBuffer) throws {
        try g.validate()
        try requireSizes([], total: g.inputCount, op: "reduction backward")
        let x = try operand(input, holds: g.inputCount, "reduction input \(g.inputDims)")
        let dy = try operand(outputGradient, holds: g.outputCount, "reduction output gradient \(g.outputDims)")
        let dx = try operand(inputGradient, holds: g.inputCount, "reduction input gradient \(g.inputDims)")
        let k = try opsKernel("broadcast.cl", "reduce_backward")
        try k.setArguments([.buffer(x), .buffer(dy), .buffer(dx)] + reductionArguments(g) + [.int(g.outputCount)])
        try launchElementwise(k, count: g.inputCount > 0 ? g.outputCount : 0)
    }

    /// k0..k2, ks0..ks2, r0..r2, rs0..rs2, is_max, scale.
    private func reductionArguments(_ g: ReductionGeometry) -> [KernelArgument] {
        let runs = g.runs
        let kept = [(size: Int, stride: Int)](repeating: (1, 0), count: 3 - runs.kept.count) + runs.kept
        let reduced = [(size: Int, stride: Int)](repeating: (1, 0), count: 3 - runs.reduced.count) + runs.reduced
        return (kept.map(\.size) + kept.map(\.stride) + reduced.map(\.size) + reduced.map(\.stride)).map { .int($0) }
            + [.int(g.kind == .max ? 1 : 0), .float(Float(g.scale))]
    }
}
