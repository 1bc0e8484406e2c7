// Broadcasting binary ops and reductions on the CPU. Broadcasting walks the output row by row (all
// axes but the last), finding both operands' row offsets once per row and striding the last axis by
// 1 or 0. Reductions take one output element per work item and walk its group (up to three runs of
// reduced axes, `ReductionGeometry.runs`), so no two threads write one element.
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

    /// One output element per work item; max keeps the first maximum, sum is scaled by `g.scale`, in float32.
    public func reduce(_ g: ReductionGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try g.validate()
        let x = try pointer(input, g.inputCount, "reduction input \(g.inputDims)")
        let y = try pointer(output, g.outputCount, "reduction output \(g.outputDims)")
        forEachReductionGroup(g) { j, base, walk, scale in
            switch g.kind {
            case .sum:
                var sum: Float = 0
                walk.forEach { sum += x[base + $0] }
                y[j] = scale * sum
            case .max:
                y[j] = x[base + walk.firstMaximum(x + base)]
            }
        }
    }

    /// Sum spreads `scale * dy` over its group; max routes the gradient to the first maximum only.
    public func reduceBackward(_ g: ReductionGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                               inputGradient: DeviceBuffer) throws {
        try g.validate()
        let x = try pointer(input, g.inputCount, "reduction input \(g.inputDims)")
        let dy = try pointer(outputGradient, g.outputCount, "reduction output gradient \(g.outputDims)")
        let dx = try pointer(inputGradient, g.inputCount, "reduction input gradient \(g.inputDims)")
        forEachReductionGroup(g) { j, base, walk, scale in
            switch g.kind {
            case .sum:
                let v = scale * dy[j]
                walk.forEach { dx[base + $0] = v }
            case .max:
                walk.forEach { dx[base + $0] = 0 }
                dx[base + walk.firstMaximum(x + base)] = dy[j]
            }
        }
    }

    /// Both directions' walk: output element `j`, its group's first input element `base`, the group's
    /// offsets and the sum's scale, the output elements split across the workers.
    private func forEachReductionGroup(_ g: ReductionGeometry,
                                       _ body: (_ j: Int, _ base: Int, _ walk: ReductionWalk, _ scale: Float) -> Void) {
        let walk = ReductionWalk(g)
        let scale = Float(g.scale)
        parallelChunks(g.outputCount, grain: max(1, CPUParallel.elementGrain / max(walk.groupSize, 1))) { range in
            for j in range { body(j, walk.base(j), walk, scale) }
        }
    }
}

/// Offsets of one reduction: output element j's first input element (`base`) and the offsets of its
/// group relative to it, row-major over the reduced runs.
struct ReductionWalk {
    let kept: [(size: Int, stride: Int)]
    let reduced: [(size: Int, stride: Int)]
    let groupSize: Int

    init(_ g: ReductionGeometry) {
        let r = g.runs
        kept = r.kept; reduced = r.reduced
        groupSize = reduced.reduce(1) { $0 * $1.size }
    }

    func base(_ j: Int) -> Int {
        var rest = j, offset = 0
        for run in kept.reversed() { offset += (rest % run.size) * run.stride; rest /= run.size }
        return offset
    }

    /// Calls `body` with every offset of the group, in row-major order.
    func forEach(_ body: (Int) -> Void) {
        func level(_ k: Int, _ offset: Int) {
            if k == reduced.count { body(offset); return }
            for i in 0..<reduced[k].size { level(k + 1, offset + i * reduced[k].stride) }
        }
        level(0, 0)
    }

    /// The offset of the group's first maximum (a later element replaces only when strictly greater).
    func firstMaximum(_ x: UnsafeMutablePointer<Float>) -> Int {
        var best = 0, value = x[0], first = true
        forEach { o in
            if first { first = false; return }
            if x[o] > value { value = x[o]; best = o }
        }
        return best
    }
}
