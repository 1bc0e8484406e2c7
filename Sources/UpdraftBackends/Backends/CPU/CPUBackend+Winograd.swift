// Winograd convolution for 3x3, stride-1, undilated, ungrouped layers (Lavin & Gray, "Fast Algorithms
// for Convolutional Neural Networks", 2015), in two tile sizes:
//
//   F(2x2, 3x3): each 2x2 block of outputs from a 4x4 input tile, 16 multiplies per (input, output)
//                channel pair where direct convolution needs 36: 2.25x fewer multiply-adds;
//   F(4x4, 3x3): each 4x4 block from a 6x6 tile, 36 multiplies where direct needs 144: 4x fewer, at the
//                price of larger transform constants (so more rounding) and wider transforms.
//
// With d an a x a input tile (a = 4 or 6), g a 3x3 filter and xi one of the a^2 tile positions:
//
//   U = G g G^T            (a x a per filter, once per call; computed in Double)
//   V = B^T d B            (a x a per tile and input channel)
//   M[xi] = U[xi] x V[xi]  (for each position xi: a [Cout, Cin] x [Cin, tiles] SGEMM)
//   Y = A^T M A            (m x m outputs per tile and output channel, m = a - 2)
//
// The matrices are written out in CPUWinogradF2.swift and CPUWinogradF4.swift, next to their transforms.
// Tiles start every m outputs; reads outside the input are 0 (the padding), outputs past the edge are
// dropped. The batch's tiles go in blocks of at most `winogradTileBlock`, so the scratch stays in cache
// and is bounded whatever the image size.
//
// The backward pass for the input is a convolution too: for stride 1, dx is dy correlated with each
// filter turned by 180 degrees, input and output channels swapped, padded by 2 - pad on each side. So
// `winogradBackwardData` reuses the forward driver on that geometry. The weight gradient keeps im2col.
import UpdraftCore

/// Which algorithm a CPU convolution pass uses.
public enum CPUConvolutionAlgorithm: String, Sendable, Codable, CaseIterable {
    /// im2col (no columns for 1x1 stride-1) then one SGEMM per image and group.
    case im2col
    /// Winograd F(2x2, 3x3): 2.25x fewer multiply-adds, for 3x3 stride-1 undilated ungrouped layers.
    case winograd
    /// Winograd F(4x4, 3x3): 4x fewer multiply-adds than direct convolution, for the same layers.
    case winograd4x4 = "winograd-4x4"
    /// oneDNN's convolution (CPUBackend+OneDNN.swift), any shape it implements, all three passes;
    /// chosen only by the override or a stored tuning, never by the built-in rule.
    case onednn
    /// The small-K direct convolution (CPUBackend+SmallKConvolution.swift), forward only, for
    /// ungrouped layers with few input channels (a network's first layer).
    case direct

    /// The tile a Winograd algorithm uses; nil for im2col, oneDNN and the direct convolution.
    var winogradTile: WinogradTile? {
        switch self {
        case .im2col, .onednn, .direct: return nil
        case .winograd: return .f2
        case .winograd4x4: return .f4
        }
    }
}

/// The two Winograd tile sizes: `m` x `m` outputs from an `alpha` x `alpha` input tile.
enum WinogradTile: Sendable {
    case f2, f4
    /// Outputs per tile side.
    var m: Int { self == .f2 ? 2 : 4 }
    /// Input tile side, m + 2.
    var alpha: Int { m + 2 }
    /// Positions per tile (one SGEMM each): alpha^2.
    var positions: Int { alpha * alpha }
}

