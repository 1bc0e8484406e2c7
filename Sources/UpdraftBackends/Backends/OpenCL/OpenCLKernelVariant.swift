import UpdraftCore

/// What runs one GEMM-shaped op: the in-house tiled kernel with a tiling (and optionally a fixed
/// split-K), or CLBlast. `updraft tune` measures the candidates per shape class and stores the
/// winners; `OpenCLTuning.tuned` maps shape classes to them.
public struct KernelVariant: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The GEMM implementation: Updraft's own tiled kernel (`inHouse`, stored as "in-house") or CLBlast ("CLBlast").
    public enum Engine: String, Hashable, Sendable, Codable { case inHouse = "in-house", clblast = "CLBlast" }

    /// Which implementation runs the op.
    public var engine: Engine
    /// The in-house kernel's tiling (nil for CLBlast).
    public var tiling: GemmTiling?
    /// Slices of a split reduction (weight gradients, plain GEMMs); nil: the wave model decides.
    /// CLBlast on a convolution weight gradient: 1 runs one GEMM per image adding into dw (no split),
    /// nil a batched GEMM per run of images whose per-image slabs are then added (the reduction split by image).
    public var splits: Int?

    /// A variant from its parts; an in-house variant with neither tiling nor splits is ignored by `OpenCLTuning.variant(for:)`.
    public init(engine: Engine, tiling: GemmTiling? = nil, splits: Int? = nil) {
        self.engine = engine; self.tiling = tiling; self.splits = splits
    }

    /// The in-house kernel with `tiling`, and a fixed split-K when `splits` is given.
    public static func inHouse(_ tiling: GemmTiling, splits: Int? = nil) -> KernelVariant {
        KernelVariant(engine: .inHouse, tiling: tiling, splits: splits)
    }
    /// CLBlast's GEMM (for the ops it can run: `KernelShape.clblastCan`).
    public static let clblast = KernelVariant(engine: .clblast)
    /// CLBlast with a convolution weight gradient as one GEMM per image adding into dw (elsewhere the same as `clblast`).
    public static let clblastPerImage = KernelVariant(engine: .clblast, splits: 1)

    /// "CLBlast" (", one GEMM per image"), or "in-house" with the tiling (or "table tiling") and any split-K, as `updraft tune` prints it.
    public var description: String {
        switch engine {
        case .clblast: return splits == 1 ? "CLBlast, one GEMM per image" : "CLBlast"
        case .inHouse:
            return "in-house " + (tiling.map { "\($0)" } ?? "table tiling") + (splits.map { ", split-K \($0)" } ?? "")
        }
    }
}

/// The shape of one GEMM-shaped op as the engines see it: which op (and transposes, epilogue), and
/// the GEMM's rows x columns x depth over `slabs` (batch of matrices, or convolution groups).
public struct KernelShape: Hashable, Sendable, CustomStringConvertible {
    /// The op: a plain GEMM, or a convolution forward, backward data or backward weights (raw values as in class keys, e.g. "conv-forward").
    public enum Kind: String, Hashable, Sendable, CaseIterable {
        /// A plain GEMM ("gemm"), or a convolution forward, backward data or backward weights pass.
        case gemm, convForward = "conv-forward", convBackwardData = "conv-backward-data",
             convBackwardWeights = "conv-backward-weights"
    }

    /// Which op the shape belongs to.
    public var kind: Kind
    /// Plain GEMMs: the operands' transposes. Convolutions: false.
    public var transA = false, transB = false
    /// Convolutions: 1x1, stride 1, no padding (a plain GEMM per image, CLBlast can run it).
    public var pointwise = false
    /// A bias or activation applied after the product (CLBlast needs a separate pass for it).
    public var epilogue = false
    /// The GEMM's output rows and columns, reduction depth, and the number of independent matrices (batch of matrices, or convolution groups; default 1).
    public var rows: Int, columns: Int, depth: Int, slabs: Int

    /// A shape from its parts; for convolutions prefer `init(_:_:fusedReLU:)`, which derives them from the geometry.
    public init(kind: Kind, rows: Int, columns: Int, depth: Int, slabs: Int = 1, transA: Bool = false, transB: Bool = false,
                pointwise: Bool = false, epilogue: Bool = false) {
        self.kind = kind; self.rows = rows; self.columns = columns; self.depth = depth; self.slabs = slabs
        self.transA = transA; self.transB = transB; self.pointwise = pointwise; self.epilogue = epilogue
    }

