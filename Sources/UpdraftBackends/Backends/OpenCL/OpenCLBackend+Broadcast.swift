// Broadcasting binary ops on OpenCL (Kernels/broadcast.cl): one work-item per output element; shapes
// travel as kernel arguments (six padded dimensions and strides).
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
}
