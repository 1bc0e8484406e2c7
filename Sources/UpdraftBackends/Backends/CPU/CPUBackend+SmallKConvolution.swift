import CUpdraftKernels
import UpdraftCore

// The small-K direct convolution (`CPUConvolutionAlgorithm.direct`, the C kernel
// `upd_conv_small_rows`): for a network's first layer, where few input channels make K = Cin*kH*kW
// small (SqueezeNet's and MobileNetV2's 3x3 stride-2 conv1 on RGB: K = 27). im2col + SGEMM spends
// such a layer packing a [27, 12769] operand per image and then runs its epilogue as a pass of its
// own; here the columns of a few output rows at a time (about 512: tens of KiB, in cache) are
// gathered, blocks of 8 channels (4 at the AVX2 level, 2 at baseline) x 16 columns accumulate in
// registers over K, and the bias and a ReLU are applied as the block is stored: the output is
// written once. A 1x1 stride-1 layer's columns are its input planes,
// read in place (no packing of a [K, S] operand): the thin pointwise layers gain too. Forward only.

extension CPUBackend {
    /// The largest K the direct convolution runs when forced (its gathered rows are K x Wo floats).
    static let directMaxK = 512
    /// What the built-in rule gives it (`updraft-bench cpu-conv --batch 16 --threads 1 --cpu-time
    /// --all-layers`, CPU ms against im2col + OpenBLAS): first layers of at most 4 input channels and
    /// K up to 160 (SqueezeNet's conv1, K = 27: 9.6 against 11.9; ResNet-18's 7x7, K = 147: 41.2
    /// against 56.0), and 1x1 stride-1 layers with K up to 48, whose columns are the image itself
    /// (SqueezeNet's expand1x1, K = 16-48: 1.0-1.4 against 1.3-2.0; at K = 64 and over, the squeeze
    /// layers, they are even).
    static let directBuiltInMaxChannels = 4
    static let directBuiltInMaxK = 160
    static let directBuiltInMaxPointwiseK = 48

    /// Whether the direct convolution can run `g`'s forward pass: ungrouped, K at most `directMaxK`.
    func directApplies(_ g: ConvGeometry) -> Bool {
        g.groups == 1 && g.gemmK <= Self.directMaxK && g.batch > 0 && g.outHeight > 0 && g.outWidth > 0
    }

    /// The C kernel's view of one image of `g`.
    private func directShape(_ g: ConvGeometry) -> upd_conv_shape {
        upd_conv_shape(cin: g.inChannels, h: g.inHeight, w: g.inWidth, cout: g.outChannels, kh: g.kernelH, kw: g.kernelW,
                       sh: g.strideH, sw: g.strideW, dh: g.dilationH, dw: g.dilationW, pt: g.padTop, pl: g.padLeft,
                       ho: g.outHeight, wo: g.outWidth)
    }

    /// y (image n at `y + n * imageStride`) = conv(x, w) + bias, with a ReLU epilogue applied at the
    /// store and any other epilogue (`plan`) as a pass after. Images and blocks of output rows are
    /// spread over the threads; each output is computed by one thread, in the same order whatever the
    /// thread count.
    func directForward(_ g: ConvGeometry, x: UnsafeMutablePointer<Float>, w: UnsafeMutablePointer<Float>,
                       bias: UnsafeMutablePointer<Float>?, y: UnsafeMutablePointer<Float>, imageStride: Int,
                       epilogue: Activation?, plan: CPUActivationPlan?) {
        let relu: Bool = { if case .relu? = epilogue { return true } else { return false } }()
        let rowsPerItem = max(1, min(g.outHeight, 4096 / max(1, g.outWidth)))
        let blocks = (g.outHeight + rowsPerItem - 1) / rowsPerItem
        let inImage = g.inChannels * g.inHeight * g.inWidth, plane = g.outHeight * g.outWidth
        withUnsafePointer(to: directShape(g)) { shape in
            withWorkspaces { ws in
                let packed = turnedFilters.floats(upd_conv_small_packed_count(shape))
                upd_conv_small_pack(w, shape, packed)
                let scratch = ws.map { $0.floats(upd_conv_small_scratch_count(shape)) }
                dynamicForEach(g.batch * blocks, workers: scratch.count) { t, item in
                    let n = item / blocks, row = (item % blocks) * rowsPerItem
                    upd_conv_small_rows(x + n * inImage, shape, packed, bias, y + n * imageStride,
                                        row, min(g.outHeight, row + rowsPerItem), relu ? 1 : 0, scratch[t])
                }
                if let plan, !relu {
                    for n in 0..<g.batch { applyEpilogue(plan, y + n * imageStride, count: g.outChannels * plane, parallel: true) }
                }
            }
        }
    }
}