    /// The shape of a plain GEMM.
    public init(_ op: GemmOperation) {
        self.init(kind: .gemm, rows: op.m, columns: op.n, depth: op.k, slabs: op.batch, transA: op.transA, transB: op.transB,
                  epilogue: op.bias != .none || op.activation != nil)
    }

    /// The shape of a convolution in one direction (forward's epilogue: bias and/or ReLU).
    public init(_ g: ConvGeometry, _ kind: Kind, fusedReLU: Bool = false) {
        let pointwise = g.kernelH == 1 && g.kernelW == 1 && g.strideH == 1 && g.strideW == 1
            && g.padTop == 0 && g.padLeft == 0 && g.padBottom == 0 && g.padRight == 0
        switch kind {
        case .convForward, .gemm:
            self.init(kind: .convForward, rows: g.gemmM, columns: g.batch * g.gemmN, depth: g.gemmK, slabs: g.groups,
                      pointwise: pointwise, epilogue: g.hasBias || fusedReLU)
        case .convBackwardData:
            self.init(kind: kind, rows: g.inChannels / g.groups, columns: g.batch * g.inHeight * g.inWidth,
                      depth: g.gemmM * g.kernelH * g.kernelW, slabs: g.groups, pointwise: pointwise)
        case .convBackwardWeights:
            self.init(kind: kind, rows: g.gemmM, columns: g.gemmK, depth: g.batch * g.gemmN, slabs: g.groups,
                      pointwise: pointwise)
        }
    }

    /// Whether CLBlast can run this op: plain GEMMs, pointwise ungrouped convolutions forward and
    /// backward data, and every ungrouped convolution's weight gradient (one GEMM per image adding
    /// into dw, behind an im2col unless pointwise). Grouped convolutions stay in-house.
    public var clblastCan: Bool {
        switch kind {
        case .gemm: return true
        case .convForward, .convBackwardData: return pointwise && slabs == 1
        case .convBackwardWeights: return slabs == 1
        }
    }

    /// Whether the op may split its reduction (a fixed split-K is then a tuning candidate).
    public var splittable: Bool {
        switch kind {
        case .gemm: return !epilogue
        case .convBackwardWeights: return true
        case .convForward, .convBackwardData: return false
        }
    }

    /// The key of the shape's class: the op and its flags, and each size rounded to the nearest
    /// power of two (in log scale), so that a tuned choice serves batch sizes near the tuned one.
    public var classKey: String {
        var flags = ""
        if kind == .gemm { flags += (transA ? "T" : "N") + (transB ? "T" : "N") }
        if pointwise { flags += "1x1" }
        if epilogue { flags += "+e" }
        return "\(kind.rawValue)\(flags.isEmpty ? "" : " " + flags) \(Self.bucket(rows))x\(Self.bucket(columns))x\(Self.bucket(depth))"
            + (slabs > 1 ? " /\(Self.bucket(slabs))" : "")
    }

    /// The power of two nearest to `x` in log scale (0 for 0).
    static func bucket(_ x: Int) -> Int {
        guard x > 1 else { return max(0, x) }
        var p = 1
        while p * 2 <= x { p *= 2 }
        // between p and 2p: the geometric midpoint is p * sqrt(2)
        return Double(x) >= Double(p) * 2.0.squareRoot() ? 2 * p : p
    }

    /// "kind RxCxD", then " xSLABS", the transposes of a GEMM, " 1x1" and " +epilogue" where they apply.
    public var description: String {
        "\(kind.rawValue) \(rows)x\(columns)x\(depth)" + (slabs > 1 ? " x\(slabs)" : "")
            + (kind == .gemm ? " \(transA ? "T" : "N")\(transB ? "T" : "N")" : "") + (pointwise ? " 1x1" : "") + (epilogue ? " +epilogue" : "")
    }
}

extension OpenCLTuning {
    /// The variant to run `shape` with: the forced one, else the tuned one for its class, else nil
    /// (the table's wave model picks a tiling). Variants the op cannot run are skipped.
    public func variant(for shape: KernelShape) -> KernelVariant? {
        for v in [forced, tuned[shape.classKey]].compactMap({ $0 }) {
            if v.engine == .clblast && !shape.clblastCan { continue }
            if v.engine == .inHouse, v.tiling == nil, v.splits == nil { continue }
            return v
        }
        return nil
    }
}
