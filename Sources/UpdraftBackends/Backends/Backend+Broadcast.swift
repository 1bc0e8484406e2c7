import UpdraftCore

/// Broadcasting and reductions through the host (the Double reference), for the reference backend
/// and test doubles; and the backward of a broadcasting op, which every backend builds from its own
/// `broadcastBinary`, `elementwise` and `reduce`.
public extension Backend {
    func hostBroadcastBinary(_ g: BroadcastGeometry, _ a: DeviceBuffer, _ b: DeviceBuffer, output: DeviceBuffer) throws {
        let x = try download(a, offset: 0, count: g.aCount), y = try download(b, offset: 0, count: g.bCount)
        try checkRange(offset: 0, count: g.outputCount, in: output, "\(g.op.rawValue) output")
        let r = try Reference.broadcastBinary(g, x.map(Double.init), y.map(Double.init))
        try upload(r.map(Float.init), to: output, offset: 0)
    }

    func hostReduce(_ g: ReductionGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try g.validate()
        let x = try download(input, offset: 0, count: g.inputCount)
        try checkRange(offset: 0, count: g.outputCount, in: output, "reduction output")
        try upload(try Reference.reduce(g, input: x.map(Double.init)).map(Float.init), to: output, offset: 0)
    }

    func hostReduceBackward(_ g: ReductionGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                        inputGradient: DeviceBuffer) throws {
        try g.validate()
        let x = try download(input, offset: 0, count: g.inputCount)
        let dy = try download(outputGradient, offset: 0, count: g.outputCount)
        try checkRange(offset: 0, count: g.inputCount, in: inputGradient, "reduction input gradient")
        let dx = try Reference.reduceBackward(g, input: x.map(Double.init), outputGradient: dy.map(Double.init))
        try upload(dx.map(Float.init), to: inputGradient, offset: 0)
    }

    /// The gradients of y = a op b (broadcast) from a, b, y and dy, into `da` and `db` (either may be
    /// nil): the factor each operand's element multiplies dy by, summed over the axes it was broadcast
    /// along. Scratch buffers of the output's size come from `makeScratch`.
    func broadcastBinaryBackward(_ g: BroadcastGeometry, a: DeviceBuffer, b: DeviceBuffer, output y: DeviceBuffer,
                                 outputGradient dy: DeviceBuffer, aGradient da: DeviceBuffer?, bGradient db: DeviceBuffer?,
                                 makeScratch: (Int) throws -> DeviceBuffer) throws {
        let full = g.outputDims
        func same(_ dims: [Int]) throws -> BroadcastGeometry { try BroadcastGeometry(op: .multiply, a: full, b: dims) }
        switch g.op {
        case .add, .subtract:
            if let da { try reduce(g.gradientReduction(to: g.aDims), input: dy, output: da) }
            if let db { try reduce(g.gradientReduction(to: g.bDims, scale: g.op == .add ? 1 : -1), input: dy, output: db) }
        case .multiply:
            let t = try makeScratch(g.outputCount)
            if let da {
                try broadcastBinary(try same(g.bDims), dy, b, output: t)
                try reduce(g.gradientReduction(to: g.aDims), input: t, output: da)
            }
            if let db {
                try broadcastBinary(try same(g.aDims), dy, a, output: t)
                try reduce(g.gradientReduction(to: g.bDims), input: t, output: db)
            }
        case .divide:
            let t = try makeScratch(g.outputCount)
            if let da {
                var d = try same(g.bDims); d.op = .divide
                try broadcastBinary(d, dy, b, output: t)
                try reduce(g.gradientReduction(to: g.aDims), input: t, output: da)
            }
            if let db {  // d(a / b) / db = -y / b
                try elementwise(.multiply, dy, y, output: t, count: g.outputCount)
                var d = try same(g.bDims); d.op = .divide
                try broadcastBinary(d, t, b, output: t)
                try reduce(g.gradientReduction(to: g.bDims, scale: -1), input: t, output: db)
            }
        }
    }
}
