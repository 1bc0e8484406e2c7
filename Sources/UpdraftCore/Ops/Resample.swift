/// Resampling (upsample, and the layers that resize by a grid) as one geometry: per axis an input
/// size, an output size and a grid — the rule that takes output index o to a source coordinate in
/// the input. Output o then reads the two input positions around the coordinate, i0 = floor(g) and
/// i1 = min(i0 + 1, X - 1), with weights 1 - f and f (f = g - i0): its taps. Nearest neighbour is
/// the grid whose coordinates are whole, read with one tap.
///
/// The reference (Reference+Resample.swift), the CPU loops (CPUBackend+Resample.swift) and the
/// OpenCL kernels (Kernels/resample.cl, fed the taps as small tables) read nothing but the taps, so
/// a new resampling layer is a `ResampleOp` case here (its output size and grids), its Core ML
/// codec and its shape rule. Backward is the transpose: dy goes back to the taps with the same weights.

/// How output index o of an axis becomes a source coordinate g in the input, for an axis of X input
/// and N output samples (NeuralNetwork.proto, UpsampleLayerParams.LinearUpsampleMode). Every grid
/// is clamped to [0, X - 1].
public enum ResampleGrid: Hashable, Sendable {
    /// Nearest neighbour by a whole factor: g = floor(o * X / N) (UpsampleLayerParams NN).
    case nearest
    /// spacing = (X - X/N) / (N - 1), g = o * spacing (UpsampleLayerParams DEFAULT).
    case upsample
    /// spacing = (X - 1) / (N - 1), g = o * spacing; 0 when N = 1 (ALIGN_CORNERS_TRUE, PyTorch's align_corners=True).
    case alignCorners
    /// spacing = X / N, g = (o + 0.5) * spacing - 0.5 (ALIGN_CORNERS_FALSE, PyTorch's align_corners=False).
    case halfPixel
    /// As `alignCorners`, but one sample sits in the middle, (X - 1) / 2 (SamplingMode ALIGN_ENDPOINTS_MODE).
    case alignEndpoints
    /// spacing = max(1, X - 1) / N, g = (o + 0.5) * spacing (SamplingMode ROI_ALIGN_MODE).
    case roiAlign

    /// g = a * o + b before clamping, on an axis of `inSize` inputs sampled `outSize` times.
    public func line(inSize: Int, outSize: Int) -> (a: Double, b: Double) {
        let xin = Double(inSize), xout = Double(outSize)
        switch self {
        case .nearest: return outSize > 0 ? (xin / xout, 0) : (0, 0)
        case .upsample: return outSize > 1 ? ((xin - xin / xout) / (xout - 1), 0) : (0, 0)
        case .alignCorners: return outSize > 1 ? ((xin - 1) / (xout - 1), 0) : (0, 0)
        case .halfPixel:
            let spacing = outSize > 0 ? xin / xout : 0
            return (spacing, 0.5 * spacing - 0.5)
        case .alignEndpoints: return outSize > 1 ? ((xin - 1) / (xout - 1), 0) : (0, (xin - 1) / 2)
        case .roiAlign:
            let spacing = outSize > 0 ? max(1, xin - 1) / xout : 0
            return (spacing, 0.5 * spacing)
        }
    }
}

/// SamplingMode.Method: how resizeBilinear and cropResize place N samples on an interval [0, X - 1]
/// (numpy.linspace(start, end, N), clamped to X - 1), and the grid each is.
public enum SamplingMode: Int, Hashable, Sendable, CaseIterable {
    /// start = 0, end = X - 1.
    case strictAlignEndpoints = 0
    /// start = 0, end = X - 1; N = 1: start = end = (X - 1) / 2.
    case alignEndpoints = 1
    /// start = 0, end = X - X / N (upsample's DEFAULT grid).
    case upsample = 2
    /// spacing = max(1, X - 1) / N, start = spacing / 2, end = start + (N - 1) * spacing.
    case roiAlign = 3

    /// The grid of this mode.
    public var grid: ResampleGrid {
        switch self {
        case .strictAlignEndpoints: return .alignCorners
        case .alignEndpoints: return .alignEndpoints
        case .upsample: return .upsample
        case .roiAlign: return .roiAlign
        }
    }

    /// NeuralNetwork.proto's name.
    public var name: String {
        switch self {
        case .strictAlignEndpoints: return "STRICT_ALIGN_ENDPOINTS_MODE"
        case .alignEndpoints: return "ALIGN_ENDPOINTS_MODE"
        case .upsample: return "UPSAMPLE_MODE"
        case .roiAlign: return "ROI_ALIGN_MODE"
        }
    }
}

