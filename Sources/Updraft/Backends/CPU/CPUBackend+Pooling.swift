// Pooling, one (n, c) plane per work item, planes split over threads. x [N, C, H, W] -> y [N, C, Ho, Wo].
// Window (oh, ow) covers rows oh*strideH - padTop ..< + kernelH and the matching columns; only its
// in-image part takes part. Max: the first maximum in row-major window order (strictly greater
// replaces), backward routes dy to it. Average: in-image sum / divisor, where the divisor counts the
// in-image positions (excludePadding) or the positions inside the padded extent. An empty window
// (padding >= kernel) yields 0 and passes no gradient.
extension CPUBackend {
    func validate(_ g: PoolGeometry) throws {
        try requireSizes(["batch": g.batch, "channels": g.channels, "input height": g.inHeight,
                          "input width": g.inWidth, "output height": g.outHeight, "output width": g.outWidth,
                          "top padding": g.padTop, "bottom padding": g.padBottom,
                          "left padding": g.padLeft, "right padding": g.padRight], op: "pooling")
        try requireSizes(["kernel height": g.kernelH, "kernel width": g.kernelW,
                          "stride height": g.strideH, "stride width": g.strideW], positive: true, op: "pooling")
    }

    /// The in-image span [lo, hi) of each window along one axis and its average-pooling divisor
    /// factor, as three rows of `outputs` integers in one allocation (read through raw pointers in the
    /// hot loops). Freed by `deallocate`.
    private struct PoolAxis {
        let lo: UnsafeMutablePointer<Int>, hi: UnsafeMutablePointer<Int>, divisor: UnsafeMutablePointer<Int>

        init(outputs: Int, input: Int, kernel: Int, stride: Int, padBefore: Int, padAfter: Int, excludePadding: Bool) {
            lo = UnsafeMutablePointer<Int>.allocate(capacity: max(1, 3 * outputs))
            hi = lo + outputs
            divisor = hi + outputs
            for o in 0..<outputs {
                let start = o * stride - padBefore
                let l = max(0, start), h = max(l, min(input, start + kernel))
                lo[o] = l; hi[o] = h
                if excludePadding {
                    divisor[o] = h - l
                } else {
                    let pl = max(-padBefore, start), ph = max(pl, min(input + padAfter, start + kernel))
                    divisor[o] = ph - pl
                }
            }
        }

        func deallocate() { lo.deallocate() }
    }

    private func axes(_ g: PoolGeometry) -> (rows: PoolAxis, cols: PoolAxis) {
        (PoolAxis(outputs: g.outHeight, input: g.inHeight, kernel: g.kernelH, stride: g.strideH,
                  padBefore: g.padTop, padAfter: g.padBottom, excludePadding: g.excludePadding),
         PoolAxis(outputs: g.outWidth, input: g.inWidth, kernel: g.kernelW, stride: g.strideW,
                  padBefore: g.padLeft, padAfter: g.padRight, excludePadding: g.excludePadding))
    }

    private func planeGrain(_ g: PoolGeometry) -> Int {
        max(1, CPUParallel.elementGrain / max(1, g.outHeight * g.outWidth * g.kernelH * g.kernelW + g.inHeight * g.inWidth))
    }

    /// The flat in-plane index of the first maximum of rows [r0, r1) x columns [c0, c1), a non-empty window.
    @inline(__always)
    private static func argMax(_ plane: UnsafeMutablePointer<Float>, width W: Int, _ r0: Int, _ r1: Int,
                               _ c0: Int, _ c1: Int) -> Int {
        var best = r0 * W + c0
        var bestValue = plane[best]
        var ih = r0
        while ih < r1 {
            let row = ih * W
            var iw = c0
            while iw < c1 {
                let v = plane[row + iw]
                if v > bestValue { best = row + iw; bestValue = v }
                iw += 1
            }
            ih += 1
        }
        return best
    }

    /// One window tap for the outputs [lo, hi) of a row: o[ow] = max(o[ow], tap[ow * stride]) (the
    /// later tap replaces only when strictly greater, as in the window loop) or o[ow] += tap[ow * stride].
    /// Strides 1 and 2 run eight outputs at a time; every load stays inside the taps the row reads.
    @inline(__always)
    private static func poolTap(_ o: UnsafeMutablePointer<Float>, _ tap: UnsafeMutablePointer<Float>,
                                _ lo: Int, _ hi: Int, stride: Int, max isMax: Bool) {
        var ow = lo
        let out = UnsafeMutableRawPointer(o), src = UnsafeRawPointer(tap)
        @inline(__always) func combine(_ v: SIMD8<Float>) {
            let a = out.loadUnaligned(fromByteOffset: ow * 4, as: SIMD8<Float>.self)
            out.storeBytes(of: isMax ? a.replacing(with: v, where: v .> a) : a + v, toByteOffset: ow * 4, as: SIMD8<Float>.self)
        }
        if stride == 1 {
            while ow + 8 <= hi {
                combine(src.loadUnaligned(fromByteOffset: ow * 4, as: SIMD8<Float>.self))
                ow += 8
            }
        } else if stride == 2 {
            // 16 consecutive floats hold 8 taps in their even lanes; the odd lane after the last one
            // is read too, so stop while it is still before the row's last tap.
            while ow + 8 < hi {
                combine(src.loadUnaligned(fromByteOffset: 2 * ow * 4, as: SIMD16<Float>.self).evenHalf)
                ow += 8
            }
        }
        // The rest one at a time (wrapping index arithmetic: the range is known to be in bounds).
        if isMax {
            while ow < hi { let v = tap[ow &* stride], a = o[ow]; o[ow] = v > a ? v : a; ow &+= 1 }
        } else {
            while ow < hi { o[ow] += tap[ow &* stride]; ow &+= 1 }
        }
    }

