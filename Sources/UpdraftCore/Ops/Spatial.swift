/// The 4-D ops that move or rescale values within each example without weights: padding, resampling
/// (upsample; Ops/Resample.swift), local response normalization, L2 normalization and instance
/// normalization (the statistics part; its frozen gamma and beta run as a channel affine). They share one pair of `Backend` entry points
/// (`spatialForward` / `spatialBackward`), one geometry type and one verification case kind.
///
/// Every op reads x [N, C, H, W] and writes y [N, C, Ho, Wo]; its backward gets x, y and dy and writes
/// dx. The formulas are those of NeuralNetwork.proto (PaddingLayerParams, UpsampleLayerParams,
/// LRNLayerParams, L2NormalizeLayerParams, BatchnormLayerParams.instanceNormalization).

/// PaddingLayerParams' PaddingType.
public enum PaddingMode: Hashable, Sendable {
    /// The padded border holds `value`.
    case constant(Float)
    /// Mirrored about the edge row/column, which is not repeated: [1 2 3] padded by 2 -> 3 2 [1 2 3] 2 1.
    /// Each amount must be below the size of its axis.
    case reflection
    /// The edge row/column repeated: [1 2 3] padded by 2 -> 1 1 [1 2 3] 3 3.
    case replication
}

/// A padding layer: `top`/`bottom` rows and `left`/`right` columns added around every plane.
public struct PaddingSpec: Hashable, Sendable {
    /// What fills the padded border: a constant, a reflection or a replication of the edge.
    public var mode: PaddingMode
    /// Rows added above and below and columns added left and right of every plane, in elements (non-negative).
    public var top: Int, bottom: Int, left: Int, right: Int
    /// A padding spec; the amounts are checked by `SpatialOp.geometry(input:)`.
    public init(mode: PaddingMode, top: Int, bottom: Int, left: Int, right: Int) {
        self.mode = mode; self.top = top; self.bottom = bottom; self.left = left; self.right = right
    }
}

/// UpsampleLayerParams.LinearUpsampleMode: where output sample i reads the input grid.
public enum LinearUpsampleMode: Int, Hashable, Sendable {
    /// spacing = (Xin - Xin/Xout) / (Xout - 1), grid[i] = i * spacing.
    case `default` = 0
    /// spacing = (Xin - 1) / (Xout - 1), grid[i] = i * spacing (PyTorch's align_corners=True).
    case alignCornersTrue = 1
    /// spacing = Xin / Xout, grid[i] = (i + 0.5) * spacing - 0.5 (PyTorch's align_corners=False).
    case alignCornersFalse = 2
}

/// An upsample layer with integer scaling factors (a `ResampleOp`).
public struct UpsampleSpec: Hashable, Sendable {
    /// How output values are computed from the input grid (UpsampleLayerParams.mode).
    public enum Mode: Hashable, Sendable {
        /// y[i, j] = x[i / scaleH, j / scaleW].
        case nearest
        /// Separable linear interpolation on the grid of `LinearUpsampleMode`, clamped to [0, X - 1].
        case bilinear(LinearUpsampleMode)
    }
    /// Integer factors by which height and width grow (UpsampleLayerParams.scalingFactor): Ho = H * scaleH, Wo = W * scaleW.
    public var scaleH: Int, scaleW: Int
    /// Nearest-neighbour or bilinear interpolation.
    public var mode: Mode
    /// An upsample spec; the factors are checked by `SpatialOp.geometry(input:)`.
    public init(scaleH: Int, scaleW: Int, mode: Mode) { self.scaleH = scaleH; self.scaleW = scaleW; self.mode = mode }
}

