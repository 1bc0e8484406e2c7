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
/// is clamped to [0, X - 1]. cropResize samples a window [start, end] of the axis instead: the same
/// formulas with [0, X - 1] read as [start, end] (X = end - start + 1), clamped into the window, then
/// into the axis.
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

    /// g = a * o + b before clamping (and before adding the window's start), on an interval of
    /// `x` inputs (the axis' size, or a window's end - start + 1) sampled `outSize` times.
    public func line(x xin: Double, outSize: Int) -> (a: Double, b: Double) {
        let xout = Double(outSize)
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
    public var name: String { ["STRICT_ALIGN_ENDPOINTS_MODE", "ALIGN_ENDPOINTS_MODE", "UPSAMPLE_MODE", "ROI_ALIGN_MODE"][rawValue] }
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

    /// The taps of output positions 0 ..< outSize, sampling the window [start, end] of the axis (nil:
    /// all of it, [0, X - 1]).
    public func taps(window: (start: Double, end: Double)? = nil) -> [ResampleTap] {
        (0..<max(outSize, 0)).map { tap($0, window: window) }
    }

    /// The taps of output position `o` (the window as in `taps(window:)`; nearest ignores it).
    public func tap(_ o: Int, window: (start: Double, end: Double)? = nil) -> ResampleTap {
        if grid == .nearest {
            let i = min(o * inSize / max(outSize, 1), max(inSize - 1, 0))
            return ResampleTap(i0: i, i1: i, f: 0)
        }
        let (start, end) = window ?? (0, Double(inSize - 1))
        let (a, b) = grid.line(x: end - start + 1, outSize: outSize)
        let inWindow = min(max(start, end), max(min(start, end), start + (Double(o) * a + b)))
        let g = min(Double(inSize - 1), max(0, inWindow))
        let i0 = Int(g.rounded(.down))
        return ResampleTap(i0: i0, i1: min(i0 + 1, inSize - 1), f: g - Double(i0))
    }
}

/// Every output row's and column's taps: one table shared by every example, or one per example
/// (cropResize, whose boxes differ from example to example).
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

/// BoxCoordinatesMode.Coordinates: how cropResize reads a box's four values.
public enum BoxCoordinates: Int, Hashable, Sendable, CaseIterable {
    /// [h_start, w_start, h_end, w_end]
    case cornersHeightFirst = 0
    /// [w_start, h_start, w_end, h_end]
    case cornersWidthFirst = 1
    /// [h_center, w_center, box_height, box_width]
    case centerSizeHeightFirst = 2
    /// [w_center, h_center, box_width, box_height]
    case centerSizeWidthFirst = 3

    /// NeuralNetwork.proto's name.
    public var name: String {
        ["CORNERS_HEIGHT_FIRST", "CORNERS_WIDTH_FIRST", "CENTER_SIZE_HEIGHT_FIRST", "CENTER_SIZE_WIDTH_FIRST"][rawValue]
    }

    /// The box's (start, end) along the height and the width, from its four values.
    public func window(_ v: [Double]) -> (height: (start: Double, end: Double), width: (start: Double, end: Double)) {
        switch self {
        case .cornersHeightFirst: return ((v[0], v[2]), (v[1], v[3]))
        case .cornersWidthFirst: return ((v[1], v[3]), (v[0], v[2]))
        case .centerSizeHeightFirst: return ((v[0] - v[2] / 2, v[0] + v[2] / 2), (v[1] - v[3] / 2, v[1] + v[3] / 2))
        case .centerSizeWidthFirst: return ((v[1] - v[3] / 2, v[1] + v[3] / 2), (v[0] - v[2] / 2, v[0] + v[2] / 2))
        }
    }
}

/// A cropResize layer (CropResizeLayerParams) with one box per example: the box of example n, read
/// from the layer's second input, is cut out of its planes and resampled to `height` x `width` on
/// the grid of `mode` (the window's formulas of `ResampleGrid`). Boxes get no gradient.
///
/// Core ML's boxes are [N, 1, 4 or 5, 1, 1]: N boxes, all taken from every image of the batch (4
/// values), or each from the image its first value names (5). Updraft runs each example as Core ML
/// predicts it, a batch of one, so it takes N = 1 (several boxes would make a batch of crops inside
/// one example) and a batch index of 0.
public struct CropResizeSpec: Hashable, Sendable {
    /// targetSize: the output's height and width, at least 1.
    public var height: Int, width: Int
    /// The sampling mode of both axes.
    public var mode: SamplingMode
    /// How the four coordinates read.
    public var coordinates: BoxCoordinates
    /// Coordinates in [0, 1], scaled by (H - 1) and (W - 1) (normalizedCoordinates).
    public var normalized: Bool
    /// Multiplies every coordinate (spatialScale), positive.
    public var spatialScale: Float
    /// Values per box: 4, or 5 with the batch index first.
    public var boxLength: Int
    /// Each example's box (`boxLength` values) once the layer has read its second input; nil in the
    /// graph, where only the shapes are known.
    public var boxes: [[Float]]?