/// A resizeBilinear layer (ResizeBilinearLayerParams): every plane resampled to `height` x `width`
/// on the grid of `mode`, on both axes.
public struct ResizeSpec: Hashable, Sendable {
    /// targetSize: the output's height and width, at least 1.
    public var height: Int, width: Int
    /// The sampling mode of both axes.
    public var mode: SamplingMode

    public init(height: Int, width: Int, mode: SamplingMode) { self.height = height; self.width = width; self.mode = mode }
}

/// Where one output position reads an axis of the input: i0 with weight 1 - f and i1 with weight f.
public struct ResampleTap: Hashable, Sendable {
    /// The input position at or below the source coordinate, and the one after it (clamped to the axis).
    public var i0: Int, i1: Int
    /// The weight of `i1` (0 ≤ f < 1); `i0` has 1 - f.
    public var f: Double

    public init(i0: Int, i1: Int, f: Double) { self.i0 = i0; self.i1 = i1; self.f = f }
}

/// One axis of a resampling: `outSize` samples of `inSize` inputs on `grid`.
public struct ResampleAxis: Hashable, Sendable {
    public var inSize: Int, outSize: Int
    public var grid: ResampleGrid

    public init(inSize: Int, outSize: Int, grid: ResampleGrid) { self.inSize = inSize; self.outSize = outSize; self.grid = grid }

    /// The taps of output positions 0 ..< outSize.
    public func taps() -> [ResampleTap] { (0..<max(outSize, 0)).map(tap) }

    /// The taps of output position `o`.
    public func tap(_ o: Int) -> ResampleTap {
        if grid == .nearest {
            let i = min(o * inSize / max(outSize, 1), max(inSize - 1, 0))
            return ResampleTap(i0: i, i1: i, f: 0)
        }
        let (a, b) = grid.line(inSize: inSize, outSize: outSize)
        let g = min(Double(inSize - 1), max(0, Double(o) * a + b))
        let i0 = Int(g.rounded(.down))
        return ResampleTap(i0: i0, i1: min(i0 + 1, inSize - 1), f: g - Double(i0))
    }
}

/// Every output row's and column's taps: one table shared by every example.
public struct ResampleTable: Hashable, Sendable {
    /// Per table, the taps of each output row (height) and each output column (width).
    public var rows: [[ResampleTap]], columns: [[ResampleTap]]

    public init(rows: [[ResampleTap]], columns: [[ResampleTap]]) { self.rows = rows; self.columns = columns }

    /// Tables held: 1 when every example reads the same positions.
    public var count: Int { rows.count }
    /// The table example `n` reads.
    public func index(ofExample n: Int) -> Int { count == 1 ? 0 : n }
}

/// An upsample layer with fractional scaling factors (UpsampleLayerParams.fractionalScalingFactor):
/// bilinear on the ALIGN_CORNERS_TRUE or ALIGN_CORNERS_FALSE grid (Core ML takes no other), the
/// output floor(H * scaleH) x floor(W * scaleW), the grid's spacing from those sizes (Xin / Xout,
/// not 1 / scale, as NeuralNetwork.proto writes it).
public struct FractionalUpsampleSpec: Hashable, Sendable {
    /// Positive factors for height and width, as stored (float32).
    public var scaleH: Float, scaleW: Float
    /// `.alignCornersTrue` or `.alignCornersFalse`.
    public var mode: LinearUpsampleMode

    public init(scaleH: Float, scaleW: Float, mode: LinearUpsampleMode) { self.scaleH = scaleH; self.scaleW = scaleW; self.mode = mode }

    /// floor(size * scale), computed in Double from the float32 factor (as coremltools infers it).
    func outputSize(_ size: Int, _ scale: Float, axis: String) throws -> Int {
        guard scale.isFinite, scale > 0, Double(scale) <= Double(Shape.maxDimension) else {
            throw UpdraftError(.invalidArgument, "upsample fractional scaling factor \(scale) (\(axis)) must be positive")
        }
        let out = Int((Double(size) * Double(scale)).rounded(.down))
        guard size == 0 || out > 0 else {
            throw UpdraftError(.invalidArgument, "upsample by \(scale) leaves nothing of the \(axis) \(size): floor(\(size) x \(scale)) is 0",
                               hint: "use a factor of at least 1 / \(size)")
        }
        return out
    }
}

/// The resampling layers, each a constructor of the one geometry: its output size and its grids.
public enum ResampleOp: Hashable, Sendable {
    /// UpsampleLayerParams with whole scaling factors: nearest or one of the bilinear grids.
    case upsample(UpsampleSpec)
    /// UpsampleLayerParams with fractional scaling factors: bilinear, align-corners or half-pixel.
    case fractionalUpsample(FractionalUpsampleSpec)
    /// ResizeBilinearLayerParams: bilinear to a target size on a SamplingMode grid.
    case resizeBilinear(ResizeSpec)