    public func poolingForward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try validate(g)
        let x = try pointer(input, g.inputShape.count, "pooling input")
        let y = try pointer(output, g.outputShape.count, "pooling output")
        let (r, c) = axes(g)
        defer { r.deallocate(); c.deallocate() }
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        let (kW, sw, pl) = (g.kernelW, g.strideW, g.padLeft)
        let isMax = g.kind == .max
        // Columns whose window lies wholly inside the image: there each output row is computed tap by
        // tap across all its columns at once (branch-free, vectorisable), keeping each window's
        // row-major order, so the result is the same as the window-by-window loop used at the edges.
        var inLo = 0
        while inLo < Wo && c.hi[inLo] - c.lo[inLo] != kW { inLo += 1 }
        var inHi = inLo
        while inHi < Wo && c.hi[inHi] - c.lo[inHi] == kW { inHi += 1 }
        let (lo, hi) = (inLo, inHi)
        parallelChunks(g.batch * g.channels, grain: planeGrain(g)) { planes in
            for p in planes {
                let plane = x + p * H * W, out = y + p * Ho * Wo
                for oh in 0..<Ho {
                    let (r0, r1) = (r.lo[oh], r.hi[oh])
                    let o = out + oh * Wo
                    guard r0 < r1 else { o.update(repeating: 0, count: Wo); continue }
                    for ow in 0..<Wo where ow < lo || ow >= hi {
                        let (c0, c1) = (c.lo[ow], c.hi[ow])
                        guard c0 < c1 else { o[ow] = 0; continue }
                        if isMax {
                            o[ow] = plane[Self.argMax(plane, width: W, r0, r1, c0, c1)]
                        } else {
                            var sum: Float = 0
                            for ih in r0..<r1 {
                                let row = plane + ih * W
                                for iw in c0..<c1 { sum += row[iw] }
                            }
                            o[ow] = sum / Float(r.divisor[oh] * c.divisor[ow])
                        }
                    }
                    guard lo < hi else { continue }
                    let first = plane + r0 * W - pl  // tap (r0, 0) of window ow is first[ow * sw]
                    for ow in lo..<hi { o[ow] = first[ow &* sw] }
                    for ih in r0..<r1 {
                        for kw in 0..<kW where ih > r0 || kw > 0 {
                            Self.poolTap(o, plane + ih * W + kw - pl, lo, hi, stride: sw, max: isMax)
                        }
                    }
                    if !isMax {
                        for ow in lo..<hi { o[ow] /= Float(r.divisor[oh] * c.divisor[ow]) }
                    }
                }
            }
        }
    }

    public func poolingBackward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer,
                                outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        try validate(g)
        let x = try pointer(input, g.inputShape.count, "pooling input")
        _ = try pointer(output, g.outputShape.count, "pooling output")  // max recomputes its argmax from x
        let dy = try pointer(outputGradient, g.outputShape.count, "pooling output gradient")
        let dx = try pointer(inputGradient, g.inputShape.count, "pooling input gradient")
        let (r, c) = axes(g)
        defer { r.deallocate(); c.deallocate() }
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        let isMax = g.kind == .max
        parallelChunks(g.batch * g.channels, grain: planeGrain(g)) { planes in
            for p in planes {
                let plane = x + p * H * W, grad = dx + p * H * W, d = dy + p * Ho * Wo
                grad.update(repeating: 0, count: H * W)
                for oh in 0..<Ho {
                    let (r0, r1) = (r.lo[oh], r.hi[oh])
                    for ow in 0..<Wo {
                        let (c0, c1) = (c.lo[ow], c.hi[ow])
                        guard r0 < r1, c0 < c1 else { continue }
                        if isMax {
                            grad[Self.argMax(plane, width: W, r0, r1, c0, c1)] += d[oh * Wo + ow]
                        } else {
                            let share = d[oh * Wo + ow] / Float(r.divisor[oh] * c.divisor[ow])
                            for ih in r0..<r1 {
                                let row = grad + ih * W
                                for iw in c0..<c1 { row[iw] += share }
                            }
                        }
                    }
                }
            }
        }
    }
}
