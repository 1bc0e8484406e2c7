/// Which reduction a pooling window applies (PoolingLayerParams.PoolingType; L2 is not supported): max or average.
public enum PoolingKind: Int, Hashable, Sendable { case max = 0, average = 1 }

/// Padding of a pooling layer as Core ML describes it.
public enum PoolingPadding: Hashable, Sendable {
    /// Explicit amounts; out = floor((in + before + after - k) / stride) + 1.
    case valid(top: Int, bottom: Int, left: Int, right: Int)
    /// out = ceil(in / stride), padding computed as for convolution.
    case same(SamePaddingMode)
    /// ValidCompletePadding ("ceil mode"), symmetric amounts: out = ceil((in + 2p - k) / stride) + 1,
    /// minus 1 if the last window would start at or past in + p. The last window may hang over the edge.
    case includeLastPixel(height: Int, width: Int)

    /// No padding: `.valid` with all four amounts 0 (the spec's default).
    public static let none = PoolingPadding.valid(top: 0, bottom: 0, left: 0, right: 0)
}

/// A pooling layer's parameters (PoolingLayerParams).
public struct PoolingSpec: Hashable, Sendable {
    /// Max or average pooling.
    public var kind: PoolingKind
    /// Window height and width, at least 1 (PoolingLayerParams.kernelSize); ignored when `global`.
    public var kernelH: Int, kernelW: Int
    /// Vertical and horizontal stride, at least 1 (PoolingLayerParams.stride); ignored when `global`.
    public var strideH: Int, strideW: Int
    /// How the input is padded: valid amounts, same, or include-last-pixel (ceil mode).
    public var padding: PoolingPadding
    /// Average pooling divides by the in-image elements only (avgPoolExcludePadding).
    public var excludePadding: Bool
    /// Pool the whole plane to 1x1; kernel, stride and padding are ignored.
    public var global: Bool

    /// A pooling spec; defaults are a 2x2 window with stride 2, no padding, padding excluded from averages, not global.
    public init(kind: PoolingKind, kernelH: Int = 2, kernelW: Int = 2, strideH: Int = 2, strideW: Int = 2,
                padding: PoolingPadding = .none, excludePadding: Bool = true, global: Bool = false) {
        self.kind = kind; self.kernelH = kernelH; self.kernelW = kernelW
        self.strideH = strideH; self.strideW = strideW; self.padding = padding
        self.excludePadding = excludePadding; self.global = global
    }

    /// Resolves the spec against an NCHW input shape. Throws `UpdraftError` (`.invalidArgument`) for a non-rank-4 input, a kernel or stride below 1, or a window larger than the padded input.
    public func geometry(input: Shape) throws -> PoolGeometry {
        guard input.rank == 4 else { throw UpdraftError(.invalidArgument, "pooling expects an NCHW input, got \(input)") }
        if global {
            return PoolGeometry(kind: kind, batch: input.n, channels: input.c, inHeight: input.h, inWidth: input.w,
                                outHeight: 1, outWidth: 1, kernelH: input.h, kernelW: input.w,
                                strideH: max(1, input.h), strideW: max(1, input.w),
                                padTop: 0, padBottom: 0, padLeft: 0, padRight: 0, excludePadding: true)
        }
        guard kernelH >= 1, kernelW >= 1, strideH >= 1, strideW >= 1 else {
            throw UpdraftError(.invalidArgument, "pooling kernel and stride must be at least 1")
        }
        let ph: AxisPadding?, pw: AxisPadding?
        switch padding {
        case let .valid(top, bottom, left, right):
            ph = resolveAxis(input: input.h, kernel: kernelH, stride: strideH, dilation: 1, valid: (top, bottom), same: nil)
            pw = resolveAxis(input: input.w, kernel: kernelW, stride: strideW, dilation: 1, valid: (left, right), same: nil)
        case let .same(mode):
            ph = resolveAxis(input: input.h, kernel: kernelH, stride: strideH, dilation: 1, valid: nil, same: mode)
            pw = resolveAxis(input: input.w, kernel: kernelW, stride: strideW, dilation: 1, valid: nil, same: mode)
        case let .includeLastPixel(padH, padW):
            ph = ceilModeAxis(input: input.h, kernel: kernelH, stride: strideH, pad: padH)
            pw = ceilModeAxis(input: input.w, kernel: kernelW, stride: strideW, pad: padW)
        }
        guard let ph, let pw else {
            throw UpdraftError(.invalidArgument, "pooling window \(kernelH)x\(kernelW) is larger than the padded input \(input)")
        }
        return PoolGeometry(kind: kind, batch: input.n, channels: input.c, inHeight: input.h, inWidth: input.w,
                            outHeight: ph.output, outWidth: pw.output, kernelH: kernelH, kernelW: kernelW,
                            strideH: strideH, strideW: strideW,
                            padTop: ph.before, padBottom: ph.after, padLeft: pw.before, padRight: pw.after,
                            excludePadding: excludePadding)
    }
}

/// includeLastPixel (ceil mode): `after` is how far the padded extent reaches past the input, which is
/// the symmetric pad; the last window may reach further, and those positions count as outside.
func ceilModeAxis(input: Int, kernel: Int, stride: Int, pad: Int) -> AxisPadding? {
    let span = input + 2 * pad - kernel
    guard span >= 0, pad >= 0 else { return nil }
    var out = (span + stride - 1) / stride + 1
    if (out - 1) * stride >= input + pad { out -= 1 }
    return AxisPadding(output: out, before: pad, after: pad)
}

/// A pooling resolved for one input size. Input `[N, C, H, W]`, output `[N, C, Ho, Wo]`.
/// Window (oh, ow) covers rows `oh * strideH - padTop ..< + kernelH`, clipped to the input.
/// Max: the first maximum in row-major window order wins (ties go to the earliest element), and
/// backward routes the whole gradient to it. Average: divides by the in-image element count when
/// `excludePadding`, else by the window clipped to the padded extent `[-padTop, inHeight + padBottom)`.
public struct PoolGeometry: Hashable, Sendable {
    /// Max or average pooling.
    public var kind: PoolingKind
    /// Images N and channels C (pooling keeps the channels).
    public var batch: Int, channels: Int
    /// Input height and width.
    public var inHeight: Int, inWidth: Int
    /// Output height Ho and width Wo.
    public var outHeight: Int, outWidth: Int
    /// Window height and width (the whole plane for global pooling).
    public var kernelH: Int, kernelW: Int
    /// Vertical and horizontal stride.
    public var strideH: Int, strideW: Int
    /// Resolved padding on each side, in elements; padded positions never win a max.
    public var padTop: Int, padBottom: Int, padLeft: Int, padRight: Int
    /// Average pooling divides by the in-image element count only (see the type's comment); max ignores it.
    public var excludePadding: Bool

    /// Input `[N, C, H, W]`.
    public var inputShape: Shape { [batch, channels, inHeight, inWidth] }
    /// Output `[N, C, Ho, Wo]`.
    public var outputShape: Shape { [batch, channels, outHeight, outWidth] }

    /// Forward pass: one flop per window element per output; reads the input once, writes the output.
    public var forwardCost: OpCost {
        OpCost(flops: Double(outputShape.count) * Double(kernelH) * Double(kernelW),
               bytes: f32Bytes(inputShape.count, outputShape.count))
    }
    /// Backward pass: as many flops as forward; reads and writes twice the input and output sizes.
    public var backwardCost: OpCost {
        OpCost(flops: Double(outputShape.count) * Double(kernelH) * Double(kernelW),
               bytes: f32Bytes(inputShape.count * 2, outputShape.count * 2))
    }
}
