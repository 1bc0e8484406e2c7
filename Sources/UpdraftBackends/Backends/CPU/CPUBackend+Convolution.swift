import CUpdraftKernels
import Dispatch
import UpdraftCore

// Convolution as GEMM. Per image and group g (M = Cout/G, K = Cin/G*kH*kW, S = Ho*Wo):
//   forward          y_g [M, S]  = w_g [M, K] x col [K, S]            (+ bias, the epilogue function in one pass after)
//   backward data    dcol [K, S] = w_g^T [K, M] x dy_g [M, S]         then col2im adds dcol into dx
//   backward weights dw_g [M, K] += dy_g [M, S] x col^T [S, K]        summed over images by beta = 1
// col is the im2col matrix of the image: row (c, kh, kw), column (oh, ow) holds
// x[c, oh*strideH - padTop + kh*dilationH, ow*strideW - padLeft + kw*dilationW], or 0 outside the input.
// A 1x1, stride-1, unpadded convolution needs no col: the image itself is [K, S].

/// How a convolution spreads its batch over the cores (OpenBLAS itself always runs one thread here).
enum CPUConvolutionSchedule: Sendable {
    /// Images one after another; each GEMM is split into blocks of its output over the threads, and
    /// im2col/col2im and the epilogue over channels. For batches smaller than the thread count.
    case gemmThreads
    /// Each thread takes images in turn with its own workspace and runs whole single-threaded GEMMs:
    /// no fork/join per GEMM, every core busy on an independent product. Measured faster on the
    /// SqueezeNet shapes whenever the batch splits evenly.
    case imageThreads
}

extension CPUBackend {
    /// Per-image multiply-adds below which `imageThreads` is chosen even for a batch that splits unevenly.
    static let imageThreadsBelowMACs = 1 << 24

    func validate(_ g: ConvGeometry) throws {
        try requireSizes(["batch": g.batch, "input height": g.inHeight, "input width": g.inWidth,
                          "output height": g.outHeight, "output width": g.outWidth,
                          "top padding": g.padTop, "bottom padding": g.padBottom,
                          "left padding": g.padLeft, "right padding": g.padRight], op: "convolution")
        try requireSizes(["input channels": g.inChannels, "output channels": g.outChannels,
                          "kernel height": g.kernelH, "kernel width": g.kernelW, "stride height": g.strideH,
                          "stride width": g.strideW, "dilation height": g.dilationH, "dilation width": g.dilationW,
                          "groups": g.groups], positive: true, op: "convolution")
        guard g.inChannels % g.groups == 0, g.outChannels % g.groups == 0 else {
            throw UpdraftError(.invalidArgument,
                "\(name) convolution: groups \(g.groups) must divide \(g.inChannels) input and \(g.outChannels) output channels")
        }
        // OpenBLAS takes 32-bit sizes; the largest matrix is col [K, S] or an image.
        let limit = Int(Int32.max)
        let (colCount, overflow) = g.gemmK.multipliedReportingOverflow(by: g.gemmN)
        guard !overflow, colCount < limit, g.inputShape.count < limit, g.outputShape.count < limit else {
            throw UpdraftError(.unsupported, "\(name) convolution \(g.inputShape) -> \(g.outputShape) is too large for one call",
                               hint: "use a smaller batch")
        }
    }

    /// True when the image itself is the GEMM's [K, S] operand: 1x1 kernel, stride 1, no padding.
    func isDirect(_ g: ConvGeometry) -> Bool {
        g.kernelH == 1 && g.kernelW == 1 && g.strideH == 1 && g.strideW == 1
            && g.padTop == 0 && g.padLeft == 0 && g.outHeight == g.inHeight && g.outWidth == g.inWidth
    }

    /// Workers a schedule uses for `batch` images.
    func workerCount(_ schedule: CPUConvolutionSchedule, batch: Int) -> Int {
        schedule == .imageThreads ? max(1, min(threadCount, batch)) : 1
    }