    public init(height: Int, width: Int, mode: SamplingMode, coordinates: BoxCoordinates, normalized: Bool = false,
                spatialScale: Float = 1, boxLength: Int = 4, boxes: [[Float]]? = nil) {
        self.height = height; self.width = width; self.mode = mode; self.coordinates = coordinates
        self.normalized = normalized; self.spatialScale = spatialScale; self.boxLength = boxLength; self.boxes = boxes
    }

    /// The same spec with the boxes of `batch` examples, read from the second input's values
    /// (`batch` x `boxLength`, row-major).
    public func reading(boxes values: [Float], batch: Int) -> CropResizeSpec {
        var s = self
        s.boxes = (0..<batch).map { n in Array(values[(n * boxLength)..<min(values.count, (n + 1) * boxLength)]) }
        return s
    }

    /// Checks the parameters and, when read, the boxes for a batch of `batch` examples.
    func check(batch: Int) throws {
        guard boxLength == 4 || boxLength == 5 else {
            throw UpdraftError(.invalidArgument, "cropResize boxes have \(boxLength) values; Core ML's have 4, or 5 with the batch index first")
        }
        guard spatialScale.isFinite, spatialScale > 0 else {
            throw UpdraftError(.invalidArgument, "cropResize spatialScale \(spatialScale) must be positive",
                               hint: "1 keeps the coordinates as they are (coremltools' add_crop_resize writes 1 by default)")
        }
        guard let boxes else { return }
        guard boxes.count == batch else {
            throw UpdraftError(.invalidArgument, "cropResize has \(boxes.count) boxes for \(batch) examples; it takes one per example")
        }
        for (n, box) in boxes.enumerated() {
            guard box.count == boxLength, box.allSatisfy(\.isFinite) else {
                throw UpdraftError(.invalidArgument, "cropResize box of example \(n) is \(box); it needs \(boxLength) finite values")
            }
            if boxLength == 5, box[0] != 0 {
                throw UpdraftError(.invalidArgument,
                    "cropResize box of example \(n) takes batch index \(box[0]); each example is a batch of one, so the index must be 0",
                    hint: "give boxes of 4 values, or a batch index of 0")
            }
        }
    }

    /// Example n's window along the height and the width, in input pixels.
    func window(_ n: Int, input: Shape) -> (height: (start: Double, end: Double), width: (start: Double, end: Double)) {
        let box = boxes![n].suffix(4).map(Double.init)
        let (h, w) = coordinates.window(Array(box))
        let kh = (normalized ? Double(input.h - 1) : 1) * Double(spatialScale)
        let kw = (normalized ? Double(input.w - 1) : 1) * Double(spatialScale)
        return ((h.start * kh, h.end * kh), (w.start * kw, w.end * kw))
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
    /// CropResizeLayerParams: each example's box resampled to a target size on a SamplingMode grid.
    case cropResize(CropResizeSpec)

    /// The family name, as `--op` filters and gradcheck rows show it.
    public var familyName: String {
        switch self {
        case .upsample, .fractionalUpsample: return "upsample"
        case .resizeBilinear: return "resizeBilinear"
        case .cropResize: return "cropResize"
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
        case let .cropResize(c):
            let options = (c.normalized ? " normalized" : "") + (c.spatialScale != 1 ? " scale \(c.spatialScale)" : "")
                + (c.boxLength == 5 ? " indexed" : "")
            let boxes = c.boxes.map { " box " + ($0.first ?? []).map { "\($0)" }.joined(separator: ",") + ($0.count > 1 ? "…" : "") } ?? ""
            return "\(c.mode.name) \(c.coordinates.name)\(options) \(input) → \(c.height)x\(c.width)\(boxes)"
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
        case let .cropResize(c): return (c.mode.grid, c.mode.grid)
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
        case let .cropResize(c):
            guard c.height >= 1, c.width >= 1, c.height <= Shape.maxDimension, c.width <= Shape.maxDimension else {
                throw UpdraftError(.invalidArgument, "cropResize target size [\(c.height), \(c.width)] must be at least 1 and at most \(Shape.maxDimension)")
            }
            guard input.h > 0, input.w > 0 else {
                throw UpdraftError(.invalidArgument, "cropResize of an empty plane \(input) has nothing to sample")
            }
            try c.check(batch: input.n)
            return (c.height, c.width)
        }
    }

    /// The taps every example reads, for an input [N, C, H, W] resampled to `output`; throws when the
    /// op cannot give them.
    func table(input: Shape, output: Shape) throws -> ResampleTable {
        let (gh, gw) = grids
        if case let .cropResize(c) = self {
            guard c.boxes != nil else {
                throw UpdraftError(.invalidArgument, "cropResize has not read its boxes: the layer reads them from its second input before it runs")
            }
            try c.check(batch: input.n)
            let rows = ResampleAxis(inSize: input.h, outSize: output.h, grid: gh)
            let columns = ResampleAxis(inSize: input.w, outSize: output.w, grid: gw)
            let windows = (0..<input.n).map { c.window($0, input: input) }
            return ResampleTable(rows: windows.map { rows.taps(window: $0.height) }, columns: windows.map { columns.taps(window: $0.width) })
        }
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
