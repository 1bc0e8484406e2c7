// Pooling, one (n, c) plane per work item, planes split over threads. x [N, C, H, W] -> y [N, C, Ho, Wo].
// Window (oh, ow) covers rows oh*strideH - padTop ..< + kernelH and the matching columns; only its
// in-image part takes part. Max: the first maximum in row-major window order (strictly greater
// replaces), backward routes dy to it. Average: in-image sum / divisor, where the divisor counts the
// in-image positions (excludePadding) or the positions inside the padded extent. An empty window
// (padding >= kernel) yields 0 and passes no gradient.
//
// Max forward is separable and keeps that order exactly. Each input row first reduces its part of
// every window column to two values: the window's first element in that row (`rowFirst[ih, ow]`) and
// the first maximum of the row part's non-NaN values (`rowMax`, a scan from -infinity; -infinity when
// there are none). Each output then scans, with "strictly greater replaces", from its window's very
// first element through the `rowMax` of its rows, top to bottom. That picks the same element as one
// row-major scan from the first element: a NaN first element stays, later NaNs never replace, and
// among equal values (-0 and +0 included) the first in row-major order wins. Both passes are
// branch-free vector loops of CUpdraftKernels at the vector level chosen at start-up: the vertical one
// over whole output rows, the horizontal one over the interior columns (windows wholly inside the
// row); border columns (clipped, ceil-mode or padded windows) take a scalar loop. One C call runs a
// thread's planes (`upd_max_pool_planes`).
import CUpdraftKernels
import UpdraftCore

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
    /// hot loops), and the interior: the outputs [interiorLo, interiorHi) whose window lies wholly
    /// inside the input. Freed by `deallocate`.
    private struct PoolAxis {
        let lo: UnsafeMutablePointer<Int>, hi: UnsafeMutablePointer<Int>, divisor: UnsafeMutablePointer<Int>
        let interiorLo: Int, interiorHi: Int
        /// Every input position lies in some window.
        let coversInput: Bool

        init(outputs: Int, input: Int, kernel: Int, stride: Int, padBefore: Int, padAfter: Int, excludePadding: Bool) {
            lo = UnsafeMutablePointer<Int>.allocate(capacity: max(1, 3 * outputs))
            hi = lo + outputs
            divisor = hi + outputs
            var first = outputs, last = 0, reach = 0, gapless = true
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
                if start >= 0, start + kernel <= input { first = min(first, o); last = o + 1 }
                if l < h {
                    if l > reach { gapless = false }
                    reach = max(reach, h)
                }
            }
            interiorLo = first
            interiorHi = max(first, last)
            coversInput = gapless && reach == input
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

    /// One (n, c) plane per work item; max is separable (rows, then columns) and keeps the first maximum in window order.
    public func poolingForward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try validate(g)
        let x = try pointer(input, g.inputShape.count, "pooling input")
        let y = try pointer(output, g.outputShape.count, "pooling output")
        if try oneDNNPoolingForward(g, x: x, y: y) { return }
        let (r, c) = axes(g)
        defer { r.deallocate(); c.deallocate() }
        if g.kind == .max {
            maxPoolForward(g, x: x, y: y, rows: r, cols: c)
        } else {
            averagePoolForward(g, x: x, y: y, rows: r, cols: c)
        }
    }

    // MARK: Max forward

    private func maxPoolForward(_ g: PoolGeometry, x: UnsafeMutablePointer<Float>, y: UnsafeMutablePointer<Float>,
                                rows r: PoolAxis, cols c: PoolAxis) {
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        parallelChunks(g.batch * g.channels, grain: planeGrain(g)) { planes in
            // rowMax and rowFirst, [H, Wo] each, for one plane at a time.
            let scratch = UnsafeMutablePointer<Float>.allocate(capacity: max(1, 2 * H * Wo))
            defer { scratch.deallocate() }
            // Both passes of a chunk's planes in one call of CUpdraftKernels (a call per row cost more than its work).
            upd_max_pool_planes(x + planes.lowerBound * H * W, y + planes.lowerBound * Ho * Wo, planes.count, H, W, Ho, Wo,
                                r.lo, r.hi, c.lo, c.hi, c.interiorLo, c.interiorHi, g.strideW, g.kernelW, g.padLeft, scratch)
        }
    }

    // MARK: Average forward

    private func averagePoolForward(_ g: PoolGeometry, x: UnsafeMutablePointer<Float>, y: UnsafeMutablePointer<Float>,
                                    rows r: PoolAxis, cols c: PoolAxis) {
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        parallelChunks(g.batch * g.channels, grain: planeGrain(g)) { planes in
            for p in planes {
                let plane = UnsafePointer(x + p * H * W), out = y + p * Ho * Wo
                for oh in 0..<Ho {
                    let (r0, r1) = (r.lo[oh], r.hi[oh])
                    for ow in 0..<Wo {
                        let (c0, c1) = (c.lo[ow], c.hi[ow])
                        guard r0 < r1, c0 < c1 else { out[oh * Wo + ow] = 0; continue }
                        var sum: Float
                        if c0 == 0, c1 == W {
                            // Whole rows (global pooling): one contiguous run.
                            sum = CPUKernels.sum(plane + r0 * W, (r1 - r0) * W)
                        } else {
                            sum = 0
                            for ih in r0..<r1 { sum += CPUKernels.sum(plane + ih * W + c0, c1 - c0) }
                        }
                        out[oh * Wo + ow] = sum / Float(r.divisor[oh] * c.divisor[ow])
                    }
                }
            }
        }
    }

    // MARK: Backward

    /// The flat in-plane index of the first maximum of rows [r0, r1) x columns [c0, c1), a non-empty window.
    @inline(__always)
    private static func argMax(_ plane: UnsafeMutablePointer<Float>, width W: Int, _ r0: Int, _ r1: Int,
                               _ c0: Int, _ c1: Int) -> Int {
        var best = r0 &* W &+ c0
        var bestValue = plane[best]
        var ih = r0
        while ih < r1 {
            let row = ih &* W
            var iw = c0
            while iw < c1 {
                let v = plane[row &+ iw]
                if v > bestValue { best = row &+ iw; bestValue = v }
                iw &+= 1
            }
            ih &+= 1
        }
        return best
    }

    /// Max recomputes its argmax from the input (the output is only size-checked) and routes dy there; average spreads dy over the window's divisor.
    public func poolingBackward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer,
                                outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        try validate(g)
        let x = try pointer(input, g.inputShape.count, "pooling input")
        _ = try pointer(output, g.outputShape.count, "pooling output")  // max recomputes its argmax from x
        let dy = try pointer(outputGradient, g.outputShape.count, "pooling output gradient")
        let dx = try pointer(inputGradient, g.inputShape.count, "pooling input gradient")
        if try oneDNNPoolingBackward(g, x: x, dy: dy, dx: dx) { return }
        let (r, c) = axes(g)
        defer { r.deallocate(); c.deallocate() }
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        let isMax = g.kind == .max
        // Average windows that never overlap write their share instead of adding it: the plane needs
        // no zeroing first when they also cover it (global pooling: one fill per plane).
        let disjoint = !isMax && g.strideH >= g.kernelH && g.strideW >= g.kernelW
        let needsZero = !(disjoint && r.coversInput && c.coversInput)
        parallelChunks(g.batch * g.channels, grain: planeGrain(g)) { planes in
            for p in planes {
                let plane = x + p * H * W, grad = dx + p * H * W, d = dy + p * Ho * Wo
                if needsZero { grad.update(repeating: 0, count: H * W) }
                for oh in 0..<Ho {
                    let (r0, r1) = (r.lo[oh], r.hi[oh])
                    for ow in 0..<Wo {
                        let (c0, c1) = (c.lo[ow], c.hi[ow])
                        guard r0 < r1, c0 < c1 else { continue }
                        if isMax {
                            grad[Self.argMax(plane, width: W, r0, r1, c0, c1)] += d[oh * Wo + ow]
                        } else {
                            let share = d[oh * Wo + ow] / Float(r.divisor[oh] * c.divisor[ow])
                            if disjoint, c0 == 0, c1 == W {
                                (grad + r0 * W).update(repeating: share, count: (r1 - r0) * W)
                            } else if disjoint {
                                for ih in r0..<r1 { (grad + ih * W + c0).update(repeating: share, count: c1 - c0) }
                            } else {
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
}