extension CPUBackend {
    /// Tiles per block, at most. Layers whose filters are small (Cout x Cin up to 128 x 128: U up to
    /// 2.4 MiB) keep V and M near 4 MiB per worker, in the outer caches, but never under 64 tiles (so the
    /// SGEMMs stay wide). Wider layers take up to 512 tiles (a batch of 64 of ResNet-18's 7x7 layer in one
    /// block): every block's SGEMMs pack all of U again, 9.4 MiB at 256 channels and 37.7 MiB at 512,
    /// which cost more than V and M spilling out of cache. Measured with `updraft-bench cpu-conv --batch 64
    /// --threads 1 --cpu-time --only resnet18` (CPU ms, F(4x4), odd rows as below): 256@14 69.1 -> 64.8,
    /// 512@7 88.6 -> 74.4 (1024 tiles: 65.2 and 73.6, no better); 256 tiles on the 64- and 128-channel
    /// layers lost (65.5 -> 74.4, 58.9 -> 59.6).
    func winogradTileBlock(_ g: ConvGeometry, _ tile: WinogradTile) -> Int {
        if g.inChannels * g.outChannels > 128 * 128 { return 512 }
        return max(64, min(448, 16 * 65536 / (tile.positions * (g.inChannels + g.outChannels))))
    }

    /// How the batch's tiles split into blocks: `blocks` of at most `block` tiles (as even as whole tiles
    /// allow), and `ld`, the floats from one row of V or M to the next: `block` made odd. Rows a multiple
    /// of 16 floats apart made the SGEMMs and transforms up to 1.6x slower (64@56 at 224 or 256 tiles:
    /// 100-109 ms against 65.5 at 227; the same at 16, 32, 48, 96, 128 and 192), and rounding up to an odd
    /// multiple of 16 did not help (100.1); an odd row length did, on every layer.
    func winogradBlocking(_ g: ConvGeometry, _ tile: WinogradTile) -> (block: Int, blocks: Int, ld: Int) {
        let total = g.batch * winogradTiles(g, tile).count
        let cap = max(1, min(total, winogradTileBlock(g, tile)))
        let blocks = max(1, (total + cap - 1) / cap)
        let block = max(1, (total + blocks - 1) / blocks)
        return (block, blocks, block | 1)
    }

    /// Winograd is chosen by itself only when both channel counts reach this. Measured with
    /// `updraft-bench cpu-conv --batch 64 --repeats 5` on the 2-core EPYC, quiet: F(4x4) 1.6x faster
    /// than im2col forward and 1.2x backward-data on SqueezeNet's 16-channel expand3x3 (fire2, fire3),
    /// 1.5–2.5x on the wider layers (F(2x2) alone had been 0.9–1.1x at 16 channels). Thinner layers
    /// (a first layer's 3 channels) stay on im2col.
    static let winogradMinChannels = 16
    /// F(4x4, 3x3) is chosen over F(2x2, 3x3) when the output is at least this many rows and columns.
    /// Measured with `updraft-bench cpu-conv --batch 16 --threads 1 --cpu-time` on the 2-core EPYC
    /// (CPU time, best of 3): F(4x4) 1.1–1.7x faster than F(2x2) on every 3x3 layer of ResNet-18
    /// (7x7 to 56x56 outputs) and SqueezeNet's expand3x3 layers with 32 or more input channels; on
    /// the 16-channel ones F(2x2) ties with im2col and F(4x4) wins (see `winogradMinChannels`).
    static let winograd4x4MinSide = 4

    /// True when `g` has the shape Winograd computes.
    func winogradApplies(_ g: ConvGeometry) -> Bool {
        g.kernelH == 3 && g.kernelW == 3 && g.strideH == 1 && g.strideW == 1 && g.dilationH == 1 && g.dilationW == 1
            && g.groups == 1 && g.outHeight >= 2 && g.outWidth >= 2
    }

    /// The forward algorithm for `g`: the override or the stored tuning when it applies
    /// (`requestedAlgorithm`, CPUBackend+OneDNN.swift), else the built-in rule.
    public func forwardAlgorithm(for g: ConvGeometry) -> CPUConvolutionAlgorithm {
        requestedAlgorithm(g, .forward) ?? builtInForwardAlgorithm(for: g)
    }

