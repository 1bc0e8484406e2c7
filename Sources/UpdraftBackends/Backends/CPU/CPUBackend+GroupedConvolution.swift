// Depthwise and grouped convolutions with few input channels per group, computed directly: no im2col,
// no GEMM. With Cg = Cin/G input channels per group (1 for depthwise) and Mg = Cout/G outputs per group
// (the depthwise multiplier), output channel co of group g = co / Mg reads only input channels
// g*Cg ..< (g+1)*Cg, so the generic path's per-group GEMMs are [Mg, Cg*kH*kW] x [Cg*kH*kW, S]
// products too thin for BLAS, each behind an im2col that copies the input kH*kW times.
//
// Here every loop runs along an output (or input) row, one kernel tap at a time:
//   forward          y[co, oh, :]  += w[co, c, kh, kw] * x[g*Cg + c, oh*sh - pt + kh*dh, (: )*sw - pl + kw*dw]
//   backward data    dx[c, ih, :]  += w[co, c', kh, kw] * dy[co, oh, :]   scattered back along the row
//   backward weights dw[co, c, kh, kw] = sum over images and rows of dot(dy[co, oh, :], x[..., row, :])
// Forward and backward data split (image, channel) pairs over the threads; backward weights splits
// output channels, each summing over the whole batch itself, so no partial sums are needed and the
// result does not depend on the thread count.
import CUpdraftKernels
import UpdraftCore

/// The column ranges of each kernel tap, resolved once per call.
struct GroupedConvolutionPlan {
    let g: ConvGeometry
    let cg: Int, mg: Int, plane: Int, outPlane: Int, taps: Int
    /// Per kw: the output columns [lo, hi) whose input column `ow * strideW + offset` is inside the
    /// input, and that offset (kw * dilationW - padLeft).
    let columnLo: [Int], columnHi: [Int], columnOffset: [Int]

    init(_ g: ConvGeometry) {
        self.g = g
        cg = g.inChannels / g.groups; mg = g.outChannels / g.groups
        plane = g.inHeight * g.inWidth; outPlane = g.outHeight * g.outWidth; taps = g.kernelH * g.kernelW
        var lo: [Int] = [], hi: [Int] = [], off: [Int] = []
        for kw in 0..<g.kernelW {
            let offset = kw * g.dilationW - g.padLeft
            let l = min(g.outWidth, max(0, CPUKernels.ceilDiv(-offset, g.strideW)))
            lo.append(l)
            hi.append(min(g.outWidth, max(l, CPUKernels.ceilDiv(g.inWidth - offset, g.strideW))))
            off.append(offset)
        }
        columnLo = lo; columnHi = hi; columnOffset = off
    }

    /// The output rows [lo, hi) whose input row `oh * strideH + offset` is inside the input.
    @inline(__always) func rows(offset: Int) -> Range<Int> {
        let lo = min(g.outHeight, max(0, CPUKernels.ceilDiv(-offset, g.strideH)))
        return lo..<min(g.outHeight, max(lo, CPUKernels.ceilDiv(g.inHeight - offset, g.strideH)))
    }
}

extension CPUBackend {
    /// Input channels per group times kernel taps up to which a grouped convolution runs directly
    /// (depthwise 3x3: 9; a 3x3 convolution with 4 channels per group: 36). Above it the per-group
    /// GEMMs are wide enough for BLAS to win.
    static let groupedDirectMaxDepth = 64

    /// True for grouped convolutions (depthwise included) that take the direct path.
    func usesGroupedDirect(_ g: ConvGeometry) -> Bool {
        g.groups > 1 && g.inChannels / g.groups * g.kernelH * g.kernelW <= Self.groupedDirectMaxDepth
    }

    // MARK: Forward
    //
    // Forward splits the zero-padded input into phase planes, one per (row mod strideH, column mod
    // strideW): P_ab[u, v] = x[u*strideH + a - padTop, v*strideW + b - padLeft] (0 outside). Tap (kh, kw)
    // then reads phase ((kh*dH) mod sH, (kw*dW) mod sW) at the fixed offset ((kh*dH) div sH, (kw*dW) div sW),
    // so with output rows laid out as wide as a phase row (V >= Wo; the columns past Wo are scratch), the
    // whole output plane is one contiguous sum over the taps: no per-row bounds, every load a vector.

    /// Floats of a phase plane (U + 1 rows of V; the spare row keeps the last taps' reads in bounds),
    /// and of one worker's scratch: the group's phase planes and one wide output plane.
    func groupedPhaseSizes(_ g: ConvGeometry) -> (rows: Int, width: Int, plane: Int, scratch: Int) {
        let u = g.outHeight + (g.kernelH - 1) * g.dilationH / g.strideH
        let v = g.outWidth + (g.kernelW - 1) * g.dilationW / g.strideW
        let plane = (u + 1) * v
        return (u, v, plane, g.inChannels / g.groups * g.strideH * g.strideW * plane + g.outHeight * v)
    }

