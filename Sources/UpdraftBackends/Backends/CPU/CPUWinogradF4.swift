// The transforms of Winograd F(4x4, 3x3) (see CPUBackend+Winograd.swift for the algorithm and the
// driver they plug into): each 4x4 block of outputs comes from a 6x6 tile of the input, with the
// interpolation points 0, 1, -1, 2, -2 and infinity.
//
//   B^T = | 4  0 -5  0  1  0 |   G = |  1/4     0     0  |   A^T = | 1  1  1  1  1  0 |
//         | 0 -4 -4  1  1  0 |       | -1/6  -1/6  -1/6  |         | 0  1 -1  2 -2  0 |
//         | 0  4 -4 -1  1  0 |       | -1/6   1/6  -1/6  |         | 0  1  1  4  4  0 |
//         | 0 -2 -1  2  1  0 |       | 1/24  1/12   1/6  |         | 0  1 -1  8 -8  1 |
//         | 0  2 -1 -2  1  0 |       | 1/24 -1/12   1/6  |
//         | 0  4  0 -5  0  1 |       |   0     0     1   |
//
// Four neighbouring tiles of a row go together, one SIMD lane per tile. The input transform reads a
// zero-padded copy of the image's channel plane (`winograd4PlaneCount` floats of the worker's scratch),
// so every tile, the edges' included, takes the same branch-free path.
import UpdraftCore

/// What the 1-D transforms need of their operands: one SIMD lane per tile (SIMD4), or six of those
/// (a row of a tile), so that one generic function transforms rows and columns alike.
protocol WinogradLanes {
    static func + (a: Self, b: Self) -> Self
    static func - (a: Self, b: Self) -> Self
    static func * (s: Float, a: Self) -> Self
}

extension SIMD4: WinogradLanes where Scalar == Float {}

/// Six SIMD4 values: one row (or column) of a 6x6 tile for four tiles at once.
struct WinogradSix: WinogradLanes {
    var x0, x1, x2, x3, x4, x5: SIMD4<Float>

    @inline(__always) static func + (a: Self, b: Self) -> Self {
        Self(x0: a.x0 + b.x0, x1: a.x1 + b.x1, x2: a.x2 + b.x2, x3: a.x3 + b.x3, x4: a.x4 + b.x4, x5: a.x5 + b.x5)
    }
    @inline(__always) static func - (a: Self, b: Self) -> Self {
        Self(x0: a.x0 - b.x0, x1: a.x1 - b.x1, x2: a.x2 - b.x2, x3: a.x3 - b.x3, x4: a.x4 - b.x4, x5: a.x5 - b.x5)
    }
    @inline(__always) static func * (s: Float, a: Self) -> Self {
        Self(x0: s * a.x0, x1: s * a.x1, x2: s * a.x2, x3: s * a.x3, x4: s * a.x4, x5: s * a.x5)
    }
}

/// B^T x for six values x (rows of B^T above), sharing the common sums.
@inline(__always)
func winograd4InputRows<T: WinogradLanes>(_ x0: T, _ x1: T, _ x2: T, _ x3: T, _ x4: T, _ x5: T) -> (T, T, T, T, T, T) {
    let a = x4 - 4 * x2, b = x3 - 4 * x1
    let c = x4 - x2, e = 2 * (x3 - x1)
    return (4 * x0 - 5 * x2 + x4, a + b, a - b, c + e, c - e, 4 * x1 - 5 * x3 + x5)
}

/// A^T x for six values x (rows of A^T above).
@inline(__always)
func winograd4OutputRows<T: WinogradLanes>(_ x0: T, _ x1: T, _ x2: T, _ x3: T, _ x4: T, _ x5: T) -> (T, T, T, T) {
    let s = x1 + x2, d = x1 - x2, s2 = x3 + x4, d2 = x3 - x4
    return (x0 + s + s2, d + 2 * d2, s + 4 * s2, d + 8 * d2 + x5)
}

extension CPUBackend {
    /// Floats of the zero-padded plane the input transform reads: 4 rows per tile row plus 2, and 4
    /// columns per tile column plus 16 (so the 16-wide loads of a group of four lanes never read past the copy).
    func winograd4PlaneCount(_ tiles: (rows: Int, columns: Int, count: Int)) -> Int {
        (tiles.rows * 4 + 2) * (tiles.columns * 4 + 16)
    }