    /// The built-in rule: the direct convolution for small K (first layers), Winograd for shapes wide
    /// enough to gain from it, F(4x4, 3x3) where the output is large enough for its tiles, else im2col.
    func builtInForwardAlgorithm(for g: ConvGeometry) -> CPUConvolutionAlgorithm {
        if directApplies(g) && (isDirect(g) ? g.gemmK <= Self.directBuiltInMaxPointwiseK
                                            : g.inChannels <= Self.directBuiltInMaxChannels && g.gemmK <= Self.directBuiltInMaxK) {
            return .direct
        }
        guard winogradApplies(g) else { return .im2col }
        guard g.inChannels >= Self.winogradMinChannels && g.outChannels >= Self.winogradMinChannels else { return .im2col }
        return min(g.outHeight, g.outWidth) >= Self.winograd4x4MinSide ? .winograd4x4 : .winograd
    }

    /// The geometry whose forward pass is `g`'s backward pass for the input, when Winograd can run it:
    /// dy [N, Cout, Ho, Wo] in, dx [N, Cin, H, W] out, padding 2 - pad (so every pad must be at most 2).
    func winogradBackwardDataGeometry(_ g: ConvGeometry) -> ConvGeometry? {
        guard winogradApplies(g), max(g.padTop, g.padBottom, g.padLeft, g.padRight) <= 2,
              g.inHeight >= 2, g.inWidth >= 2 else { return nil }
        var t = g
        (t.inChannels, t.outChannels) = (g.outChannels, g.inChannels)
        (t.inHeight, t.inWidth, t.outHeight, t.outWidth) = (g.outHeight, g.outWidth, g.inHeight, g.inWidth)
        (t.padTop, t.padBottom, t.padLeft, t.padRight) = (2 - g.padTop, 2 - g.padBottom, 2 - g.padLeft, 2 - g.padRight)
        t.hasBias = false
        return t
    }

    /// The backward-data algorithm for `g`: the override or stored tuning when it applies, else what
    /// the built-in forward rule picks for the swapped geometry.
    public func backwardDataAlgorithm(for g: ConvGeometry) -> CPUConvolutionAlgorithm {
        if let requested = requestedAlgorithm(g, .backwardData) { return requested }
        guard let t = winogradBackwardDataGeometry(g) else { return .im2col }
        return builtInForwardAlgorithm(for: t)
    }

    /// Tile rows and columns (each tile makes m x m outputs) and their product.
    func winogradTiles(_ g: ConvGeometry, _ tile: WinogradTile) -> (rows: Int, columns: Int, count: Int) {
        let rows = (g.outHeight + tile.m - 1) / tile.m, columns = (g.outWidth + tile.m - 1) / tile.m
        return (rows, columns, rows * columns)
    }

    /// Floats of per-worker scratch the Winograd forward needs: V and M for one block of tiles, and for
    /// F(4x4, 3x3) one zero-padded input plane.
    func winogradScratchCount(_ g: ConvGeometry, _ tile: WinogradTile) -> Int {
        let tiles = winogradTiles(g, tile)
        let vm = tile.positions * (g.inChannels + g.outChannels) * winogradBlocking(g, tile).ld
        return vm + (tile == .f4 ? winograd4PlaneCount(tiles) : 0)
    }

    /// U for every filter: `positions * Cout * Cin` floats at `u`.
    func winogradFilters(_ g: ConvGeometry, _ tile: WinogradTile, weights w: UnsafePointer<Float>,
                         into u: UnsafeMutablePointer<Float>, parallel: Bool) {
        switch tile {
        case .f2: winograd2Filters(g, weights: w, into: u, parallel: parallel)
        case .f4: winograd4Filters(g, weights: w, into: u, parallel: parallel)
        }
    }