    func schedule(for g: ConvGeometry) -> CPUConvolutionSchedule {
        if let forced = convolutionScheduleOverride { return forced }
        guard threadCount > 1, g.batch >= threadCount else { return .gemmThreads }
        // A batch of 3 on 2 threads leaves one idle a third of the time: then only small GEMMs go by image.
        let even = g.batch % threadCount == 0 || g.batch >= 4 * threadCount
        let macs = g.groups * g.gemmM * g.gemmN * g.gemmK
        return even || macs < Self.imageThreadsBelowMACs ? .imageThreads : .gemmThreads
    }

    /// Runs `body(worker, image, parallelInner)` for every image of the batch as the schedule says;
    /// `parallelInner` tells the body whether it may split its own loops over threads. Under
    /// `imageThreads` each worker takes the next image nobody has taken yet, so a core slowed by other
    /// work on the machine takes fewer images instead of holding the others up at the end; what each
    /// image produces does not depend on which worker ran it.
    private func forEachImage(_ schedule: CPUConvolutionSchedule, batch: Int,
                              _ body: (_ worker: Int, _ image: Int, _ parallelInner: Bool) -> Void) {
        CPUKernels.withSingleThreadedBLAS {
            let workers = workerCount(schedule, batch: batch)
            guard workers > 1 else { for n in 0..<batch { body(0, n, true) }; return }
            dynamicForEach(batch, workers: workers) { t, n in body(t, n, false) }
        }
    }

    // MARK: Forward