    /// U[xi][k][c] = (G g_kc G^T)[xi] for every filter: `36 * Cout * Cin` floats at `u`. Four filters
    /// of neighbouring input channels go together, one SIMD lane each, so each of the 36 values is one
    /// 4-wide store.
    func winograd4Filters(_ g: ConvGeometry, weights w: UnsafePointer<Float>, into u: UnsafeMutablePointer<Float>, parallel: Bool) {
        let (K, C) = (g.outChannels, g.inChannels)
        let plane = K * C
        @inline(__always) func column(_ a: SIMD4<Float>, _ b: SIMD4<Float>, _ c: SIMD4<Float>)
            -> (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>) {
            let sixth: Float = 1.0 / 6, twelfth: Float = 1.0 / 12, twentyFourth: Float = 1.0 / 24
            let ac = a + c, quarterish = twentyFourth * a + sixth * c
            return (0.25 * a, -sixth * (ac + b), -sixth * (ac - b), quarterish + twelfth * b, quarterish - twelfth * b, c)
        }
        chunks(K, grain: max(1, 1024 / max(1, C)), parallel: parallel) { ks in
            for k in ks {
                var c = 0
                while c < C {
                    let lanes = min(4, C - c)
                    // Lane l holds filter (k, c + l); lanes past the last channel repeat it and are not stored.
                    let f = w + (k * C + c) * 9
                    let (o1, o2, o3) = (9 * min(1, lanes - 1), 9 * min(2, lanes - 1), 9 * min(3, lanes - 1))
                    @inline(__always) func weight(_ i: Int) -> SIMD4<Float> { SIMD4(f[i], f[o1 + i], f[o2 + i], f[o3 + i]) }
                    // s = G g (6x3, one call per filter column), then U = s G^T row by row.
                    let s0 = column(weight(0), weight(3), weight(6))
                    let s1 = column(weight(1), weight(4), weight(7))
                    let s2 = column(weight(2), weight(5), weight(8))
                    let at = u + k * C + c
                    @inline(__always) func store(_ i: Int, _ a: SIMD4<Float>, _ b: SIMD4<Float>, _ c: SIMD4<Float>) {
                        let (r0, r1, r2, r3, r4, r5) = column(a, b, c)
                        @inline(__always) func put(_ j: Int, _ r: SIMD4<Float>) {
                            let o = at + (i * 6 + j) * plane
                            if lanes == 4 { CPUKernels.store4(r, o) } else { for l in 0..<lanes { o[l] = r[l] } }
                        }
                        put(0, r0); put(1, r1); put(2, r2); put(3, r3); put(4, r4); put(5, r5)
                    }
                    store(0, s0.0, s1.0, s2.0); store(1, s0.1, s1.1, s2.1); store(2, s0.2, s1.2, s2.2)
                    store(3, s0.3, s1.3, s2.3); store(4, s0.4, s1.4, s2.4); store(5, s0.5, s1.5, s2.5)
                    c += lanes
                }
            }
        }
    }

    /// V for one input channel (its plane in image 0 at `input`, `imageStride` apart): value xi of the
    /// batch's tile `first + t` goes to `v[xi * stride + t]`. Each image's plane is first copied, with
    /// its padding as zeros, into `plane`.
    func winograd4InputTransform(_ g: ConvGeometry, input: UnsafePointer<Float>, imageStride: Int,
                                 tiles: (rows: Int, columns: Int, count: Int), first: Int, count: Int,
                                 v: UnsafeMutablePointer<Float>, stride: Int, plane: UnsafeMutablePointer<Float>) {
        let (H, W) = (g.inHeight, g.inWidth)
        let PH = tiles.rows * 4 + 2, PW = tiles.columns * 4 + 16
        var copied = -1
        winogradWalk(tiles, first: first, count: count) { t, image, tileRow, column in
            if image != copied {
                plane.update(repeating: 0, count: PH * PW)
                let x = input + image * imageStride
                let width = min(W, PW - g.padLeft)
                if width > 0 {
                    for iy in 0..<min(H, PH - g.padTop) {
                        (plane + (iy + g.padTop) * PW + g.padLeft).update(from: x + iy * W, count: width)
                    }
                }
                copied = image
            }
            let lanes = min(4, count - t, tiles.columns - column)
            let base = UnsafePointer(plane + tileRow * 4 * PW + column * 4)
            // Lane l of x_j is p[4l + j]: two 16-wide loads (at 0 and 4) split by lane position mod 4.
            @inline(__always) func row(_ r: Int) -> WinogradSix {
                let p = UnsafeRawPointer(base + r * PW)
                let a = p.loadUnaligned(as: SIMD16<Float>.self), b = p.loadUnaligned(fromByteOffset: 16, as: SIMD16<Float>.self)
                let ae = a.evenHalf, ao = a.oddHalf
                return WinogradSix(x0: ae.evenHalf, x1: ao.evenHalf, x2: ae.oddHalf, x3: ao.oddHalf,
                                   x4: b.evenHalf.evenHalf, x5: b.oddHalf.evenHalf)
            }
            let (t0, t1, t2, t3, t4, t5) = winograd4InputRows(row(0), row(1), row(2), row(3), row(4), row(5))
            @inline(__always) func store(_ i: Int, _ r: WinogradSix) {
                let (a, b, c, d, e, f) = winograd4InputRows(r.x0, r.x1, r.x2, r.x3, r.x4, r.x5)
                let o = v + i * 6 * stride + t
                if lanes == 4 {
                    CPUKernels.store4(a, o); CPUKernels.store4(b, o + stride); CPUKernels.store4(c, o + 2 * stride)
                    CPUKernels.store4(d, o + 3 * stride); CPUKernels.store4(e, o + 4 * stride); CPUKernels.store4(f, o + 5 * stride)
                } else {
                    for l in 0..<lanes {
                        o[l] = a[l]; o[stride + l] = b[l]; o[2 * stride + l] = c[l]
                        o[3 * stride + l] = d[l]; o[4 * stride + l] = e[l]; o[5 * stride + l] = f[l]
                    }
                }
            }
            store(0, t0); store(1, t1); store(2, t2); store(3, t3); store(4, t4); store(5, t5)
            return lanes
        }
    }

