// Layout ops on the CPU: the permuted copy (transpose / permute). The geometry is simplified first
// (size-1 axes dropped, runs of axes merged); the innermost output axis is walked with the input
// stride of its axis, the outer ones with an odometer, so there is no division per element.
import UpdraftCore

extension CPUBackend {
    /// Drops size-1 axes and merges runs first; an identity permutation is one copy.
    public func transpose(_ g: TransposeGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try g.validate("\(name) transpose")
        let x = try pointer(input, g.count, "transpose input")
        let y = try pointer(output, g.count, "transpose output")
        let s = g.simplified
        if s.isIdentity {
            y.update(from: x, count: g.count)
            return
        }
        let rank = s.dims.count
        let outDims = s.outputDims
        let inStrides = s.inputStrides
        let strides = s.perm.map { inStrides[$0] }     // input stride of each output axis
        let inner = outDims[rank - 1], innerStride = strides[rank - 1]
        let rows = s.exampleCount / inner               // output rows of one example
        let example = s.exampleCount
        parallelChunks(g.batch * rows, grain: max(1, 16_384 / max(1, inner))) { items in
            var index = [Int](repeating: 0, count: max(rank - 1, 1))
            var first = true
            var base = 0
            for item in items {
                let n = item / rows, row = item % rows
                if first || row == 0 {
                    // Start the odometer at `row`.
                    var r = row
                    base = 0
                    for k in stride(from: rank - 2, through: 0, by: -1) {
                        index[k] = r % outDims[k]; r /= outDims[k]
                        base += index[k] * strides[k]
                    }
                    first = false
                }
                let src = x + n * example + base, dst = y + n * example + row * inner
                if innerStride == 1 {
                    dst.update(from: src, count: inner)
                } else {
                    for j in 0..<inner { dst[j] = src[j * innerStride] }
                }
                // Advance the odometer to the next row.
                var k = rank - 2
                while k >= 0 {
                    index[k] += 1
                    base += strides[k]
                    if index[k] < outDims[k] { break }
                    base -= index[k] * strides[k]
                    index[k] = 0
                    k -= 1
                }
            }
        }
    }
}