    /// The whole forward pass with the filters in `w`: transforms them into the backend's partial-sum
    /// scratch, then runs `winogradForward` with one scratch per worker.
    func winogradConvolve(_ g: ConvGeometry, _ tile: WinogradTile, input x: UnsafePointer<Float>, weights w: UnsafePointer<Float>,
                          bias: UnsafeMutablePointer<Float>?, residual: UnsafePointer<Float>? = nil, relu: Bool = false,
                          output y: UnsafeMutablePointer<Float>, imageStride: Int, workspaces ws: [CPUWorkspace]) {
        let u = partialSums.floats(tile.positions * g.outChannels * g.inChannels)
        winogradFilters(g, tile, weights: w, into: u, parallel: true)
        CPUKernels.withSingleThreadedBLAS {
            winogradForward(g, tile, input: x, filters: u, bias: bias, residual: residual, relu: relu, output: y, imageStride: imageStride,
                            scratch: ws.map { $0.floats(winogradScratchCount(g, tile)) })
        }
    }

    /// dx for a 3x3 stride-1 layer through `winogradForward`: the filters turned and transposed into
    /// [Cin, Cout, 3, 3] (in the backend's `turnedFilters` scratch), then the forward pass of the swapped geometry.
    func winogradBackwardData(_ g: ConvGeometry, _ tile: WinogradTile, dy: UnsafePointer<Float>, w: UnsafePointer<Float>,
                              dx: UnsafeMutablePointer<Float>) {
        guard let t = winogradBackwardDataGeometry(g) else { return }
        let (K, C) = (g.outChannels, g.inChannels)
        withWorkspaces { ws in
            let turned = turnedFilters.floats(K * C * 9)
            for c in 0..<C {
                for k in 0..<K {
                    let from = w + (k * C + c) * 9, to = turned + (c * K + k) * 9
                    for i in 0..<9 { to[i] = from[8 - i] }
                }
            }
            winogradConvolve(t, tile, input: dy, weights: turned, bias: nil, output: dx,
                             imageStride: C * g.inHeight * g.inWidth, workspaces: ws)
        }
    }

    /// The whole batch's forward pass: output rows of image n start at `y + n * imageStride` (bias
    /// added, and `residual` — laid out as the output, `imageStride` apart — when given), with `u` from
    /// `winogradFilters` and one `winogradScratchCount` scratch per worker.
    /// The batch's tiles, image after image, go in fixed blocks of `winogradTileBlock` (several small
    /// images share one block, so the SGEMMs stay wide); workers take blocks in turn, and as a block's
    /// results do not depend on which worker ran it, the output is the same for any thread count.
    func winogradForward(_ g: ConvGeometry, _ tile: WinogradTile, input x: UnsafePointer<Float>, filters u: UnsafePointer<Float>,
                         bias: UnsafeMutablePointer<Float>?, residual: UnsafePointer<Float>? = nil, relu: Bool = false,
                         output y: UnsafeMutablePointer<Float>, imageStride: Int, scratch: [UnsafeMutablePointer<Float>]) {
        precondition(!relu || tile == .f4, "only F(4x4, 3x3)'s output transform fuses the ReLU")
        let (K, C, P) = (g.outChannels, g.inChannels, tile.positions)
        let tiles = winogradTiles(g, tile)
        let total = g.batch * tiles.count
        let (block, blocks, ld) = winogradBlocking(g, tile)
        let inImage = C * g.inHeight * g.inWidth, inPlane = g.inHeight * g.inWidth, outPlane = g.outHeight * g.outWidth
        // Each block's three phases split over `split` workers when there are fewer blocks than workers
        // (a few large-channel tiles: ResNet's 7x7 layers), else run whole by the worker that took it.
        // Either way every value is computed by the same calls, so the output does not change.
        func run(_ index: Int, worker: Int, split: Int) {
            let first = index * block, count = min(block, total - first)
            let v = scratch[worker], m = scratch[worker] + P * C * ld
            // (every worker's own padded plane sits at the same place in its scratch)
            let planeOffset = P * C * ld + P * K * ld
            func phase(_ n: Int, _ body: (_ worker: Int, _ i: Int) -> Void) {
                if split > 1 { dynamicForEach(n, workers: split, body) } else { for i in 0..<n { body(worker, i) } }
            }
            // V[xi][c][t] = (B^T d B)[xi] for the block's tiles t.
            phase(C) { w, c in
                switch tile {
                case .f2:
                    winograd2InputTransform(g, input: x + c * inPlane, imageStride: inImage, tiles: tiles,
                                            first: first, count: count, v: v + c * ld, stride: C * ld)
                case .f4:
                    winograd4InputTransform(g, input: x + c * inPlane, imageStride: inImage, tiles: tiles, first: first,
                                            count: count, v: v + c * ld, stride: C * ld, plane: scratch[w] + planeOffset)
                }
            }
            // M[xi] = U[xi] [K, C] x V[xi] [C, count], one single-threaded SGEMM per xi.
            phase(P) { _, xi in
                CPUKernels.sgemm(m: K, n: count, k: C, a: u + xi * K * C, lda: C, b: v + xi * C * ld, ldb: ld,
                                 c: m + xi * K * ld, ldc: ld)
            }
            // Y = A^T M A, plus the bias, into the output rows.
            phase(K) { _, k in
                switch tile {
                case .f2:
                    winograd2OutputTransform(g, m: m + k * ld, stride: K * ld, tiles: tiles, first: first, count: count,
                                             bias: bias?[k] ?? 0, residual: residual.map { $0 + k * outPlane },
                                             output: y + k * outPlane, imageStride: imageStride)
                case .f4:
                    winograd4OutputTransform(g, m: m + k * ld, stride: K * ld, tiles: tiles, first: first, count: count,
                                             bias: bias?[k] ?? 0, residual: residual.map { $0 + k * outPlane }, relu: relu,
                                             output: y + k * outPlane, imageStride: imageStride)
                }
            }
        }
        if blocks < min(scratch.count, threadCount) {
            for index in 0..<blocks { run(index, worker: 0, split: scratch.count) }
        } else {
            dynamicForEach(blocks, workers: scratch.count) { worker, index in run(index, worker: worker, split: 1) }
        }
    }