    /// Y for one output channel: the batch's tile `first + t` has its 36 values at `m[xi * stride + t]`;
    /// its 4x4 outputs (those inside the output) get `bias` added (and with `relu` the ReLU applied, saving
    /// the epilogue's pass over the output) and go to the channel's plane of its image (image 0's at
    /// `output`, `imageStride` apart).
    func winograd4OutputTransform(_ g: ConvGeometry, m: UnsafePointer<Float>, stride: Int,
                                  tiles: (rows: Int, columns: Int, count: Int), first: Int, count: Int,
                                  bias: Float, residual: UnsafePointer<Float>? = nil, relu: Bool,
                                  output: UnsafeMutablePointer<Float>, imageStride: Int) {
        let (Ho, Wo) = (g.outHeight, g.outWidth)
        let b = SIMD4<Float>(repeating: bias)
        // The fused ReLU, as the activation table defines it: x > 0 ? x : 0 (NaN gives 0).
        // With a residual the ReLU comes after the add (`addResidual`), so the rows are stored without it.
        let reluFirst = relu && residual == nil
        @inline(__always) func activated(_ v: SIMD4<Float>) -> SIMD4<Float> {
            reluFirst ? SIMD4<Float>.zero.replacing(with: v, where: v .> 0) : v
        }
        winogradWalk(tiles, first: first, count: count) { t, image, tileRow, column in
            let lanes = min(4, count - t, tiles.columns - column)
            // Always four lanes: past the block's last tile they read the next channel's values, or (for
            // the last) the padded plane that follows M in the scratch; those lanes are never written out.
            @inline(__always) func load(_ xi: Int) -> SIMD4<Float> { CPUKernels.load4(m + xi * stride + t) }
            @inline(__always) func row(_ i: Int) -> WinogradSix {
                WinogradSix(x0: load(6 * i), x1: load(6 * i + 1), x2: load(6 * i + 2),
                            x3: load(6 * i + 3), x4: load(6 * i + 4), x5: load(6 * i + 5))
            }
            let (a0, a1, a2, a3) = winograd4OutputRows(row(0), row(1), row(2), row(3), row(4), row(5))
            let oy = tileRow * 4, ox = column * 4
            let y = output + image * imageStride + oy * Wo + ox
            // The row's outputs inside the image: 16 for four whole tiles, fewer at the right edge.
            let width = min(4 * lanes, Wo - ox)
            @inline(__always) func write(_ i: Int, _ a: WinogradSix) {
                guard oy + i < Ho else { return }
                let (c0, c1, c2, c3) = winograd4OutputRows(a.x0, a.x1, a.x2, a.x3, a.x4, a.x5)
                let (y0, y1, y2, y3) = (activated(c0 + b), activated(c1 + b), activated(c2 + b), activated(c3 + b))
                // Lane l's four outputs are columns 4l ..< 4l + 4: one 16-wide row.
                let r = SIMD16<Float>(y0[0], y1[0], y2[0], y3[0], y0[1], y1[1], y2[1], y3[1],
                                      y0[2], y1[2], y2[2], y3[2], y0[3], y1[3], y2[3], y3[3])
                let p = UnsafeMutableRawPointer(y + i * Wo)
                if width == 16 { return p.storeBytes(of: r, as: SIMD16<Float>.self) }
                var done = 0
                if width >= 8 { p.storeBytes(of: r.lowHalf, as: SIMD8<Float>.self); done = 8 }
                if width - done >= 4 {
                    p.storeBytes(of: done == 0 ? r.lowHalf.lowHalf : r.highHalf.lowHalf, toByteOffset: 4 * done, as: SIMD4<Float>.self)
                    done += 4
                }
                for j in done..<width { p.storeBytes(of: r[j], toByteOffset: 4 * j, as: Float.self) }
            }
            write(0, a0); write(1, a1); write(2, a2); write(3, a3)
            if let residual {
                // The rows just written are in L1: add the residual (and apply the ReLU) there.
                let from = residual + image * imageStride + oy * Wo + ox
                for i in 0..<min(4, Ho - oy) { addResidual(y + i * Wo, from + i * Wo, width, relu: relu) }
            }
            return lanes
        }
    }

    /// y[j] += r[j] for j < count, then the ReLU when `relu` (x > 0 ? x : 0, NaN gives 0): the residual of a
    /// fused add, over a few outputs still in cache.
    @inline(__always)
    func addResidual(_ y: UnsafeMutablePointer<Float>, _ r: UnsafePointer<Float>, _ count: Int, relu: Bool) {
        if relu {
            for j in 0..<count { let v = y[j] + r[j]; y[j] = v > 0 ? v : 0 }
        } else {
            for j in 0..<count { y[j] += r[j] }
        }
    }
}
