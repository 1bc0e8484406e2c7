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

    /// The in-image span of each window along one axis, and its average-pooling divisor factor.
    private struct PoolAxis {
        var lo: [Int], hi: [Int], divisor: [Int]

        init(outputs: Int, input: Int, kernel: Int, stride: Int, padBefore: Int, padAfter: Int, excludePadding: Bool) {
            lo = []; hi = []; divisor = []
            lo.reserveCapacity(outputs); hi.reserveCapacity(outputs); divisor.reserveCapacity(outputs)
            for o in 0..<outputs {
                let start = o * stride - padBefore
                let l = max(0, start), h = max(l, min(input, start + kernel))
                lo.append(l); hi.append(h)
                if excludePadding {
                    divisor.append(h - l)
                } else {
                    let pl = max(-padBefore, start), ph = max(pl, min(input + padAfter, start + kernel))
                    divisor.append(ph - pl)
                }
            }
        }
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

    /// The flat in-plane index of the window's first maximum; the window must not be empty.
    @inline(__always)
    private static func argMax(_ plane: UnsafeMutablePointer<Float>, width W: Int,
                               rows: Range<Int>, cols: Range<Int>) -> Int {
        var best = rows.lowerBound * W + cols.lowerBound
        var bestValue = plane[best]
        for ih in rows {
            let row = ih * W
            for iw in cols where plane[row + iw] > bestValue {
                best = row + iw; bestValue = plane[best]
            }
        }
        return best
    }

    public func poolingForward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try validate(g)
        let x = try pointer(input, g.inputShape.count, "pooling input")
        let y = try pointer(output, g.outputShape.count, "pooling output")
        let (r, c) = axes(g)
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        let isMax = g.kind == .max
        parallelChunks(g.batch * g.channels, grain: planeGrain(g)) { planes in
            for p in planes {
                let plane = x + p * H * W, out = y + p * Ho * Wo
                for oh in 0..<Ho {
                    let rows = r.lo[oh]..<r.hi[oh]
                    for ow in 0..<Wo {
                        let cols = c.lo[ow]..<c.hi[ow]
                        guard !rows.isEmpty, !cols.isEmpty else { out[oh * Wo + ow] = 0; continue }
                        if isMax {
                            out[oh * Wo + ow] = plane[Self.argMax(plane, width: W, rows: rows, cols: cols)]
                        } else {
                            var sum: Float = 0
                            for ih in rows {
                                let row = plane + ih * W
                                for iw in cols { sum += row[iw] }
                            }
                            out[oh * Wo + ow] = sum / Float(r.divisor[oh] * c.divisor[ow])
                        }
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
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        let isMax = g.kind == .max
        parallelChunks(g.batch * g.channels, grain: planeGrain(g)) { planes in
            for p in planes {
                let plane = x + p * H * W, grad = dx + p * H * W, d = dy + p * Ho * Wo
                grad.update(repeating: 0, count: H * W)
                for oh in 0..<Ho {
                    let rows = r.lo[oh]..<r.hi[oh]
                    for ow in 0..<Wo {
                        let cols = c.lo[ow]..<c.hi[ow]
                        guard !rows.isEmpty, !cols.isEmpty else { continue }
                        if isMax {
                            grad[Self.argMax(plane, width: W, rows: rows, cols: cols)] += d[oh * Wo + ow]
                        } else {
                            let share = d[oh * Wo + ow] / Float(r.divisor[oh] * c.divisor[ow])
                            for ih in rows {
                                let row = grad + ih * W
                                for iw in cols { row[iw] += share }
                            }
                        }
                    }
                }
            }
        }
    }
}