    /// Adds the convolution of image `n`'s group `group` into `y` (the image's output channel 0; channel
    /// co at `y + co * S`), which already holds the bias (or zeros). `scratch` holds `groupedPhaseSizes`' floats.
    func groupedDirectForward(_ p: GroupedConvolutionPlan, image x: UnsafePointer<Float>, group: Int,
                              w: UnsafePointer<Float>, y: UnsafeMutablePointer<Float>, scratch: UnsafeMutablePointer<Float>) {
        let g = p.g
        let (sh, sw) = (g.strideH, g.strideW)
        let (rows, width, planeFloats, _) = groupedPhaseSizes(g)
        let phases = sh * sw
        // The phase planes of the group's input channels.
        for c in 0..<p.cg {
            let source = x + (group * p.cg + c) * p.plane
            for a in 0..<sh {
                for b in 0..<sw {
                    let plane = scratch + ((c * sh + a) * sw + b) * planeFloats
                    let lo = min(width, max(0, CPUKernels.ceilDiv(g.padLeft - b, sw)))
                    let hi = min(width, max(lo, CPUKernels.ceilDiv(g.inWidth + g.padLeft - b, sw)))
                    for u in 0...rows {
                        let row = plane + u * width
                        let ih = u * sh + a - g.padTop
                        guard ih >= 0, ih < g.inHeight, lo < hi else { row.update(repeating: 0, count: width); continue }
                        CPUKernels.gatherStridedRow(source + ih * g.inWidth + b - g.padLeft, stride: sw,
                                                    into: row, lo: lo, hi: hi, width: width)
                    }
                }
            }
        }
        let wide = scratch + p.cg * phases * planeFloats
        let count = g.outHeight * width
        let taps = p.cg * p.taps
        withUnsafeTemporaryAllocation(of: UnsafePointer<Float>?.self, capacity: taps) { sources in
            // Where each tap (c, kh, kw) reads, in the weights' order.
            for c in 0..<p.cg {
                for kh in 0..<g.kernelH {
                    for kw in 0..<g.kernelW {
                        let (dh, dw) = (kh * g.dilationH, kw * g.dilationW)
                        let plane = scratch + ((c * sh + dh % sh) * sw + dw % sw) * planeFloats
                        sources[(c * g.kernelH + kh) * g.kernelW + kw] = UnsafePointer(plane + dh / sh * width + dw / sw)
                    }
                }
            }
            for m in 0..<p.mg {
                let co = group * p.mg + m
                // At the CPU's vector level (CUpdraftKernels), then added row by row into the output.
                upd_tap_sum(sources.baseAddress!, w + co * taps, taps, wide, count)
                let yc = y + co * p.outPlane
                for oh in 0..<g.outHeight { upd_add(yc + oh * g.outWidth, wide + oh * width, g.outWidth) }
            }
        }
    }

    /// dst[ow] += a * src[ow * stride] for ow in lo..<hi; reads stay below `limit`.
    @inline(__always)
    static func rowMultiplyAdd(_ a: Float, source src: UnsafePointer<Float>, stride: Int,
                               into dst: UnsafeMutablePointer<Float>, _ lo: Int, _ hi: Int, limit: UnsafePointer<Float>) {
        let av = SIMD4<Float>(repeating: a)
        var ow = lo
        if stride == 1 {
            while ow + 8 <= hi {
                let d0 = CPUKernels.load4(dst + ow), d1 = CPUKernels.load4(dst + ow + 4)
                let s0 = CPUKernels.load4(src + ow), s1 = CPUKernels.load4(src + ow + 4)
                CPUKernels.store4(d0 + av * s0, dst + ow)
                CPUKernels.store4(d1 + av * s1, dst + ow + 4)
                ow += 8
            }
            while ow + 4 <= hi {
                CPUKernels.store4(CPUKernels.load4(dst + ow) + av * CPUKernels.load4(src + ow), dst + ow)
                ow += 4
            }
        } else if stride == 2 {
            // Eight floats read for four kept: the last must still be inside the input.
            while ow + 4 <= hi, src + 2 * ow + 8 <= limit {
                CPUKernels.store4(CPUKernels.load4(dst + ow) + av * CPUKernels.loadEven4(src + 2 * ow), dst + ow)
                ow += 4
            }
        }
        while ow < hi { dst[ow] += a * src[ow * stride]; ow += 1 }
    }

    // MARK: Backward data