/// Local response normalization across channels (LRNLayerParams):
/// y[c] = x[c] / (k + alpha / localSize * sum over the window of x²)^beta, the window being channels
/// c - (localSize - 1) / 2 ... c + localSize / 2 clipped to [0, C) (Caffe's and Core ML's MIL rule;
/// odd sizes are centred).
public struct LRNSpec: Hashable, Sendable {
    /// alpha (the window sum's scale, divided by `localSize`), beta (the exponent) and k (the bias), as in LRNLayerParams.
    public var alpha: Float, beta: Float, k: Float
    /// Channels in the window (LRNLayerParams.localSize), at least 1.
    public var localSize: Int
    /// An LRN spec with LRNLayerParams' constants.
    public init(alpha: Float, beta: Float, k: Float, localSize: Int) {
        self.alpha = alpha; self.beta = beta; self.k = k; self.localSize = localSize
    }
    /// Channels before c in c's window.
    public var before: Int { (localSize - 1) / 2 }
}

/// One of the spatial ops with its parameters.
public enum SpatialOp: Hashable, Sendable {
    /// Constant, reflection or replication padding around every plane (PaddingLayerParams).
    case padding(PaddingSpec)
    /// Upsampling and the other resampling layers: taps on a grid per axis (Ops/Resample.swift).
    case resampling(ResampleOp)
    /// Local response normalization across channels (LRNLayerParams).
    case lrn(LRNSpec)
    /// y = x / sqrt(sum of x² over the example's C*H*W values + epsilon).
    case l2Normalize(epsilon: Float)
    /// y[n, c] = (x[n, c] - mean) / sqrt(variance + epsilon), mean and (biased) variance over the
    /// (n, c) plane. Gamma and beta are not part of it.
    case instanceNormalization(epsilon: Float)

    /// Nearest or bilinear upsampling by integer factors (UpsampleLayerParams), a resampling.
    public static func upsample(_ spec: UpsampleSpec) -> SpatialOp { .resampling(.upsample(spec)) }

    /// The family name, as `--op` filters and gradcheck rows show it.
    public var familyName: String {
        switch self {
        case .padding: return "padding"
        case let .resampling(r): return r.familyName
        case .lrn: return "lrn"
        case .l2Normalize: return "l2normalize"
        case .instanceNormalization: return "instanceNormalization"
        }
    }

    /// The op resolved for an input [N, C, H, W]; throws when the parameters do not fit it.
    public func geometry(input: Shape) throws -> SpatialGeometry {
        guard input.rank == 4 else {
            throw UpdraftError(.invalidArgument, "\(familyName) expects an NCHW input, got \(input)")
        }
        for d in input.dims where d < 0 {
            throw UpdraftError(.invalidArgument, "\(familyName): input \(input) has a negative size")
        }
        var out = input
        switch self {
        case let .padding(p):
            for (what, v) in [("top", p.top), ("bottom", p.bottom), ("left", p.left), ("right", p.right)]
            where v < 0 || v > Shape.maxDimension {
                throw UpdraftError(.invalidArgument, "padding \(what) amount \(v) is outside 0...\(Shape.maxDimension)")
            }
            if case .reflection = p.mode {
                guard p.top < max(input.h, 1), p.bottom < max(input.h, 1), p.left < max(input.w, 1), p.right < max(input.w, 1) else {
                    throw UpdraftError(.invalidArgument,
                        "reflection padding \(p.top)/\(p.bottom)/\(p.left)/\(p.right) (top/bottom/left/right) must be smaller than the input's height and width (\(input))",
                        hint: "use replication padding, or pad in several layers")
                }
            }
            if input.h == 0 || input.w == 0, !isConstant(p.mode) {
                throw UpdraftError(.invalidArgument, "\(p.mode) padding of an empty plane \(input) has nothing to repeat")
            }
            out = Shape([input.n, input.c, input.h + p.top + p.bottom, input.w + p.left + p.right])
        case let .resampling(r):
            let (h, w) = try r.outputSize(input)
            out = Shape([input.n, input.c, h, w])
        case let .lrn(l):
            guard l.localSize >= 1, l.localSize <= Shape.maxDimension else {
                throw UpdraftError(.invalidArgument, "LRN localSize \(l.localSize) must be at least 1")
            }
            guard l.k > 0, l.k.isFinite, l.alpha.isFinite, l.beta.isFinite else {
                throw UpdraftError(.invalidArgument, "LRN k (\(l.k)) must be positive and alpha (\(l.alpha)), beta (\(l.beta)) finite")
            }
        case let .l2Normalize(eps), let .instanceNormalization(eps):
            guard eps > 0, eps.isFinite else {
                throw UpdraftError(.invalidArgument, "\(familyName) epsilon \(eps) must be positive")
            }
        }
        return SpatialGeometry(op: self, inputShape: input, outputShape: out)
    }
}