    /// The slice form with the whole output (`channelOffset` 0, all channels).
    public func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                                   output: DeviceBuffer, residual: DeviceBuffer? = nil, epilogue: Activation?) throws {
        try convolutionForward(g, input: input, weights: weights, bias: bias, output: output, channelOffset: 0,
                               outputChannels: g.outChannels, residual: residual, epilogue: epilogue)
    }

    /// True: a convolution can write its channels into a slice of a wider (concatenated) output.
    public var writesConvolutionSlices: Bool { true }

    /// Each image's output channels are one contiguous block, so a slice only moves where the block starts.
    /// With a `residual` (the whole output's shape; slices take none) the epilogue is y = f(conv + b + residual):
    /// im2col and grouped start each image's rows at bias + residual, Winograd adds it in its output
    /// transform; oneDNN and the direct kernel add it after, chunk by chunk with the function (`applyResidualEpilogue`).
    public func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                                   output: DeviceBuffer, channelOffset: Int, outputChannels: Int, residual: DeviceBuffer? = nil,
                                   epilogue: Activation?) throws {
        try validate(g)
        let plan = try epilogue.map { try CPUActivationPlan($0, channels: g.outChannels, spatial: g.outHeight * g.outWidth) }
        try requireBias(g.hasBias, bias, "convolution")
        try checkChannelSlice(g, output: output, channelOffset: channelOffset, outputChannels: outputChannels)
        let x = try pointer(input, g.inputShape.count, "convolution input")
        let w = try pointer(weights, g.weightShape.count, "convolution weights")
        let b = try bias.map { try pointer($0, g.outChannels, "convolution bias") }
        let y = try pointer(output, g.batch * outputChannels * g.outHeight * g.outWidth, "convolution output")
        let r = try residual.map { try residualPointer(g, $0, channelOffset: channelOffset, outputChannels: outputChannels) }
        if forwardAlgorithm(for: g) == .onednn,
           try oneDNNForward(g, x: x, w: w, bias: b, y: y + channelOffset * g.gemmN, imageStride: outputChannels * g.gemmN,
                             epilogue: r == nil ? epilogue : nil, plan: r == nil ? plan : nil) {
            if let r { applyResidualEpilogue(plan, y, residual: r, count: g.outputShape.count, parallel: true) }
            return
        }
        if forwardAlgorithm(for: g) == .direct {
            directForward(g, x: x, w: w, bias: b, y: y + channelOffset * g.gemmN, imageStride: outputChannels * g.gemmN,
                          epilogue: r == nil ? epilogue : nil, plan: r == nil ? plan : nil)
            if let r { applyResidualEpilogue(plan, y, residual: r, count: g.outputShape.count, parallel: true) }
            return
        }
        let direct = isDirect(g)
        let (M, S, K, G) = (g.gemmM, g.gemmN, g.gemmK, g.groups)
        let cinG = g.inChannels / G, inPlane = g.inHeight * g.inWidth
        let schedule = schedule(for: g)
        // Depthwise and thin grouped convolutions add into the started rows directly (GroupedConvolution).
        let grouped = usesGroupedDirect(g) ? GroupedConvolutionPlan(g) : nil
        if grouped == nil, let tile = forwardAlgorithm(for: g).winogradTile {
            // F(4x4, 3x3) applies a plain ReLU in its output transform: one pass over the output fewer.
            let fused: Bool = { if case .relu? = epilogue { return tile == .f4 } else { return false } }()
            let plan = fused ? nil : plan
            return withWorkspaces { ws in
                winogradConvolve(g, tile, input: x, weights: w, bias: b, residual: r, relu: fused, output: y + channelOffset * S,
                                 imageStride: outputChannels * S, workspaces: ws)
                if let plan, outputChannels == g.outChannels {
                    applyEpilogue(plan, y, count: g.outputShape.count, parallel: true)
                } else if let plan {
                    for n in 0..<g.batch { applyEpilogue(plan, y + (n * outputChannels + channelOffset) * S, count: g.outChannels * S, parallel: true) }
                }
            }
        }
        withWorkspaces { ws in
            let cols = grouped == nil ? ws.prefix(workerCount(schedule, batch: g.batch)).map { $0.floats(direct ? 0 : K * S) }
                                      : ws.map { $0.floats(groupedPhaseSizes(g).scratch) }
            forEachImage(schedule, batch: g.batch) { t, n, parallelInner in
                let yn = y + (n * outputChannels + channelOffset) * S
                // Each output row starts as its bias (or 0) and the GEMM adds into it (beta = 1):
                // OpenBLAS's own beta = 0 pass, which zeroes C first, is slower than this fill and
                // would leave the bias for a pass of its own.
                startRows(yn, channels: g.outChannels, spatial: S, bias: b, residual: r.map { $0 + n * g.outChannels * S },
                          parallel: parallelInner)
                if let grouped {
                    let image = UnsafePointer(x + n * g.inChannels * inPlane)
                    if parallelInner {
                        dynamicForEach(G, workers: threadCount) { t, grp in
                            groupedDirectForward(grouped, image: image, group: grp, w: w, y: yn, scratch: cols[t])
                        }
                    } else {
                        for grp in 0..<G { groupedDirectForward(grouped, image: image, group: grp, w: w, y: yn, scratch: cols[t]) }
                    }
                }
                for grp in 0..<(grouped == nil ? G : 0) {
                    let xg = x + (n * g.inChannels + grp * cinG) * inPlane
                    var operand = UnsafePointer(xg)
                    if !direct {
                        im2col(g, image: xg, col: cols[t], parallel: parallelInner)
                        operand = UnsafePointer(cols[t])
                    }
                    parallelSGEMM(m: M, n: S, k: K, a: w + grp * M * K, lda: K, b: operand, ldb: S,
                                  beta: 1, c: yn + grp * M * S, ldc: S, parallel: parallelInner)
                }
                if let plan { applyEpilogue(plan, yn, count: g.outChannels * S, parallel: parallelInner) }
            }
        }
    }

    /// The residual a fused convolution adds: the whole output's shape, and only for a whole output (not a concat's slice).
    private func residualPointer(_ g: ConvGeometry, _ residual: DeviceBuffer, channelOffset: Int,
                                 outputChannels: Int) throws -> UnsafePointer<Float> {
        guard channelOffset == 0, outputChannels == g.outChannels else {
            throw UpdraftError(.invalidArgument, "\(name) convolution: a fused residual needs the whole output, not channels from \(channelOffset) of \(outputChannels)",
                               hint: "run the add after the convolution for a concat's slice")
        }
        return UnsafePointer(try pointer(residual, g.outputShape.count, "convolution residual"))
    }

    /// rows[c, s] = bias[c] (0 without a bias) for s < S, plus residual[c, s] when there is one.
    private func startRows(_ rows: UnsafeMutablePointer<Float>, channels: Int, spatial S: Int,
                           bias: UnsafeMutablePointer<Float>?, residual: UnsafePointer<Float>? = nil, parallel: Bool) {
        chunks(channels, grain: max(1, CPUParallel.copyGrain / max(1, S)), parallel: parallel) { cs in
            for c in cs {
                guard let residual else { (rows + c * S).update(repeating: bias?[c] ?? 0, count: S); continue }
                let row = rows + c * S, from = residual + c * S
                let b = bias?[c] ?? 0
                for s in 0..<S { row[s] = from[s] + b }
            }
        }
    }

    // MARK: Backward

    /// Per image and group one SGEMM (w^T x dy) into im2col columns, then col2im adds them into the input gradient (no columns for 1x1 stride-1 unpadded); grouped depthwise-like cases run a direct loop; 3x3 stride-1 layers the Winograd rule picks run Winograd on the turned filters.
    public func convolutionBackwardData(_ g: ConvGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                        inputGradient: DeviceBuffer) throws {
        try validate(g)
        let dy = try pointer(outputGradient, g.outputShape.count, "convolution output gradient")
        let w = try pointer(weights, g.weightShape.count, "convolution weights")
        let dx = try pointer(inputGradient, g.inputShape.count, "convolution input gradient")
        if backwardDataAlgorithm(for: g) == .onednn, try oneDNNBackwardData(g, dy: dy, w: w, dx: dx) { return }
        if usesGroupedDirect(g) {
            return groupedDirectBackwardData(GroupedConvolutionPlan(g), dy: dy, w: w, dx: dx)
        }
        if let tile = backwardDataAlgorithm(for: g).winogradTile {
            return winogradBackwardData(g, tile, dy: dy, w: w, dx: dx)
        }
        let direct = isDirect(g)
        let (M, S, K, G) = (g.gemmM, g.gemmN, g.gemmK, g.groups)
        let cinG = g.inChannels / G, inPlane = g.inHeight * g.inWidth
        let schedule = schedule(for: g)
        withWorkspaces { ws in
            let cols = ws.prefix(workerCount(schedule, batch: g.batch)).map { $0.floats(direct ? 0 : K * S) }
            forEachImage(schedule, batch: g.batch) { t, n, parallelInner in
                for grp in 0..<G {
                    let dxg = x(dx, n, grp)
                    let target = direct ? dxg : cols[t]
                    parallelSGEMM(transA: true, m: K, n: S, k: M, a: w + grp * M * K, lda: K,
                                  b: dy + (n * g.outChannels + grp * M) * S, ldb: S, c: target, ldc: S,
                                  parallel: parallelInner)
                    if !direct { col2im(g, col: cols[t], image: dxg, parallel: parallelInner) }
                }
            }
        }
        func x(_ base: UnsafeMutablePointer<Float>, _ n: Int, _ grp: Int) -> UnsafeMutablePointer<Float> {
            base + (n * g.inChannels + grp * cinG) * inPlane
        }
    }

    /// Weight gradient summed over the batch (per-thread partial sums when the batch is split); bias gradient is the sum of dy over images and positions. An empty batch gives zeros.
    public func convolutionBackwardWeights(_ g: ConvGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                           weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws {
        try validate(g)
        try requireBiasGradient(g.hasBias, biasGradient, "convolution")
        let x = try pointer(input, g.inputShape.count, "convolution input")
        let dy = try pointer(outputGradient, g.outputShape.count, "convolution output gradient")
        let dw = try pointer(weightGradient, g.weightShape.count, "convolution weight gradient")
        let db = try biasGradient.map { try pointer($0, g.outChannels, "convolution bias gradient") }
        if backwardWeightsAlgorithm(for: g) == .onednn, try oneDNNBackwardWeights(g, x: x, dy: dy, dw: dw, db: db) { return }
        let grouped = usesGroupedDirect(g)
        if grouped { groupedDirectBackwardWeights(GroupedConvolutionPlan(g), x: x, xEnd: x + g.inputShape.count, dy: dy, dw: dw) }
        let direct = isDirect(g)
        let (M, S, K, G) = (g.gemmM, g.gemmN, g.gemmK, g.groups)
        let cinG = g.inChannels / G, inPlane = g.inHeight * g.inWidth
        let weightCount = g.weightShape.count
        let schedule = schedule(for: g)
        if g.batch == 0 { dw.update(repeating: 0, count: weightCount) }
        if !grouped { withWorkspaces { ws in
            let colCount = direct ? 0 : K * S
            let workers = workerCount(schedule, batch: g.batch)
            let cols = ws.prefix(workers).map { $0.floats(colCount) }
            // The batch in fixed runs of images, each summed into its own buffer (run 0 into dw), then
            // the runs added in order: the result does not depend on which worker took which run, and
            // with a few runs per worker a worker slowed by other load takes fewer.
            let runs = workers > 1 ? min(g.batch, 4 * workers) : 1
            let partials = partialSums.floats((runs - 1) * weightCount)
            let sums = { (run: Int) in run == 0 ? dw : partials + (run - 1) * weightCount }
            let images = { (run: Int) in (g.batch * run / runs)..<(g.batch * (run + 1) / runs) }
            CPUKernels.withSingleThreadedBLAS {
                let body = { (t: Int, run: Int, parallelInner: Bool) in
                    // Zeroed here and accumulated with beta = 1 (faster than OpenBLAS's beta = 0 pass).
                    self.chunks(weightCount, grain: CPUParallel.copyGrain, parallel: parallelInner) { r in
                        (sums(run) + r.lowerBound).update(repeating: 0, count: r.count)
                    }
                    for n in images(run) {
                        for grp in 0..<G {
                            let xg = x + (n * g.inChannels + grp * cinG) * inPlane
                            var operand = UnsafePointer(xg)
                            if !direct {
                                self.im2col(g, image: xg, col: cols[t], parallel: parallelInner)
                                operand = UnsafePointer(cols[t])
                            }
                            self.parallelSGEMM(transB: true, m: M, n: K, k: S, a: dy + (n * g.outChannels + grp * M) * S,
                                               lda: S, b: operand, ldb: S, beta: 1,
                                               c: sums(run) + grp * M * K, ldc: K, parallel: parallelInner)
                        }
                    }
                }
                if workers > 1 {
                    dynamicForEach(runs, workers: workers) { t, run in body(t, run, false) }
                } else {
                    body(0, 0, true)
                }
            }
            if runs > 1 {
                chunks(weightCount, grain: CPUParallel.elementGrain, parallel: true) { r in
                    for run in 1..<runs { upd_add(dw + r.lowerBound, sums(run) + r.lowerBound, r.count) }
                }
            }
        } }
        if let db {
            let (N, C) = (g.batch, g.outChannels)
            chunks(C, grain: max(1, CPUParallel.elementGrain / max(1, N * S)), parallel: true) { cs in
                for c in cs {
                    var total: Float = 0
                    for n in 0..<N { total += CPUKernels.sum(dy + (n * C + c) * S, S) }
                    db[c] = total
                }
            }
        }
    }

    // MARK: im2col / col2im

    /// The output columns [lo, hi) whose input column `ow*strideW + offset` lies inside [0, width).
    @inline(__always)
    private func validColumns(_ g: ConvGeometry, offset: Int) -> (Int, Int) {
        let lo = min(g.outWidth, max(0, CPUKernels.ceilDiv(-offset, g.strideW)))
        let hi = min(g.outWidth, max(lo, CPUKernels.ceilDiv(g.inWidth - offset, g.strideW)))
        return (lo, hi)
    }

    /// The output rows [lo, hi) whose input row `oh*strideH + offset` lies inside [0, height).
    @inline(__always)
    private func validRows(_ g: ConvGeometry, offset: Int) -> (Int, Int) {
        let lo = min(g.outHeight, max(0, CPUKernels.ceilDiv(-offset, g.strideH)))
        let hi = min(g.outHeight, max(lo, CPUKernels.ceilDiv(g.inHeight - offset, g.strideH)))
        return (lo, hi)
    }

    /// Fills col [K, S] from the Cin/G channels of one group of one image (`image` points at its first channel).
    ///
    /// With stride 1 and output width = input width (3x3 "same" convolutions), the row of tap (kh, kw)
    /// is the plane shifted by a constant: one contiguous copy, then zeros over the rows and columns
    /// that fall outside the input. Otherwise row by row, stride 2 with vector loads.
    func im2col(_ g: ConvGeometry, image: UnsafeMutablePointer<Float>, col: UnsafeMutablePointer<Float>, parallel: Bool) {
        let (H, W, Ho, Wo, kH, kW) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth, g.kernelH, g.kernelW)
        let (sh, sw, S) = (g.strideH, g.strideW, Ho * Wo)
        let channels = g.inChannels / g.groups
        let shifted = sh == 1 && sw == 1 && Wo == W
        chunks(channels, grain: max(1, CPUParallel.copyGrain / max(1, kH * kW * S)), parallel: parallel) { cs in
            for c in cs {
                let plane = UnsafePointer(image + c * H * W)
                for kh in 0..<kH {
                    let rowOffset = kh * g.dilationH - g.padTop
                    let (ohLo, ohHi) = validRows(g, offset: rowOffset)
                    for kw in 0..<kW {
                        let colOffset = kw * g.dilationW - g.padLeft
                        let (lo, hi) = validColumns(g, offset: colOffset)
                        let row = col + ((c * kH + kh) * kW + kw) * S
                        row.update(repeating: 0, count: ohLo * Wo)
                        (row + ohHi * Wo).update(repeating: 0, count: S - ohHi * Wo)
                        guard ohLo < ohHi else { continue }
                        if shifted {
                            // col[s] = plane[s + shift] wherever the tap is inside the input; the copy is
                            // clipped to the plane, and whatever it leaves or wrongly takes lies in the
                            // border columns, zeroed next.
                            let shift = rowOffset * W + colOffset
                            let s0 = max(ohLo * Wo, -shift), s1 = min(ohHi * Wo, H * W - shift)
                            if s0 < s1 { (row + s0).update(from: plane + s0 + shift, count: s1 - s0) }
                            if lo > 0 || hi < Wo {
                                for oh in ohLo..<ohHi {
                                    let out = row + oh * Wo
                                    for ow in 0..<lo { out[ow] = 0 }
                                    for ow in hi..<Wo { out[ow] = 0 }
                                }
                            }
                            continue
                        }
                        for oh in ohLo..<ohHi {
                            let out = row + oh * Wo
                            CPUKernels.gatherStridedRow(plane + (oh * sh + rowOffset) * W + colOffset, stride: sw,
                                                        into: out, lo: lo, hi: hi, width: Wo)
                        }
                    }
                }
            }
        }
    }

    /// Writes the image gradient of one group: zeroes its Cin/G channels, then adds every col entry
    /// back at the input position it was read from.
    func col2im(_ g: ConvGeometry, col: UnsafeMutablePointer<Float>, image: UnsafeMutablePointer<Float>, parallel: Bool) {
        let (H, W, Ho, Wo, kH, kW) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth, g.kernelH, g.kernelW)
        let (sh, sw, S) = (g.strideH, g.strideW, Ho * Wo)
        let channels = g.inChannels / g.groups
        chunks(channels, grain: max(1, CPUParallel.elementGrain / max(1, kH * kW * S)), parallel: parallel) { cs in
            for c in cs {
                let plane = image + c * H * W
                plane.update(repeating: 0, count: H * W)
                for kh in 0..<kH {
                    let rowOffset = kh * g.dilationH - g.padTop
                    for kw in 0..<kW {
                        let colOffset = kw * g.dilationW - g.padLeft
                        let (lo, hi) = validColumns(g, offset: colOffset)
                        guard lo < hi else { continue }
                        let row = col + ((c * kH + kh) * kW + kw) * S
                        for oh in 0..<Ho {
                            let ih = oh * sh + rowOffset
                            guard ih >= 0, ih < H else { continue }
                            let src = row + oh * Wo
                            let dst = plane + ih * W + colOffset
                            if sw == 1 {
                                upd_add(dst + lo, src + lo, hi - lo)
                            } else {
                                for ow in lo..<hi { dst[ow * sw] += src[ow] }
                            }
                        }
                    }
                }
            }
        }
    }
}
