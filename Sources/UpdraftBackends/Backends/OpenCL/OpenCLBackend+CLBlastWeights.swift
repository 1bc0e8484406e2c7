import UpdraftCore

/// Convolution weight gradients on CLBlast (ungrouped convolutions; grouped ones stay in-house):
/// dw = sum over images n of dy_n [Cout, P] . col_n^T, where col_n [Cin*KH*KW, P] is image n's im2col
/// matrix, written by `conv_im2col` (Kernels/im2col.cl), or the image itself for pointwise convolutions
/// (no copy). Two ways, both adding the images in order (deterministic):
///
/// - batched (the default, when the scratch buffer holds at least two images' partial products): one strided
///   batched GEMM per run of images writes each image's product into its own slab, and `sum_slabs`
///   adds them up (a run after the first adds the running total, kept in slab 0, as well). Many
///   independent GEMMs at once keep a large device busy.
/// - per image: one GEMM per image adding into dw (beta 1 after the first): the variant
///   `KernelVariant.clblastPerImage`, or when the scratch cannot hold two images' products (or the
///   batch is one image). No slabs to write and read back: faster where one image's GEMM fills the device
///   (PoCL on a CPU), slower on a large GPU.
///
/// The bias gradient is the caller's.
extension OpenCLBackend {
    /// False (after noting why) when CLBlast refused a call: the caller runs the in-house kernel,
    /// which overwrites whatever was written.
    func clblastConvolutionBackwardWeights(_ g: ConvGeometry, x: OpenCLBuffer, dy: OpenCLBuffer, dw: OpenCLBuffer,
                                           shape: KernelShape, perImage: Bool = false) throws -> Bool {
        guard g.groups == 1, g.batch > 0 else { return false }
        let plane = g.outHeight * g.outWidth, depth = g.gemmK        // P, Cin * KH * KW
        let weights = g.outChannels * depth
        if plane == 0 {
            try context.fill(dw, with: 0, count: weights)
            return true
        }
        let colFloats = shape.pointwise ? 0 : depth * plane           // per image
        let limit = gemmWorkspace.scratchLimit
        let batchedRun = min(g.batch, max(0, (limit - weights) / max(1, weights + colFloats)))
        if !perImage && g.batch > 1 && batchedRun >= 2 {
            return try batchedWeightGradient(g, x: x, dy: dy, dw: dw, shape: shape, run: batchedRun)
        }
        let run = min(g.batch, max(1, limit / max(1, colFloats)))
        var first = 0
        while first < g.batch {
            let images = min(run, g.batch - first)
            let col = shape.pointwise ? nil : try im2col(g, x: x, firstImage: first, images: images, offset: 0)
            for i in 0..<images {
                let n = first + i
                var op = GemmOperation(m: g.outChannels, n: depth, k: plane, transB: true)
                op.offsetA = n * g.outChannels * plane
                op.offsetB = col == nil ? n * g.inChannels * plane : i * colFloats
                op.beta = n == 0 ? 0 : 1
                guard try clblastGemm(op, a: dy, b: col ?? x, c: dw, bias: nil, shape: shape) else { return false }
            }
            first += images
        }
        return true
    }

    /// Scratch layout: [0, W) the running total, then `run` slabs of W (W = the weight count), then the
    /// im2col matrices of the run. The in-order queue finishes one run before the next overwrites them.
    private func batchedWeightGradient(_ g: ConvGeometry, x: OpenCLBuffer, dy: OpenCLBuffer, dw: OpenCLBuffer,
                                       shape: KernelShape, run: Int) throws -> Bool {
        let plane = g.outHeight * g.outWidth, depth = g.gemmK, weights = g.outChannels * depth
        let colOffset = (run + 1) * weights
        var first = 0
        while first < g.batch {
            let images = min(run, g.batch - first)
            let scratch = try gemmWorkspace.scratch(count: colOffset + (shape.pointwise ? 0 : run * depth * plane),
                                                    context: context)
            var op = GemmOperation(m: g.outChannels, n: depth, k: plane, transB: true, batch: images)
            op.offsetA = first * g.outChannels * plane
            op.strideA = g.outChannels * plane
            if shape.pointwise {
                op.offsetB = first * g.inChannels * plane
                op.strideB = g.inChannels * plane
            } else {
                _ = try im2col(g, x: x, firstImage: first, images: images, offset: colOffset)
                op.offsetB = colOffset
                op.strideB = depth * plane
            }
            op.offsetC = weights
            op.strideC = weights
            guard try clblastGemm(op, a: dy, b: shape.pointwise ? x : scratch, c: scratch, bias: nil, shape: shape) else {
                return false
            }
            let last = first + images == g.batch
            // The first run sums its slabs; later ones the running total (slab 0) too, in place.
            try sumSlabs(scratch, offset: first == 0 ? weights : 0, rows: 1, columns: weights,
                         slabs: first == 0 ? images : images + 1, into: last ? dw : scratch, offset: 0, ld: weights)
            first += images
        }
        return true
    }

    /// Enqueues `conv_im2col` for images [firstImage, firstImage + images) of x into the scratch buffer at
    /// `offset` (grown to hold them) and returns the scratch buffer.
    private func im2col(_ g: ConvGeometry, x: OpenCLBuffer, firstImage: Int, images: Int, offset: Int) throws -> OpenCLBuffer {
        let plane = g.outHeight * g.outWidth, depth = g.gemmK
        let col = try gemmWorkspace.scratch(count: offset + images * depth * plane, context: context)
        try enqueue(try opsKernel("im2col.cl", "conv_im2col"), [.buffer(x), .int(firstImage), .buffer(col), .int(offset)]
                        + [g.inChannels, g.inHeight, g.inWidth, g.outHeight, g.outWidth, g.kernelH, g.kernelW,
                           g.strideH, g.strideW, g.dilationH, g.dilationW, g.padTop, g.padLeft].map { .int($0) },
                    global: [plane, depth, images], local: nil, defines: [:])
        return col
    }
}
