/// Core ML's `same` padding asymmetry (SamePadding.asymmetryMode).
public enum SamePaddingMode: Int, Hashable, Sendable {
    /// The extra row/column of an odd total goes to the bottom/right (Core ML's default).
    case bottomRightHeavy = 0
    /// The extra row/column of an odd total goes to the top/left.
    case topLeftHeavy = 1
}

/// Padding of a convolution as Core ML describes it.
public enum ConvolutionPadding: Hashable, Sendable {
    /// Explicit amounts, possibly asymmetric (ValidPadding.paddingAmounts, order [H, W]).
    case valid(top: Int, bottom: Int, left: Int, right: Int)
    /// Output = ceil(input / stride), padding computed (SamePadding).
    case same(SamePaddingMode)

    /// No padding: `.valid` with all four amounts 0 (the spec's default).
    public static let none = ConvolutionPadding.valid(top: 0, bottom: 0, left: 0, right: 0)
}

/// Resolved padding of one spatial axis.
public struct AxisPadding: Hashable, Sendable {
    /// Output size along the axis, in elements.
    public var output: Int
    /// Padding before the first input element (top or left), in elements.
    public var before: Int
    /// Padding after the last input element (bottom or right), in elements.
    public var after: Int
}

/// Output size and padding along one axis under Core ML's rules.
/// - valid: out = floor((in + before + after - kEff) / stride) + 1
/// - same:  out = ceil(in / stride); total = max(0, (out - 1) * stride + kEff - in);
///          bottomRightHeavy puts floor(total / 2) before, topLeftHeavy ceil(total / 2).
func resolveAxis(input: Int, kernel: Int, stride: Int, dilation: Int,
                 valid: (Int, Int)?, same: SamePaddingMode?) -> AxisPadding? {
    let kEff = (kernel - 1) * dilation + 1
    if let mode = same {
        let out = (input + stride - 1) / stride
        let total = max(0, (out - 1) * stride + kEff - input)
        let before = mode == .bottomRightHeavy ? total / 2 : (total + 1) / 2
        return AxisPadding(output: out, before: before, after: total - before)
    }
    let (before, after) = valid ?? (0, 0)
    let span = input + before + after - kEff
    guard span >= 0 else { return nil }
    return AxisPadding(output: span / stride + 1, before: before, after: after)
}

/// A convolution layer's parameters (ConvolutionLayerParams), independent of the input size.
public struct ConvolutionSpec: Hashable, Sendable {
    /// Input channels C_in (kernelChannels times groups in ConvolutionLayerParams); must equal the input's C.
    public var inputChannels: Int
    /// Output channels C_out (ConvolutionLayerParams.outputChannels).
    public var outputChannels: Int
    /// Kernel height and width, at least 1 (ConvolutionLayerParams.kernelSize).
    public var kernelH: Int, kernelW: Int
    /// Vertical and horizontal stride, at least 1; default 1 (ConvolutionLayerParams.stride).
    public var strideH: Int = 1, strideW: Int = 1
    /// Vertical and horizontal dilation, at least 1; default 1 (ConvolutionLayerParams.dilationFactor).
    public var dilationH: Int = 1, dilationW: Int = 1
    /// Channel groups, dividing both C_in and C_out; 1 is a dense convolution, C_in a depthwise one (nGroups).
    public var groups: Int = 1
    /// How the input is padded (valid amounts or same); default no padding.
    public var padding: ConvolutionPadding = .none
    /// Whether a `[C_out]` bias is added (ConvolutionLayerParams.hasBias); default true.
    public var hasBias: Bool = true

    /// A convolution spec; unset stride and dilation are 1, groups 1, no padding, with bias. Nothing is checked until `geometry(input:)`.
    public init(inputChannels: Int, outputChannels: Int, kernelH: Int, kernelW: Int,
                strideH: Int = 1, strideW: Int = 1, dilationH: Int = 1, dilationW: Int = 1,
                groups: Int = 1, padding: ConvolutionPadding = .none, hasBias: Bool = true) {
        self.inputChannels = inputChannels; self.outputChannels = outputChannels
        self.kernelH = kernelH; self.kernelW = kernelW
        self.strideH = strideH; self.strideW = strideW
        self.dilationH = dilationH; self.dilationW = dilationW
        self.groups = groups; self.padding = padding; self.hasBias = hasBias
    }

    /// Weights `[C_out, C_in / groups, kH, kW]`.
    public var weightShape: Shape { [outputChannels, inputChannels / groups, kernelH, kernelW] }
    /// Bias `[C_out]`.
    public var biasShape: Shape { [outputChannels] }