    /// The family name, as `--op` filters and gradcheck rows show it.
    public var familyName: String {
        switch self {
        case .upsample, .fractionalUpsample: return "upsample"
        case .resizeBilinear: return "resizeBilinear"
        }
    }

    /// The parameters in a few words, for case names.
    public func summary(_ input: Shape) -> String {
        switch self {
        case let .upsample(u):
            let mode: String
            switch u.mode {
            case .nearest: mode = "nearest"
            case .bilinear(.default): mode = "bilinear"
            case .bilinear(.alignCornersTrue): mode = "bilinear align-corners"
            case .bilinear(.alignCornersFalse): mode = "bilinear half-pixel"
            }
            return "\(mode) \(input) x\(u.scaleH)x\(u.scaleW)"
        case let .fractionalUpsample(u):
            return "bilinear \(u.mode == .alignCornersTrue ? "align-corners" : "half-pixel") \(input) x\(u.scaleH)x\(u.scaleW)"
        case let .resizeBilinear(r): return "\(r.mode.name) \(input) → \(r.height)x\(r.width)"
        }
    }

    /// The grids of the height and width axes.
    public var grids: (height: ResampleGrid, width: ResampleGrid) {
        switch self {
        case let .upsample(u):
            switch u.mode {
            case .nearest: return (.nearest, .nearest)
            case let .bilinear(m): return (m.grid, m.grid)
            }
        case let .fractionalUpsample(u): return (u.mode.grid, u.mode.grid)
        case let .resizeBilinear(r): return (r.mode.grid, r.mode.grid)
        }
    }

    /// Output height and width for an input [N, C, H, W] (already checked to be rank 4, non-negative).
    func outputSize(_ input: Shape) throws -> (h: Int, w: Int) {
        switch self {
        case let .upsample(u):
            guard u.scaleH >= 1, u.scaleW >= 1, u.scaleH <= Shape.maxDimension, u.scaleW <= Shape.maxDimension else {
                throw UpdraftError(.invalidArgument, "upsample scaling factor [\(u.scaleH), \(u.scaleW)] must be at least 1")
            }
            let (h, o1) = input.h.multipliedReportingOverflow(by: u.scaleH)
            let (w, o2) = input.w.multipliedReportingOverflow(by: u.scaleW)
            guard !o1, !o2 else { throw UpdraftError(.invalidArgument, "upsample output of \(input) is too large") }
            return (h, w)
        case let .fractionalUpsample(u):
            guard u.mode != .default else {
                throw UpdraftError(.invalidArgument, "fractional upsampling runs on the ALIGN_CORNERS_TRUE or ALIGN_CORNERS_FALSE grid, not DEFAULT",
                                   hint: "set linearUpsampleMode to ALIGN_CORNERS_TRUE or ALIGN_CORNERS_FALSE, or use whole scaling factors")
            }
            return (try u.outputSize(input.h, u.scaleH, axis: "height"), try u.outputSize(input.w, u.scaleW, axis: "width"))
        case let .resizeBilinear(r):
            guard r.height >= 1, r.width >= 1, r.height <= Shape.maxDimension, r.width <= Shape.maxDimension else {
                throw UpdraftError(.invalidArgument, "resizeBilinear target size [\(r.height), \(r.width)] must be at least 1 and at most \(Shape.maxDimension)")
            }
            guard input.h > 0, input.w > 0 else {
                throw UpdraftError(.invalidArgument, "resizeBilinear of an empty plane \(input) has nothing to sample")
            }
            return (r.height, r.width)
        }
    }

    /// The taps every example reads, for an input [N, C, H, W] resampled to `output`; throws when the
    /// op cannot give them.
    func table(input: Shape, output: Shape) throws -> ResampleTable {
        let (gh, gw) = grids
        return ResampleTable(rows: [ResampleAxis(inSize: input.h, outSize: output.h, grid: gh).taps()],
                             columns: [ResampleAxis(inSize: input.w, outSize: output.w, grid: gw).taps()])
    }
}

extension LinearUpsampleMode {
    /// The grid of this mode.
    public var grid: ResampleGrid {
        switch self {
        case .default: return .upsample
        case .alignCornersTrue: return .alignCorners
        case .alignCornersFalse: return .halfPixel
        }
    }
}

extension SpatialGeometry {
    /// The taps of a resampling (what the reference, the CPU and OpenCL read); throws for another
    /// spatial op, or when the op cannot give them.
    public func resampleTable() throws -> ResampleTable {
        guard case let .resampling(r) = op else {
            throw UpdraftError(.invalidArgument, "\(op.familyName) is not a resampling: it has no taps")
        }
        return try r.table(input: inputShape, output: outputShape)
    }
}
