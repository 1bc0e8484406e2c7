/// Tile and work-group sizes for one device, passed to the kernels as `-D` defines. Chosen from a small
/// table by device (vendor, type), then clamped to the device's limits; anything unknown gets safe
/// defaults, so the same kernels run on an NVIDIA GPU, on PoCL and elsewhere.
public struct OpenCLTuning: Hashable, Sendable {
    /// Work-group size for 1-D element-wise and reduction kernels.
    public var workGroupSize: Int
    /// Shapes of the tiled GEMM (Kernels/gemm_params.h) this device may use, largest first. Each GEMM
    /// or convolution picks one per problem (`gemmTiling(rows:columns:slabs:)`).
    public var gemmTilings: [GemmTiling]
    /// Work-groups that run at once per compute unit (for the wave model that picks tilings and splits).
    public var groupsPerComputeUnit: Int
    /// Compute units of the device (copied from its info; 1 for hand-made tunings).
    public var computeUnits: Int
    /// Variants `updraft tune` measured fastest, by shape class (`KernelShape.classKey`); shapes
    /// without an entry use the table above. Loaded from the calibration cache (`withStoredTuning`).
    public var tuned: [String: KernelVariant] = [:]
    /// Where `tuned` came from (the cache file and its date), for `devices`, `plan` and the benchmarks.
    public var tunedSource: String?
    /// Every GEMM and convolution runs this variant where it can (the tuner and tests set it).
    public var forced: KernelVariant?

    /// A hand-made tuning (tests, the tuner); `forDevice(_:)` gives a device's table entry. Nothing is clamped here: use `clamped(to:)`.
    public init(workGroupSize: Int, gemmTilings: [GemmTiling] = [.medium, .small, .tiny, .minimal],
                groupsPerComputeUnit: Int = 1, computeUnits: Int = 1) {
        self.workGroupSize = workGroupSize
        self.gemmTilings = gemmTilings
        self.groupsPerComputeUnit = groupsPerComputeUnit
        self.computeUnits = computeUnits
    }

    /// Safe everywhere: small work-groups, little local memory.
    public static let safeDefaults = OpenCLTuning(workGroupSize: 64, gemmTilings: [.medium, .small, .tiny, .minimal])

    /// NVIDIA GPUs, aimed at the H200 (132 SMs, 48 KiB local memory per work-group, 1024 work-items):
    /// 256 work-items of 8x8 outputs for big problems, thinner tiles for layers with few output channels.
    public static let nvidiaGPU = OpenCLTuning(
        workGroupSize: 256,
        gemmTilings: [.large, .wide64, .wide32, .wide16, .thin8, .medium, .small],
        groupsPerComputeUnit: 2)

    /// Other GPUs (AMD, Intel): the medium tiles, 256 work-items.
    public static let otherGPU = OpenCLTuning(workGroupSize: 256, gemmTilings: [.medium, .small, .tiny, .minimal],
                                              groupsPerComputeUnit: 2)

    /// CPU devices (PoCL): one work-group per core, small tiles.
    public static let cpu = OpenCLTuning(workGroupSize: 64, gemmTilings: [.small])

    /// The entry for a device: table lookup, then clamped to its limits.
    public static func forDevice(_ info: OpenCLDeviceInfo) -> OpenCLTuning {
        var t: OpenCLTuning
        switch info.type {
        case .gpu:
            let vendor = (info.vendor + " " + info.platformName).lowercased()
            t = vendor.contains("nvidia") ? .nvidiaGPU : .otherGPU
        case .cpu: t = .cpu
        case .accelerator, .other: t = .safeDefaults
        }
        return t.clamped(to: info)
    }

    /// This tuning with every size the device cannot run removed or reduced.
    public func clamped(to info: OpenCLDeviceInfo) -> OpenCLTuning {
        var t = self
        t.workGroupSize = max(1, min(t.workGroupSize, info.maxWorkGroupSize, info.maxWorkItemSizes.first ?? 1))
        var tilings = gemmTilings.filter { $0.fits(info) }
        if tilings.isEmpty { tilings = [GemmTiling.minimal] }
        t.gemmTilings = tilings
        t.computeUnits = max(1, info.computeUnits)
        return t
    }

    /// The tiling for a GEMM of `rows` x `columns` outputs repeated over `slabs` (batch, groups), by a
    /// wave model: each compute unit runs `groupsPerComputeUnit` work-groups of 256 work-items at once
    /// (proportionally more of smaller ones, but groups under 128 work-items count as 128: they fill the
    /// machine badly); a wave lasts as long as one work-item's share of its tile divided by the tiling's
    /// relative efficiency. Padded tiles cost like full ones. When the reduction will be split to fill
    /// the device (`splittable`), waves are not rounded up: the split spreads the tiles' work evenly.
    public func gemmTiling(rows: Int, columns: Int, slabs: Int = 1, splittable: Bool = false) -> GemmTiling {
        var best = gemmTilings.first ?? .minimal, bestCost = Double.infinity
        for t in gemmTilings {
            let resident = max(1, computeUnits * max(1, groupsPerComputeUnit * 256 / max(t.threads, 128)))
            let tiles = ceilDiv(rows, t.tileM) * ceilDiv(columns, t.tileN) * max(1, slabs)
            let waves = splittable ? Double(tiles) / Double(resident) : Double(ceilDiv(tiles, resident))
            let cost = waves * Double(t.tileM * t.tileN) / Double(t.threads) / t.relativeEfficiency
            if cost < bestCost { best = t; bestCost = cost }
        }
        return best
    }
}

