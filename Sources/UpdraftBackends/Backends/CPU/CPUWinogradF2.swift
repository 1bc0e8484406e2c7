// The transforms of Winograd F(2x2, 3x3) (see CPUBackend+Winograd.swift for the algorithm and the
// driver they plug into): each 2x2 block of outputs comes from a 4x4 tile of the input.
//
//   B^T = | 1  0 -1  0 |    G = |  1    0    0  |    A^T = | 1  1  1  0 |
//         | 0  1  1  0 |        | 1/2  1/2  1/2 |          | 0  1 -1 -1 |
//         | 0 -1  1  0 |        | 1/2 -1/2  1/2 |
//         | 0  1  0 -1 |        |  0    0    1  |
import UpdraftCore

extension CPUBackend {
    /// U[xi][k][c] = (G g_kc G^T)[xi] for every filter: `16 * Cout * Cin` floats at `u`.
    func winograd2Filters(_ g: ConvGeometry, weights w: UnsafePointer<Float>, into u: UnsafeMutablePointer<Float>, parallel: Bool) {
        let (K, C) = (g.outChannels, g.inChannels)
        let plane = K * C
        chunks(K, grain: max(1, 4096 / max(1, C)), parallel: parallel) { ks in
            for k in ks {
                for c in 0..<C {
                    let f = w + (k * C + c) * 9
                    // s = G g (4x3), then U = s G^T (4x4).
                    @inline(__always) func column(_ j: Int) -> SIMD4<Float> {
                        let g0 = f[j], g1 = f[3 + j], g2 = f[6 + j]
                        return SIMD4(g0, 0.5 * (g0 + g1 + g2), 0.5 * (g0 - g1 + g2), g2)
                    }
                    let s0 = column(0), s1 = column(1), s2 = column(2)
                    let u0 = s0, u1 = 0.5 * (s0 + s1 + s2), u2 = 0.5 * (s0 - s1 + s2), u3 = s2
                    let at = k * C + c
                    for i in 0..<4 {
                        u[(i * 4 + 0) * plane + at] = u0[i]
                        u[(i * 4 + 1) * plane + at] = u1[i]
                        u[(i * 4 + 2) * plane + at] = u2[i]
                        u[(i * 4 + 3) * plane + at] = u3[i]
                    }
                }
            }
        }
    }

    /// V for one input channel (its plane in image 0 at `input`, `imageStride` apart): value xi of
    /// the batch's tile `first + t` goes to `v[xi * stride + t]`. Four neighbouring tiles of a row
    /// whose reads stay inside the input go together, one SIMD lane per tile (the even/odd gathers
    /// take their columns 2 apart); the rest, one at a time with zeros for the padding.
    func winograd2InputTransform(_ g: ConvGeometry, input: UnsafePointer<Float>, imageStride: Int,
                                        tiles: (rows: Int, columns: Int, count: Int),
                                        first: Int, count: Int, v: UnsafeMutablePointer<Float>, stride: Int) {
        let (H, W) = (g.inHeight, g.inWidth)
        winogradWalk(tiles, first: first, count: count) { t, image, tileRow, column in
            let x = input + image * imageStride
            let top = tileRow * 2 - g.padTop, left = column * 2 - g.padLeft
            // Rows above or below the input read as zero.
            @inline(__always) func rowPointer(_ r: Int) -> UnsafePointer<Float>? {
                let iy = top + r
                return iy >= 0 && iy < H ? x + iy * W : nil
            }
            if t + 4 <= count, column + 4 <= tiles.columns, left >= 0, left + 11 <= W {
                // d[r][j] for the four tiles: columns left + j, + 2, + 4, + 6.
                @inline(__always) func row(_ r: Int) -> (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>) {
                    guard let p = rowPointer(r) else { return (.zero, .zero, .zero, .zero) }
                    let q = p + left
                    return (CPUKernels.loadEven4(q), CPUKernels.loadEven4(q + 1), CPUKernels.loadEven4(q + 2), CPUKernels.loadEven4(q + 3))
                }
                let d0 = row(0), d1 = row(1), d2 = row(2), d3 = row(3)
                @inline(__always) func store(_ i: Int, _ r: (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>)) {
                    let o = v + i * 4 * stride + t
                    CPUKernels.store4(r.0 - r.2, o)
                    CPUKernels.store4(r.1 + r.2, o + stride)
                    CPUKernels.store4(r.2 - r.1, o + 2 * stride)
                    CPUKernels.store4(r.1 - r.3, o + 3 * stride)
                }
                store(0, (d0.0 - d2.0, d0.1 - d2.1, d0.2 - d2.2, d0.3 - d2.3))
                store(1, (d1.0 + d2.0, d1.1 + d2.1, d1.2 + d2.2, d1.3 + d2.3))
                store(2, (d2.0 - d1.0, d2.1 - d1.1, d2.2 - d1.2, d2.3 - d1.3))
                store(3, (d1.0 - d3.0, d1.1 - d3.1, d1.2 - d3.2, d1.3 - d3.3))
                return 4
            } else {
                let inside = left >= 0 && left + 4 <= W
                @inline(__always) func row(_ r: Int) -> SIMD4<Float> {
                    guard let p = rowPointer(r) else { return .zero }
                    if inside { return CPUKernels.load4(p + left) }
                    var out = SIMD4<Float>.zero
                    for j in 0..<4 where left + j >= 0 && left + j < W { out[j] = p[left + j] }
                    return out
                }
                let d0 = row(0), d1 = row(1), d2 = row(2), d3 = row(3)
                // B^T d: combinations of rows; then (B^T d) B: the same combinations of columns.
                @inline(__always) func store(_ i: Int, _ r: SIMD4<Float>) {
                    let o = v + i * 4 * stride + t
                    o[0] = r[0] - r[2]
                    o[stride] = r[1] + r[2]
                    o[2 * stride] = r[2] - r[1]
                    o[3 * stride] = r[1] - r[3]
                }
                store(0, d0 - d2)
                store(1, d1 + d2)
                store(2, d2 - d1)
                store(3, d1 - d3)
                return 1
            }
        }
    }