    /// Calls `body(t, image, tileRow, tileColumn)` for the batch's tiles `first + t`, t < `count`, in
    /// order; `body` returns how many tiles of the row it took (up to 4 neighbours, one per SIMD lane).
    @inline(__always)
    func winogradWalk(_ tiles: (rows: Int, columns: Int, count: Int), first: Int, count: Int,
                      _ body: (_ t: Int, _ image: Int, _ row: Int, _ column: Int) -> Int) {
        var (image, tile) = first.quotientAndRemainder(dividingBy: tiles.count)
        var t = 0
        while t < count {
            let step = body(t, image, tile / tiles.columns, tile % tiles.columns)
            t += step
            tile += step
            if tile == tiles.count { tile = 0; image += 1 }
        }
    }
}

extension CPUBackend {
    /// What runs a convolution pass here, as a profile names it: the forward algorithm (with OpenBLAS
    /// for im2col's GEMM), the grouped direct loop, or for the backward pass the weight gradient's
    /// im2col and the input gradient's algorithm.
    public func convolutionEngine(_ g: ConvGeometry, backward: Bool, inputGradient: Bool) -> String {
        func name(_ a: CPUConvolutionAlgorithm, _ pass: CPUConvolutionPass) -> String? {
            switch a {
            case .onednn: return oneDNNImplementation(g, pass).map { "oneDNN \($0)" }
            case .im2col: return usesGroupedDirect(g) ? "grouped direct" : "im2col + OpenBLAS"
            default: return usesGroupedDirect(g) ? "grouped direct" : a.rawValue
            }
        }
        func named(_ a: CPUConvolutionAlgorithm, _ pass: CPUConvolutionPass) -> String { name(a, pass) ?? name(.im2col, pass)! }
        guard backward else { return named(forwardAlgorithm(for: g), .forward) }
        return "weights " + named(backwardWeightsAlgorithm(for: g), .backwardWeights)
            + (inputGradient ? ", input " + named(backwardDataAlgorithm(for: g), .backwardData) : "")
    }
}
