// Broadcasting binary ops, forward and backward, by full coordinates: every output
// element's coordinates, each operand read at the same coordinates with its broadcast axes at 0.

extension Reference {
    /// Row-major coordinates of flat index `i` in `dims`.
    static func coordinates(_ i: Int, _ dims: [Int]) -> [Int] {
        var c = [Int](repeating: 0, count: dims.count), rest = i
        for d in stride(from: dims.count - 1, through: 0, by: -1) {
            c[d] = rest % max(dims[d], 1)
            rest /= max(dims[d], 1)
        }
        return c
    }

    /// The flat index in `dims` of `coordinates`, broadcast axes (size 1) read at 0.
    static func broadcastIndex(_ coordinates: [Int], _ dims: [Int]) -> Int {
        var i = 0
        for d in 0..<dims.count { i = i * dims[d] + (dims[d] == 1 ? 0 : coordinates[d]) }
        return i
    }

    static func apply(_ op: BinaryOp, _ a: Double, _ b: Double) -> Double {
        switch op {
        case .add: return a + b
        case .subtract: return a - b
        case .multiply: return a * b
        case .divide: return a / b
        }
    }

    /// y = a op b, broadcast.
    public static func broadcastBinary(_ g: BroadcastGeometry, _ a: [Double], _ b: [Double]) throws -> [Double] {
        try require(a, count: g.aCount, "\(g.op.rawValue) first operand \(g.aDims)")
        try require(b, count: g.bCount, "\(g.op.rawValue) second operand \(g.bDims)")
        return (0..<g.outputCount).map { i in
            let c = coordinates(i, g.outputDims)
            return apply(g.op, a[broadcastIndex(c, g.aDims)], b[broadcastIndex(c, g.bDims)])
        }
    }

    /// (da, db): each the sum, over the output elements that read an operand element, of dy times
    /// the derivative of y with respect to it (1, -1, the other operand, 1 / b or -a / b²).
    public static func broadcastBinaryBackward(_ g: BroadcastGeometry, _ a: [Double], _ b: [Double],
                                               outputGradient dy: [Double]) throws -> (da: [Double], db: [Double]) {
        try require(a, count: g.aCount, "\(g.op.rawValue) first operand \(g.aDims)")
        try require(b, count: g.bCount, "\(g.op.rawValue) second operand \(g.bDims)")
        try require(dy, count: g.outputCount, "\(g.op.rawValue) output gradient \(g.outputDims)")
        var da = [Double](repeating: 0, count: a.count), db = [Double](repeating: 0, count: b.count)
        for i in 0..<g.outputCount {
            let c = coordinates(i, g.outputDims)
            let ia = broadcastIndex(c, g.aDims), ib = broadcastIndex(c, g.bDims)
            switch g.op {
            case .add: da[ia] += dy[i]; db[ib] += dy[i]
            case .subtract: da[ia] += dy[i]; db[ib] -= dy[i]
            case .multiply: da[ia] += dy[i] * b[ib]; db[ib] += dy[i] * a[ia]
            case .divide: da[ia] += dy[i] / b[ib]; db[ib] -= dy[i] * a[ia] / (b[ib] * b[ib])
            }
        }
        return (da, db)
    }
}
