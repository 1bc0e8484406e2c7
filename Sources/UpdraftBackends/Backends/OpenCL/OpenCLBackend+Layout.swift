// Layout ops on OpenCL (Kernels/layout.cl): the permuted copy (transpose / permute). The geometry is
// simplified (size-1 axes dropped, runs merged) and padded to the kernel's 6 axes; an identity
// permutation is a plain copy.
import UpdraftCore

extension OpenCLBackend {
    /// Simplifies the permutation and pads it to layout.cl's six axes; an identity permutation is a plain buffer copy.
    public func transpose(_ g: TransposeGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try g.validate("\(name) transpose")
        try requireSizes([("batch", g.batch)], total: g.count, op: "transpose")
        let x = try operand(input, holds: g.count, "transpose input")
        let y = try operand(output, holds: g.count, "transpose output")
        guard g.count > 0 else { return }
        let s = g.simplified
        let rank = s.dims.count
        guard rank <= TransposeGeometry.maxRank else {
            throw UpdraftError(.unsupported, "\(name) transpose: \(rank) axes after merging (\(g.dims), perm \(g.perm)); the kernel takes \(TransposeGeometry.maxRank)",
                               hint: "reshape to fewer axes before the transpose")
        }
        let inStrides = s.inputStrides
        let pad = TransposeGeometry.maxRank - rank
        let dims = [Int](repeating: 1, count: pad) + s.outputDims
        let strides = [Int](repeating: 0, count: pad) + s.perm.map { inStrides[$0] }
        let k = try opsKernel("layout.cl", "transpose")
        try k.setArguments([.buffer(x), .buffer(y), .int(g.count), .int(s.exampleCount)]
                           + dims.map { .int($0) } + strides.map { .int($0) })
        try launchElementwise(k, count: g.count)
    }
}
