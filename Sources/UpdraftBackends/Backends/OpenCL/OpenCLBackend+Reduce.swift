// Reductions on OpenCL (Kernels/reduce.cl): one work-item per output element walking its group, the
// reduction's kept and reduced runs passed as arguments, one program per kind selected by
// `-D REDUCE_KIND` (the table in Ops/Reduce.swift numbers the kinds).
import UpdraftCore

extension ReductionKind {
    /// REDUCE_<NAME> for every kind (its position in the table) and REDUCE_KIND for this one: the
    /// defines reduce.cl is built with.
    var openCLDefines: [String: String] {
        var d: [String: String] = [:]
        for (i, k) in Self.allCases.enumerated() { d["REDUCE_" + k.rawValue.uppercased()] = "\(i)" }
        d["REDUCE_KIND"] = "\(Self.allCases.firstIndex(of: self)!)"
        return d
    }
}

extension OpenCLBackend {
    /// One work-item per output element walking its group (reduce.cl), y = scale * the kind's value.
    public func reduce(_ g: ReductionGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try g.validate()
        try requireSizes([], total: g.inputCount, op: "reduction")
        let x = try operand(input, holds: g.inputCount, "reduction input \(g.inputDims)")
        let y = try operand(output, holds: g.outputCount, "reduction output \(g.outputDims)")
        let k = try reductionKernel(g, "reduce_forward")
        try k.setArguments([.buffer(x), .buffer(y)] + reductionArguments(g) + [.int(g.outputCount)])
        try launchElementwise(k, count: g.outputCount)
    }

    /// One work-item per output element writing its whole group of the input gradient, so no atomics are needed.
    public func reduceBackward(_ g: ReductionGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                               inputGradient: DeviceBuffer) throws {
        try g.validate()
        try g.requireGradient()
        try requireSizes([], total: g.inputCount, op: "reduction backward")
        let x = try operand(input, holds: g.inputCount, "reduction input \(g.inputDims)")
        let dy = try operand(outputGradient, holds: g.outputCount, "reduction output gradient \(g.outputDims)")
        let dx = try operand(inputGradient, holds: g.inputCount, "reduction input gradient \(g.inputDims)")
        let k = try reductionKernel(g, "reduce_backward")
        try k.setArguments([.buffer(x), .buffer(dy), .buffer(dx)] + reductionArguments(g) + [.int(g.outputCount)])
        try launchElementwise(k, count: g.inputCount > 0 ? g.outputCount : 0)
    }

    private func reductionKernel(_ g: ReductionGeometry, _ name: String) throws -> OpenCLKernel {
        try kernel("reduce.cl", name, defines: g.kind.openCLDefines.merging(["WG_SIZE": "\(reductionGroupSize)"]) { own, _ in own })
    }

    /// k0..k2, ks0..ks2, r0..r2, rs0..rs2, scale, offset.
    private func reductionArguments(_ g: ReductionGeometry) -> [KernelArgument] {
        let runs = g.runs
        let kept = [(size: Int, stride: Int)](repeating: (1, 0), count: 3 - runs.kept.count) + runs.kept
        let reduced = [(size: Int, stride: Int)](repeating: (1, 0), count: 3 - runs.reduced.count) + runs.reduced
        return (kept.map(\.size) + kept.map(\.stride) + reduced.map(\.size) + reduced.map(\.stride)).map { .int($0) }
            + [.float(Float(g.scale)), .float(Float(g.offset))]
    }
}
