// Layout ops on OpenCL (Kernels/layout.cl): the strided copy every layout op that moves values runs
// as (transpose, concatND, …; Backend+Layout.swift). The geometry is simplified (size-1 axes
// dropped, axes in the destination's order, runs merged) and padded to the kernel's 7 axes.
import UpdraftCore

extension OpenCLBackend {
    /// Simplifies the copy and pads it to layout.cl's seven axes.
    public func stridedCopy(_ g: StridedCopy, from source: DeviceBuffer, to destination: DeviceBuffer) throws {
        try g.validate("\(name) strided copy")
        try requireSizes([], total: max(g.count, g.sourceExtent, g.destinationExtent), op: "strided copy")
        let x = try operand(source, holds: g.sourceExtent, "strided copy source")
        let y = try operand(destination, holds: g.destinationExtent, "strided copy destination")
        guard g.count > 0 else { return }
        let s = g.simplified
        let rank = s.dims.count
        guard rank <= StridedCopy.maxRank else {
            throw UpdraftError(.unsupported, "\(name) strided copy: \(rank) axes after merging (\(g.dims)); the kernel takes \(StridedCopy.maxRank)",
                               hint: "reshape to fewer axes before the layer")
        }
        let pad = StridedCopy.maxRank - rank
        let dims = [Int](repeating: 1, count: pad) + s.dims
        let from = [Int](repeating: 0, count: pad) + s.source.strides
        let to = [Int](repeating: 0, count: pad) + s.destination.strides
        let k = try opsKernel("layout.cl", "strided_copy")
        try k.setArguments([.buffer(x), .buffer(y), .int(g.count), .int(s.source.offset), .int(s.destination.offset)]
                           + (dims + from + to).map { .int($0) })
        try launchElementwise(k, count: g.count)
    }
}