private func isConstant(_ mode: PaddingMode) -> Bool { if case .constant = mode { return true } else { return false } }

/// A spatial op resolved for one input: x `inputShape`, y `outputShape` (both [N, C, H, W]).
public struct SpatialGeometry: Hashable, Sendable {
    /// Which op, with its parameters.
    public var op: SpatialOp
    /// x `[N, C, H, W]`.
    public var inputShape: Shape
    /// y `[N, C, Ho, Wo]` (the input's size except for padding and resampling).
    public var outputShape: Shape

    /// Images N.
    public var batch: Int { inputShape.n }
    /// Channels C (the same for input and output).
    public var channels: Int { inputShape.c }
    /// Input height H.
    public var inHeight: Int { inputShape.h }
    /// Input width W.
    public var inWidth: Int { inputShape.w }
    /// Output height Ho.
    public var outHeight: Int { outputShape.h }
    /// Output width Wo.
    public var outWidth: Int { outputShape.w }

    /// Forward pass estimate per op (padding and nearest resampling are pure copies; normalizations read x more than once).
    public var forwardCost: OpCost {
        let x = inputShape.count, y = outputShape.count
        switch op {
        case .padding: return OpCost(flops: 0, bytes: f32Bytes(x, y))
        case let .resampling(r):
            return OpCost(flops: r.grids == (.nearest, .nearest) ? 0 : Double(y) * 6, bytes: f32Bytes(x, y))
        case let .lrn(l): return OpCost(flops: Double(x) * Double(2 * l.localSize + 4), bytes: f32Bytes(x, y))
        case .l2Normalize: return OpCost(flops: Double(3 * x), bytes: f32Bytes(x, x, y))
        case .instanceNormalization: return OpCost(flops: Double(5 * x), bytes: f32Bytes(x, x, x, y))
        }
    }

    /// Input-gradient pass estimate per op (reads dy and, where needed, x and y; writes dx).
    public var backwardCost: OpCost {
        let x = inputShape.count, y = outputShape.count
        switch op {
        case .padding: return OpCost(flops: Double(y), bytes: f32Bytes(y, x))
        case let .resampling(r): return OpCost(flops: Double(y) * (r.grids == (.nearest, .nearest) ? 1 : 8), bytes: f32Bytes(y, x))
        case let .lrn(l): return OpCost(flops: Double(x) * Double(2 * l.localSize * l.localSize + 8), bytes: f32Bytes(x, y, x))
        case .l2Normalize: return OpCost(flops: Double(6 * x), bytes: f32Bytes(x, x, y, x))
        case .instanceNormalization: return OpCost(flops: Double(9 * x), bytes: f32Bytes(x, x, y, y, x))
        }
    }

    /// The reflection/replication source index of padded position `o` (already shifted by the leading
    /// amount: o in -before ..< size + after) along an axis of `size`; nil for the constant border.
    @inlinable @inline(__always)
    package static func paddingSource(_ o: Int, size: Int, mode: PaddingMode) -> Int? {
        if o >= 0 && o < size { return o }
        switch mode {
        case .constant: return nil
        case .replication: return o < 0 ? 0 : size - 1
        case .reflection: return o < 0 ? -o : 2 * (size - 1) - o
        }
    }
}