/// One shape of the tiled GEMM engine (Kernels/gemm_params.h): a work-group computes `tileM` x `tileN`
/// outputs, `tileK` deep per local-memory slice, each work-item `workM` x `workN` of them, reading
/// local memory in vectors of `vectorM` / `vectorN`; the inner product unrolled `kUnroll` steps at a
/// time (0: the whole slice), operands staged in local memory unless `stageLocal` is false.
public struct GemmTiling: Hashable, Sendable, Codable, CustomStringConvertible {
    /// Outputs one work-group computes (`tileM` rows x `tileN` columns, gemm_params.h's TM, TN) and the reduction depth of each local-memory slice (TK).
    public var tileM: Int, tileN: Int, tileK: Int
    /// Outputs each work-item computes along M and N (WPTM, WPTN); must divide the tile sizes.
    public var workM: Int, workN: Int
    /// Vector widths (1, 2 or 4) of local-memory reads along M and N (VWM, VWN); must divide `workM` / `workN`.
    public var vectorM: Int, vectorN: Int
    /// Vectors of padding at the end of each local-memory row (0 or 1; gemm_params.h's PAD).
    public var padding: Int
    /// K steps of the inner product unrolled together (KUNROLL): 0 unrolls the whole `tileK` slice
    /// (the default), else 1, 2, 4 or 8, dividing `tileK`.
    public var kUnroll: Int
    /// Whether operands are staged through local-memory tiles (STAGE_LOCAL 1, the default) or each
    /// work-item reads its rows and columns straight from global memory (0: no local memory, no barriers;
    /// `tileK` is then only the unrolled block and `padding` means nothing).
    public var stageLocal: Bool

    /// A tiling from its sizes; check `isWellFormed` (and `fits(_:)` for a device) before using it.
    public init(tileM: Int, tileN: Int, tileK: Int, workM: Int, workN: Int, vectorM: Int, vectorN: Int, padding: Int = 1,
                kUnroll: Int = 0, stageLocal: Bool = true) {
        self.tileM = tileM; self.tileN = tileN; self.tileK = tileK
        self.workM = workM; self.workN = workN; self.vectorM = vectorM; self.vectorN = vectorN
        self.padding = padding; self.kUnroll = kUnroll; self.stageLocal = stageLocal
    }

    /// This tiling with the inner product unrolled `kUnroll` steps at a time and local staging on or off.
    public func with(kUnroll: Int? = nil, stageLocal: Bool? = nil) -> GemmTiling {
        var t = self
        if let kUnroll { t.kUnroll = kUnroll }
        if let stageLocal { t.stageLocal = stageLocal }
        return t
    }

    /// 128x128 tiles, 8x8 outputs per work-item, 256 work-items: big GEMMs on big GPUs.
    public static let large = GemmTiling(tileM: 128, tileN: 128, tileK: 16, workM: 8, workN: 8, vectorM: 4, vectorN: 4)
    /// 64x128, 4x8 per work-item: 64-channel layers.
    public static let wide64 = GemmTiling(tileM: 64, tileN: 128, tileK: 16, workM: 4, workN: 8, vectorM: 4, vectorN: 4)
    /// 32x128, 2x8 per work-item: 32-channel layers.
    public static let wide32 = GemmTiling(tileM: 32, tileN: 128, tileK: 16, workM: 2, workN: 8, vectorM: 2, vectorN: 4)
    /// 16x128, 1x8 per work-item: squeeze layers with 16 output channels.
    public static let wide16 = GemmTiling(tileM: 16, tileN: 128, tileK: 16, workM: 1, workN: 8, vectorM: 1, vectorN: 4)
    /// 8x256, 1x8 per work-item, 32-deep slices: outputs with a handful of rows (conv1's input gradient).
    public static let thin8 = GemmTiling(tileM: 8, tileN: 256, tileK: 32, workM: 1, workN: 8, vectorM: 1, vectorN: 4)
    /// 64x64, 4x4 per work-item, 256 work-items.
    public static let medium = GemmTiling(tileM: 64, tileN: 64, tileK: 16, workM: 4, workN: 4, vectorM: 4, vectorN: 4)
    /// 32x32, 4x4 per work-item, 64 work-items (the kernels' own defaults).
    public static let small = GemmTiling(tileM: 32, tileN: 32, tileK: 16, workM: 4, workN: 4, vectorM: 4, vectorN: 4)
    /// 16x16, 2x2 per work-item, 64 work-items.
    public static let tiny = GemmTiling(tileM: 16, tileN: 16, tileK: 16, workM: 2, workN: 2, vectorM: 2, vectorN: 2)
    /// 8x8, 2x2 per work-item, 16 work-items: runs on anything.
    public static let minimal = GemmTiling(tileM: 8, tileN: 8, tileK: 4, workM: 2, workN: 2, vectorM: 1, vectorN: 1)

