// Layout ops on the CPU: the strided copy every layout op that moves values runs as (transpose,
// concatND, …; Backend+Layout.swift). The geometry is simplified first (size-1 axes dropped, axes in
// the destination's order, runs merged); the innermost axis is walked with its two strides (one
// block copy when both are 1), the outer ones with an odometer, so there is no division per element.
import UpdraftCore

extension CPUBackend {
    /// Simplifies the copy, then copies rows of its innermost axis in parallel (the destination view
    /// reaches each element once, so the rows never write the same element).
    public func stridedCopy(_ g: StridedCopy, from source: DeviceBuffer, to destination: DeviceBuffer) throws {
        try g.validate("\(name) strided copy")
        let x = try pointer(source, g.sourceExtent, "strided copy source")
        let y = try pointer(destination, g.destinationExtent, "strided copy destination")
        guard g.count > 0 else { return }
        let s = g.simplified
        let rank = s.dims.count
        let dims = s.dims, from = s.source.strides, to = s.destination.strides
        let inner = dims[rank - 1], innerFrom = from[rank - 1], innerTo = to[rank - 1]
        let rows = s.count / inner
        let x0 = x + s.source.offset, y0 = y + s.destination.offset
        parallelChunks(rows, grain: max(1, 16_384 / max(1, inner))) { items in
            var index = [Int](repeating: 0, count: max(rank - 1, 1))
            var first = true
            var read = 0, write = 0
            for row in items {
                if first {
                    // Start the odometer at `row`.
                    var r = row
                    read = 0; write = 0
                    for k in stride(from: rank - 2, through: 0, by: -1) {
                        index[k] = r % dims[k]; r /= dims[k]
                        read += index[k] * from[k]; write += index[k] * to[k]
                    }
                    first = false
                }
                let src = x0 + read, dst = y0 + write
                if innerFrom == 1 && innerTo == 1 {
                    dst.update(from: src, count: inner)
                } else {
                    for j in 0..<inner { dst[j * innerTo] = src[j * innerFrom] }
                }
                // Advance the odometer to the next row.
                var k = rank - 2
                while k >= 0 {
                    index[k] += 1
                    read += from[k]; write += to[k]
                    if index[k] < dims[k] { break }
                    read -= index[k] * from[k]; write -= index[k] * to[k]
                    index[k] = 0
                    k -= 1
                }
            }
        }
    }
}