    /// Writes dx for a run of (image, input channel) pairs: zeroes each input plane, then scatters
    /// every output gradient row of the group's output channels back through the kernel taps.
    func groupedDirectBackwardData(_ p: GroupedConvolutionPlan, dy: UnsafePointer<Float>, w: UnsafePointer<Float>,
                                   dx: UnsafeMutablePointer<Float>) {
        let g = p.g
        let work = p.outPlane * p.mg * p.taps
        parallelChunks(g.batch * g.inChannels, grain: max(1, CPUParallel.elementGrain / max(1, work))) { pairs in
            for pair in pairs {
                let n = pair / g.inChannels, c = pair - n * g.inChannels
                let group = c / p.cg, local = c - group * p.cg
                let dxc = dx + pair * p.plane
                dxc.update(repeating: 0, count: p.plane)
                for m in 0..<p.mg {
                    let co = group * p.mg + m
                    let dyc = dy + (n * g.outChannels + co) * p.outPlane
                    let wk = w + (co * p.cg + local) * p.taps
                    for oh in 0..<g.outHeight {
                        let src = dyc + oh * g.outWidth
                        for kh in 0..<g.kernelH {
                            let ih = oh * g.strideH + kh * g.dilationH - g.padTop
                            guard ih >= 0, ih < g.inHeight else { continue }
                            let row = dxc + ih * g.inWidth
                            for kw in 0..<g.kernelW {
                                let (lo, hi) = (p.columnLo[kw], p.columnHi[kw])
                                guard lo < hi else { continue }
                                Self.rowScatterAdd(wk[kh * g.kernelW + kw], source: src, stride: g.strideW,
                                                   into: row + p.columnOffset[kw], lo, hi)
                            }
                        }
                    }
                }
            }
        }
    }

    /// dst[ow * stride] += a * src[ow] for ow in lo..<hi.
    @inline(__always)
    static func rowScatterAdd(_ a: Float, source src: UnsafePointer<Float>, stride: Int,
                              into dst: UnsafeMutablePointer<Float>, _ lo: Int, _ hi: Int) {
        var ow = lo
        if stride == 1 {
            let av = SIMD4<Float>(repeating: a)
            while ow + 4 <= hi {
                CPUKernels.store4(CPUKernels.load4(dst + ow) + av * CPUKernels.load4(src + ow), dst + ow)
                ow += 4
            }
        }
        while ow < hi { dst[ow * stride] += a * src[ow]; ow += 1 }
    }

    // MARK: Backward weights

    /// dw for every output channel, each summed over the whole batch by one thread.
    func groupedDirectBackwardWeights(_ p: GroupedConvolutionPlan, x: UnsafePointer<Float>, xEnd: UnsafePointer<Float>,
                                      dy: UnsafePointer<Float>, dw: UnsafeMutablePointer<Float>) {
        let g = p.g
        let work = g.batch * p.outPlane * p.cg * p.taps
        parallelChunks(g.outChannels, grain: max(1, CPUParallel.elementGrain / max(1, work))) { cos in
            for co in cos {
                let group = co / p.mg
                let dwc = dw + co * p.cg * p.taps
                dwc.update(repeating: 0, count: p.cg * p.taps)
                for n in 0..<g.batch {
                    let dyc = dy + (n * g.outChannels + co) * p.outPlane
                    for c in 0..<p.cg {
                        let source = x + (n * g.inChannels + group * p.cg + c) * p.plane
                        for kh in 0..<g.kernelH {
                            let rowOffset = kh * g.dilationH - g.padTop
                            let rows = p.rows(offset: rowOffset)
                            for kw in 0..<g.kernelW {
                                let (lo, hi) = (p.columnLo[kw], p.columnHi[kw])
                                guard lo < hi, !rows.isEmpty else { continue }
                                var total: Float = 0
                                for oh in rows {
                                    total += Self.rowDot(dyc + oh * g.outWidth,
                                                         source + (oh * g.strideH + rowOffset) * g.inWidth + p.columnOffset[kw],
                                                         stride: g.strideW, lo, hi, limit: xEnd)
                                }
                                dwc[c * p.taps + kh * g.kernelW + kw] += total
                            }
                        }
                    }
                }
            }
        }
    }

    /// sum of a[ow] * b[ow * stride] for ow in lo..<hi; reads of b stay below `limit`.
    @inline(__always)
    static func rowDot(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, stride: Int, _ lo: Int, _ hi: Int,
                       limit: UnsafePointer<Float>) -> Float {
        var acc = SIMD4<Float>()
        var ow = lo
        if stride == 1 {
            while ow + 4 <= hi { acc += CPUKernels.load4(a + ow) * CPUKernels.load4(b + ow); ow += 4 }
        } else if stride == 2 {
            while ow + 4 <= hi, b + 2 * ow + 8 <= limit {
                acc += CPUKernels.load4(a + ow) * CPUKernels.loadEven4(b + 2 * ow)
                ow += 4
            }
        }
        var total = acc.sum()
        while ow < hi { total += a[ow] * b[ow * stride]; ow += 1 }
        return total
    }
}