    /// Work-group size (dimension 0 along N, 1 along M).
    public var workGroup: [Int] { [tileN / workN, tileM / workM] }
    /// Work-items per work-group: (tileN / workN) x (tileM / workM).
    public var threads: Int { (tileN / workN) * (tileM / workM) }
    /// Local memory of the two staged slices (rows padded by `padding` vectors) and the convolutions' k table.
    /// None without staging.
    public var localMemoryBytes: Int {
        stageLocal ? 4 * tileK * (tileM + tileN + padding * (vectorM + vectorN)) + 16 * tileK : 0
    }
    /// Multiply-adds per value read from local memory, relative to 8x8 outputs per work-item.
    public var relativeEfficiency: Double {
        Double(workM * workN) / Double(workM + workN) / 4
    }

    /// The constraints gemm_params.h checks with #error, so a bad table entry fails here, not in a build.
    public var isWellFormed: Bool {
        let sizes = [tileM, tileN, tileK, workM, workN, vectorM, vectorN]
        guard sizes.allSatisfy({ $0 >= 1 }), [1, 2, 4].contains(vectorM), [1, 2, 4].contains(vectorN),
              [0, 1].contains(padding), [0, 1, 2, 4, 8].contains(kUnroll), kUnroll == 0 || tileK % kUnroll == 0
        else { return false }
        guard tileM % workM == 0, tileN % workN == 0, workM % vectorM == 0, workN % vectorN == 0 else { return false }
        let nt = threads
        return nt % tileM == 0 && nt % tileN == 0 && nt % tileK == 0
            && (tileM * tileK) % nt == 0 && (tileN * tileK) % nt == 0
    }

    /// Whether a device can run this tiling (work-group size and local memory, with 1 KiB to spare).
    public func fits(_ info: OpenCLDeviceInfo) -> Bool {
        let items = info.maxWorkItemSizes
        return isWellFormed && threads <= info.maxWorkGroupSize
            && workGroup[0] <= (items.first ?? 1) && workGroup[1] <= (items.count > 1 ? items[1] : 1)
            && UInt64(localMemoryBytes + 1024) <= info.localMemory
    }

    /// The -D defines of Kernels/gemm_params.h.
    public var defines: [String: String] {
        var d = ["TM": "\(tileM)", "TN": "\(tileN)", "TK": "\(tileK)", "WPTM": "\(workM)", "WPTN": "\(workN)",
                 "VWM": "\(vectorM)", "VWN": "\(vectorN)"]
        if padding != 1 { d["PAD"] = "\(padding)" }
        if kUnroll != 0 { d["KUNROLL"] = "\(kUnroll)" }
        if !stageLocal { d["STAGE_LOCAL"] = "0" }
        return d
    }

    /// "MxNxK tiles, WMxWN per work-item, vectors VM/VN", plus the padding when it is not 1, the
    /// k unroll when set and "global reads" without local staging.
    public var description: String {
        "\(tileM)x\(tileN)x\(tileK) tiles, \(workM)x\(workN) per work-item, vectors \(vectorM)/\(vectorN)"
            + (padding == 1 ? "" : ", padding \(padding)") + (kUnroll == 0 ? "" : ", k-unroll \(kUnroll)")
            + (stageLocal ? "" : ", global reads")
    }

    /// Decodes files written before `padding`, `kUnroll` and `stageLocal` existed (one vector, whole slice, staged).
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(tileM: try c.decode(Int.self, forKey: .tileM), tileN: try c.decode(Int.self, forKey: .tileN),
                  tileK: try c.decode(Int.self, forKey: .tileK), workM: try c.decode(Int.self, forKey: .workM),
                  workN: try c.decode(Int.self, forKey: .workN), vectorM: try c.decode(Int.self, forKey: .vectorM),
                  vectorN: try c.decode(Int.self, forKey: .vectorN),
                  padding: try c.decodeIfPresent(Int.self, forKey: .padding) ?? 1,
                  kUnroll: try c.decodeIfPresent(Int.self, forKey: .kUnroll) ?? 0,
                  stageLocal: try c.decodeIfPresent(Bool.self, forKey: .stageLocal) ?? true)
    }
}

@inline(__always) private func ceilDiv(_ a: Int, _ b: Int) -> Int { (a + b - 1) / b }