    /// Resolves the spec against an NCHW input shape, checking every size.
    public func geometry(input: Shape) throws -> ConvGeometry {
        guard input.rank == 4 else {
            throw UpdraftError(.invalidArgument, "convolution expects an NCHW input, got \(input)")
        }
        guard input.c == inputChannels else {
            throw UpdraftError(.invalidArgument, "convolution expects \(inputChannels) input channels, got \(input) ")
        }
        guard groups >= 1, inputChannels % groups == 0, outputChannels % groups == 0 else {
            throw UpdraftError(.invalidArgument,
                "convolution groups \(groups) must divide input channels \(inputChannels) and output channels \(outputChannels)")
        }
        guard kernelH >= 1, kernelW >= 1, strideH >= 1, strideW >= 1, dilationH >= 1, dilationW >= 1 else {
            throw UpdraftError(.invalidArgument, "convolution kernel, stride and dilation must be at least 1")
        }
        var validH: (Int, Int)? = nil, validW: (Int, Int)? = nil, same: SamePaddingMode? = nil
        switch padding {
        case let .valid(top, bottom, left, right):
            guard min(top, bottom, left, right) >= 0 else {
                throw UpdraftError(.invalidArgument, "convolution padding amounts must not be negative")
            }
            validH = (top, bottom); validW = (left, right)
        case let .same(mode): same = mode
        }
        guard let ph = resolveAxis(input: input.h, kernel: kernelH, stride: strideH, dilation: dilationH, valid: validH, same: same),
              let pw = resolveAxis(input: input.w, kernel: kernelW, stride: strideW, dilation: dilationW, valid: validW, same: same)
        else {
            throw UpdraftError(.invalidArgument,
                "convolution kernel \(kernelH)x\(kernelW) (dilation \(dilationH)x\(dilationW)) is larger than the padded input \(input)")
        }
        return ConvGeometry(batch: input.n, inChannels: inputChannels, inHeight: input.h, inWidth: input.w,
                            outChannels: outputChannels, outHeight: ph.output, outWidth: pw.output,
                            kernelH: kernelH, kernelW: kernelW, strideH: strideH, strideW: strideW,
                            dilationH: dilationH, dilationW: dilationW,
                            padTop: ph.before, padBottom: ph.after, padLeft: pw.before, padRight: pw.after,
                            groups: groups, hasBias: hasBias)
    }
}

/// A convolution resolved for one input size: everything a kernel or a reference loop needs.
/// Input `[N, C_in, H, W]`, weights `[C_out, C_in/g, kH, kW]`, bias `[C_out]`, output `[N, C_out, Ho, Wo]`;
/// output (oh, ow) reads input rows `oh * strideH - padTop + kh * dilationH` (and likewise for columns).
public struct ConvGeometry: Hashable, Sendable {
    /// Number of images N.
    public var batch: Int
    /// Input channels C_in and input height and width.
    public var inChannels: Int, inHeight: Int, inWidth: Int
    /// Output channels C_out and output height Ho and width Wo.
    public var outChannels: Int, outHeight: Int, outWidth: Int
    /// Kernel height and width.
    public var kernelH: Int, kernelW: Int
    /// Vertical and horizontal stride.
    public var strideH: Int, strideW: Int
    /// Vertical and horizontal dilation (1: dense kernel).
    public var dilationH: Int, dilationW: Int
    /// Resolved padding on each side, in elements (same padding already computed).
    public var padTop: Int, padBottom: Int, padLeft: Int, padRight: Int
    /// Channel groups g; each group maps C_in/g input channels to C_out/g output channels.
    public var groups: Int
    /// Whether a `[C_out]` bias is added to the output.
    public var hasBias: Bool

    /// Input `[N, C_in, H, W]`.
    public var inputShape: Shape { [batch, inChannels, inHeight, inWidth] }
    /// Output `[N, C_out, Ho, Wo]`.
    public var outputShape: Shape { [batch, outChannels, outHeight, outWidth] }
    /// Weights `[C_out, C_in / groups, kH, kW]`.
    public var weightShape: Shape { [outChannels, inChannels / groups, kernelH, kernelW] }
    /// Bias `[C_out]`.
    public var biasShape: Shape { [outChannels] }
    /// True for a 1x1, stride-1, unpadded, ungrouped convolution: a plain GEMM.
    public var isPointwise: Bool {
        kernelH == 1 && kernelW == 1 && strideH == 1 && strideW == 1 && padTop == 0 && padLeft == 0
            && padBottom == 0 && padRight == 0 && groups == 1
    }

    /// GEMM view per image and group: M = C_out/g, N = Ho*Wo, K = C_in/g * kH * kW.
    public var gemmM: Int { outChannels / groups }
    /// GEMM N: output positions per image, Ho * Wo.
    public var gemmN: Int { outHeight * outWidth }
    /// GEMM K: multiply-adds per output element, C_in/g * kH * kW.
    public var gemmK: Int { inChannels / groups * kernelH * kernelW }

    private var macs: Double { Double(batch) * Double(groups) * Double(gemmM) * Double(gemmN) * Double(gemmK) }
    /// Forward pass: 2 flops per multiply-add plus the bias adds; bytes for input, weights, output and bias.
    public var forwardCost: OpCost {
        OpCost(flops: 2 * macs + (hasBias ? Double(outputShape.count) : 0),
               bytes: f32Bytes(inputShape.count, weightShape.count, outputShape.count, hasBias ? outChannels : 0))
    }
    /// Gradient for the input: same multiply-adds as forward.
    public var backwardDataCost: OpCost {
        OpCost(flops: 2 * macs, bytes: f32Bytes(outputShape.count, weightShape.count, inputShape.count))
    }
    /// Gradients for weights (and bias): same multiply-adds as forward.
    public var backwardWeightsCost: OpCost {
        OpCost(flops: 2 * macs + (hasBias ? Double(outputShape.count) : 0),
               bytes: f32Bytes(inputShape.count, outputShape.count, weightShape.count, hasBias ? outChannels : 0))
    }
}
