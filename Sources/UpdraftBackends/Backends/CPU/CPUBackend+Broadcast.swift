// Broadcasting binary ops on the CPU: the output walked row by row (all axes but the last), both
// operands' row offsets found once per row and the last axis strided by 1 or 0.
import UpdraftCore

extension CPUBackend {
    /// Walks the output row by row, the last axis strided 1 or 0 per operand; rows split over threads.
    public func broadcastBinary(_ g: BroadcastGeometry, _ a: DeviceBuffer, _ b: DeviceBuffer, output: DeviceBuffer) throws {
        let x = try pointer(a, g.aCount, "\(g.op.rawValue) first operand \(g.aDims)")
        let z = try pointer(b, g.bCount, "\(g.op.rawValue) second operand \(g.bDims)")
        let y = try pointer(output, g.outputCount, "\(g.op.rawValue) output \(g.outputDims)")
        let rank = g.outputDims.count
        let sa = g.strides(g.aDims), sb = g.strides(g.bDims)
        let inner = g.outputDims[rank - 1], rows = g.outputCount / max(inner, 1)
        let (ia, ib) = (sa[rank - 1], sb[rank - 1])
        let op = g.op
        parallelChunks(rows, grain: max(1, CPUParallel.elementGrain / max(inner, 1))) { range in
            for row in range {
                var rest = row, oa = 0, ob = 0
                for d in stride(from: rank - 2, through: 0, by: -1) {
                    let c = rest % g.outputDims[d]
                    rest /= g.outputDims[d]
                    oa += c * sa[d]; ob += c * sb[d]
                }
                let dst = y + row * inner, pa = x + oa, pb = z + ob
                switch op {
                case .add: for i in 0..<inner { dst[i] = pa[i * ia] + pb[i * ib] }
                case .subtract: for i in 0..<inner { dst[i] = pa[i * ia] - pb[i * ib] }
                case .multiply: for i in 0..<inner { dst[i] = pa[i * ia] * pb[i * ib] }
                case .divide: for i in 0..<inner { dst[i] = pa[i * ia] / pb[i * ib] }
                }
            }
        }
    }
}
