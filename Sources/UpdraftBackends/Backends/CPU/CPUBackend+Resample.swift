import UpdraftCore

// Resampling on the CPU (Ops/Resample.swift): one (n, c) plane per work item, each reading the taps
// of its example's table. Backward zeroes the plane and scatters dy into it with the forward's
// weights, so no two threads write one element.
extension CPUBackend {
    func resampleForward(_ g: SpatialGeometry, _ x: UnsafeMutablePointer<Float>, _ y: UnsafeMutablePointer<Float>) throws {
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        try resamplePlanes(g) { plane, rows, cols in
            let src = x + plane * H * W, dst = y + plane * Ho * Wo
            for oh in 0..<Ho {
                let r0 = src + rows.i0[oh] * W, r1 = src + rows.i1[oh] * W, fh = rows.f[oh]
                let row = dst + oh * Wo
                for ow in 0..<Wo {
                    let (c0, c1, fw) = (cols.i0[ow], cols.i1[ow], cols.f[ow])
                    let top = r0[c0] + fw * (r0[c1] - r0[c0])
                    let bottom = r1[c0] + fw * (r1[c1] - r1[c0])
                    row[ow] = top + fh * (bottom - top)
                }
            }
        }
    }

    func resampleBackward(_ g: SpatialGeometry, _ dy: UnsafeMutablePointer<Float>, _ dx: UnsafeMutablePointer<Float>) throws {
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        try resamplePlanes(g) { plane, rows, cols in
            let d = dx + plane * H * W, src = dy + plane * Ho * Wo
            d.update(repeating: 0, count: H * W)
            for oh in 0..<Ho {
                let r0 = d + rows.i0[oh] * W, r1 = d + rows.i1[oh] * W, fh = rows.f[oh]
                let row = src + oh * Wo
                for ow in 0..<Wo {
                    let (c0, c1, fw) = (cols.i0[ow], cols.i1[ow], cols.f[ow])
                    let top = (1 - fh) * row[ow], bottom = fh * row[ow]
                    r0[c0] += (1 - fw) * top; r0[c1] += fw * top
                    r1[c0] += (1 - fw) * bottom; r1[c1] += fw * bottom
                }
            }
        }
    }

    /// Both directions' loop: each (n, c) plane, in parallel, with its example's row and column taps.
    private func resamplePlanes(_ g: SpatialGeometry,
                                _ body: (_ plane: Int, _ rows: CPUResampleTable.Axis, _ cols: CPUResampleTable.Axis) -> Void) throws {
        let table = try CPUResampleTable(g)
        let C = g.channels
        parallelChunks(g.batch * C, grain: spatialGrain(g.outHeight * g.outWidth)) { range in
            for plane in range {
                let (rows, cols) = table[plane / C]
                body(plane, rows, cols)
            }
        }
    }
}

/// A geometry's taps as the loops read them: per table and axis, the two positions and the float
/// weight of the second.
private struct CPUResampleTable {
    typealias Axis = (i0: [Int], i1: [Int], f: [Float])
    let table: ResampleTable
    let rows: [Axis], columns: [Axis]

    init(_ g: SpatialGeometry) throws {
        let t = try g.resampleTable()
        func axis(_ taps: [ResampleTap]) -> Axis { (taps.map(\.i0), taps.map(\.i1), taps.map { Float($0.f) }) }
        table = t
        rows = t.rows.map(axis)
        columns = t.columns.map(axis)
    }

    /// The row and column taps of example `n`.
    subscript(n: Int) -> (Axis, Axis) {
        let t = table.index(ofExample: n)
        return (rows[t], columns[t])
    }
}