    /// Y for one output channel: the batch's tile `first + t` has its 16 values at `m[xi * stride + t]`;
    /// its 2x2 outputs (those inside the output) get `bias` added and go to the channel's plane of
    /// its image (image 0's at `output`, `imageStride` apart). Four neighbouring whole tiles of a row
    /// go together, one SIMD lane per tile, their outputs interleaved into 8-wide rows.
    func winograd2OutputTransform(_ g: ConvGeometry, m: UnsafePointer<Float>, stride: Int,
                                         tiles: (rows: Int, columns: Int, count: Int), first: Int, count: Int,
                                         bias: Float, residual: UnsafePointer<Float>? = nil, output: UnsafeMutablePointer<Float>,
                                         imageStride: Int) {
        let (Ho, Wo) = (g.outHeight, g.outWidth)
        winogradWalk(tiles, first: first, count: count) { t, image, tileRow, column in
            let y = output + image * imageStride
            let oy = tileRow * 2, ox = column * 2
            let p = y + oy * Wo + ox
            // The residual a fused add brings, at the same place of its own plane (nil: none).
            let q = residual.map { $0 + image * imageStride + oy * Wo + ox }
            if t + 4 <= count, column + 4 <= tiles.columns, ox + 8 <= Wo, oy + 2 <= Ho {
                @inline(__always) func load(_ xi: Int) -> SIMD4<Float> { CPUKernels.load4(m + xi * stride + t) }
                // A^T M, one row i at a time for the four columns j, then (A^T M) A.
                let a00 = load(0) + load(4) + load(8), a01 = load(1) + load(5) + load(9)
                let a02 = load(2) + load(6) + load(10), a03 = load(3) + load(7) + load(11)
                let a10 = load(4) - load(8) - load(12), a11 = load(5) - load(9) - load(13)
                let a12 = load(6) - load(10) - load(14), a13 = load(7) - load(11) - load(15)
                let b = SIMD4<Float>(repeating: bias)
                let y00 = a00 + a01 + a02 + b, y01 = a01 - a02 - a03 + b
                let y10 = a10 + a11 + a12 + b, y11 = a11 - a12 - a13 + b
                @inline(__always) func interleaved(_ e: SIMD4<Float>, _ o: SIMD4<Float>) -> SIMD8<Float> {
                    SIMD8(e[0], o[0], e[1], o[1], e[2], o[2], e[3], o[3])
                }
                var top = interleaved(y00, y01), bottom = interleaved(y10, y11)
                if let q {
                    top += UnsafeRawPointer(q).loadUnaligned(as: SIMD8<Float>.self)
                    bottom += UnsafeRawPointer(q + Wo).loadUnaligned(as: SIMD8<Float>.self)
                }
                UnsafeMutableRawPointer(p).storeBytes(of: top, as: SIMD8<Float>.self)
                UnsafeMutableRawPointer(p + Wo).storeBytes(of: bottom, as: SIMD8<Float>.self)
                return 4
            } else {
                @inline(__always) func row(_ i: Int) -> SIMD4<Float> {
                    let q = m + i * 4 * stride + t
                    return SIMD4(q[0], q[stride], q[2 * stride], q[3 * stride])
                }
                let m0 = row(0), m1 = row(1), m2 = row(2), m3 = row(3)
                // A^T M: two rows; then (A^T M) A: two columns of each.
                let a0 = m0 + m1 + m2, a1 = m1 - m2 - m3
                let y00 = a0[0] + a0[1] + a0[2] + bias, y01 = a0[1] - a0[2] - a0[3] + bias
                let y10 = a1[0] + a1[1] + a1[2] + bias, y11 = a1[1] - a1[2] - a1[3] + bias
                let right = ox + 1 < Wo, below = oy + 1 < Ho
                p[0] = y00 + (q?[0] ?? 0)
                if right { p[1] = y01 + (q?[1] ?? 0) }
                if below {
                    p[Wo] = y10 + (q?[Wo] ?? 0)
                    if right { p[Wo + 1] = y11 + (q?[Wo + 1] ?? 0) }
                }
                return 1
            }
        }
    }
}
