import UpdraftCore

/// A row-major single-precision GEMM on device buffers (Kernels/gemm.cl), optionally batched:
/// `C_b = alpha * op(A_b) * op(B_b) + beta * C_b (+ bias) (then the activation)` for b < `batch`, where
/// op(A) is `m` x `k` (`A[i * lda + p]`, or `A[p * lda + i]` when `transA`), op(B) is `k` x `n`
/// (`B[p * ldb + j]`, or `B[j * ldb + p]` when `transB`) and C is `m` x `n` (`C[i * ldc + j]`).
/// Matrix b starts `b * strideX` floats after `offsetX`. Leading dimensions and strides default to
/// packed matrices.
public struct GemmOperation: Hashable, Sendable {
    /// Where the bias is added: `none`, `perRow` (bias[i], `m` values) or `perColumn` (bias[j], `n` values).
    public enum Bias: Hashable, Sendable { case none, perRow, perColumn }

    /// Sizes of the product: op(A) is `m` x `k`, op(B) is `k` x `n`, C is `m` x `n` (each at least 0).
    public var m: Int, n: Int, k: Int
    /// Whether A (respectively B) is stored transposed: op(A) = A^T reads `A[p * lda + i]`.
    public var transA: Bool, transB: Bool
    /// Scales of the product and of C's old contents (defaults 1 and 0: C is overwritten).
    public var alpha: Float = 1, beta: Float = 0
    /// Leading dimensions in floats (row strides of A, B and C as stored); `init` sets the packed values.
    public var lda: Int, ldb: Int, ldc: Int
    /// Float offsets of the first matrix in each buffer (default 0).
    public var offsetA = 0, offsetB = 0, offsetC = 0
    /// Number of matrices multiplied (default 1); matrix b starts `b * strideX` floats after `offsetX`.
    public var batch = 1
    /// Float distances between consecutive matrices of a batch; `init` sets the packed sizes (m*k, k*n, m*n).
    public var strideA: Int, strideB: Int, strideC: Int
    /// The bias added to C before the activation (default none); `bias:` of the launch supplies the values.
    public var bias: Bias = .none
    /// The activation applied after the bias in the same pass (per-channel constants by row i when
    /// `activationPerRow`, else by column j).
    public var activation: Activation? = nil
    /// Whether the activation's per-channel constants are indexed by row i (true) or column j (false, the default).
    public var activationPerRow = false
    /// Whether the epilogue is a ReLU (setting true makes it one, false removes it).
    public var relu: Bool {
        get { activation == .relu }
        set { activation = newValue ? .relu : nil }
    }

    /// A packed GEMM: leading dimensions and batch strides of tightly packed row-major matrices, alpha 1, beta 0, no bias or activation.
    public init(m: Int, n: Int, k: Int, transA: Bool = false, transB: Bool = false, batch: Int = 1) {
        self.m = m; self.n = n; self.k = k; self.transA = transA; self.transB = transB; self.batch = batch
        lda = transA ? m : k
        ldb = transB ? k : n
        ldc = n
        strideA = m * k; strideB = k * n; strideC = m * n
    }

    /// 2mnk per matrix; bytes of A, B and C once each (C twice when beta is not zero).
    public var cost: OpCost {
        let b = Double(batch)
        return OpCost(flops: 2 * Double(m) * Double(n) * Double(k) * b,
                      bytes: 4 * b * Double(m * k + k * n + m * n * (beta == 0 ? 1 : 2)))
    }

    /// One past the largest index read in A, B and C (0 when the matrix is empty).
    package var extents: (a: Int, b: Int, c: Int) {
        func extent(_ rows: Int, _ cols: Int, _ ld: Int, _ offset: Int, _ stride: Int) -> Int {
            rows == 0 || cols == 0 || batch == 0 ? 0 : offset + (batch - 1) * stride + (rows - 1) * ld + cols
        }
        return (extent(transA ? k : m, transA ? m : k, lda, offsetA, strideA),
                extent(transB ? n : k, transB ? k : n, ldb, offsetB, strideB),
                extent(m, n, ldc, offsetC, strideC))
    }

    func validate(a: Int, b: Int, c: Int, bias biasCount: Int?) throws {
        let sizes = [m, n, k, batch, lda, ldb, ldc, offsetA, offsetB, offsetC, strideA, strideB, strideC]
        guard sizes.allSatisfy({ $0 >= 0 }) else {
            throw UpdraftError(.invalidArgument, "GEMM sizes, offsets and strides must not be negative: \(self)")
        }
        guard lda >= (transA ? m : k), ldb >= (transB ? k : n), ldc >= n else {
            throw UpdraftError(.invalidArgument, "GEMM leading dimensions \(lda), \(ldb), \(ldc) are shorter than the rows of \(m)x\(k) * \(k)x\(n)")
        }
        let e = extents
        for (name, need, have) in [("A", e.a, a), ("B", e.b, b), ("C", e.c, c)] where need > have {
            throw UpdraftError(.invalidArgument, "GEMM \(m)x\(n)x\(k) (batch \(batch)) reads \(need) floats of \(name), which holds \(have)")
        }
        let biasNeed = bias == .perRow ? m : bias == .perColumn ? n : 0
        if biasNeed > 0 && (biasCount ?? 0) < biasNeed {
            throw UpdraftError(.invalidArgument, "GEMM bias needs \(biasNeed) values, got \(biasCount ?? 0)")
        }
        guard [e.a, e.b, e.c, m * n * batch].allSatisfy({ $0 < Int(Int32.max) }) else {
            throw UpdraftError(.unsupported, "GEMM \(m)x\(n)x\(k) (batch \(batch)) addresses more than 2^31 floats",
                               hint: "split the work into smaller batches")
        }
    }
}

/// One kernel launch recorded by `OpenCLBackend.recordLaunches`: what ran, with which defines, and
/// its profiling event (device start and end times).
public struct OpenCLLaunchRecord {
    /// Name of the kernel function that ran, e.g. "gemm".
    public let kernel: String
    /// The `-D` defines its program was built with (tile sizes and such).
    public let defines: [String: String]
    /// Global work size per dimension, in work-items.
    public let global: [Int]
    /// Work-group size per dimension, in work-items; empty when the driver chose it.
    public let local: [Int]
    /// The launch's profiling event: device start and end times (`elapsedSeconds()`).
    public let event: OpenCLEvent
}

/// Per-backend state of the GEMM-based ops: one scratch buffer, reused by every op for split-K partial
/// products and partial bias sums (ops run in queue order, so one op's use ends before the next
/// begins), tilings the device turned out unable to run, and the launch recorder.
public final class OpenCLGemmWorkspace {
    private var scratch: OpenCLBuffer?
    package var unusableTilings: Set<GemmTiling> = []
    /// Shape classes CLBlast refused on this backend, with its reason: they run in-house from then on.
    public internal(set) var clblastRefusals: [String: String] = [:]
    var records: [OpenCLLaunchRecord]?
    /// Tests set this to force split-K with this many slices wherever a reduction is long enough.
    var forcedSplits: Int?
    /// Largest scratch buffer the split-K heuristic may ask for, in floats.
    var scratchLimit = 1 << 25

    /// An empty workspace: the scratch buffer is made on first use and grows to the largest request.
    public init() {}

    func scratch(count: Int, context: OpenCLContext) throws -> OpenCLBuffer {
        if let s = scratch, s.count >= count { return s }
        scratch = nil
        let b = try context.makeBuffer(count: max(count, 1 << 16))
        scratch = b
        return b
    }
}

extension OpenCLBackend {
    /// Runs `body` and returns every kernel launch the GEMM-based ops made meanwhile, each with a
    /// profiling event (for benchmarks: sum `event.elapsedSeconds()`).
    public func recordLaunches(_ body: () throws -> Void) throws -> [OpenCLLaunchRecord] {
        let saved = gemmWorkspace.records
        gemmWorkspace.records = []
        defer { gemmWorkspace.records = saved }
        try body()
        return gemmWorkspace.records ?? []
    }

    /// Sets the arguments and enqueues, recording the launch when `recordLaunches` is active.
    /// `holding`: a buffer made for this launch (an epilogue's per-channel constants), kept until it ran.
    func enqueue(_ kernel: OpenCLKernel, _ arguments: [KernelArgument], global: [Int], local: [Int]?,
                 defines: [String: String], holding: OpenCLBuffer? = nil) throws {
        try kernel.setArguments(arguments)
        let recording = gemmWorkspace.records != nil
        let event = try kernel.launch(global: global, local: local, profile: recording || holding != nil)
        if let holding { try inFlight.hold(holding, until: event, context: context) }
        if recording, let event {
            gemmWorkspace.records?.append(OpenCLLaunchRecord(kernel: kernel.name, defines: defines, global: global,
                                                             local: local ?? [], event: event))
        }
    }

    /// The tiling for an output of `rows` x `columns` over `slabs`, among those this device can launch
    /// (`splittable`: the reduction may be split along K to fill the device).
    func gemmTiling(rows: Int, columns: Int, slabs: Int, splittable: Bool = false) throws -> GemmTiling {
        try gemmTiling(rows: rows, columns: columns, slabs: slabs, splittable: splittable, variant: nil)
    }

    /// The variant's tiling when it names one this device can launch, else the table's choice.
    func gemmTiling(rows: Int, columns: Int, slabs: Int, splittable: Bool, variant: KernelVariant?) throws -> GemmTiling {
        if let t = variant?.tiling, t.fits(device), !gemmWorkspace.unusableTilings.contains(t) { return t }
        var tuning = self.tuning
        tuning.gemmTilings.removeAll { gemmWorkspace.unusableTilings.contains($0) }
        guard !tuning.gemmTilings.isEmpty else {
            throw UpdraftError(.device, "no GEMM tiling can be launched on \(device.name)",
                               hint: "use --compute-units cpuOnly")
        }
        return tuning.gemmTiling(rows: rows, columns: columns, slabs: slabs, splittable: splittable)
    }

    /// The tiled-GEMM kernel `name` of `file` built with `tiling` and `defines`, or nil (after noting
    /// it) when the device cannot launch work-groups that large for it: the caller picks another tiling.
    func gemmKernel(_ file: String, _ name: String, tiling: GemmTiling, defines: [String: String]) throws -> OpenCLKernel? {
        let k = try kernel(file, name, defines: defines)
        if k.maxWorkGroupSize >= tiling.threads { return k }
        gemmWorkspace.unusableTilings.insert(tiling)
        return nil
    }

    /// Work-groups that keep the device busy (compute units times groups resident on each).
    var busySlots: Int { max(1, tuning.computeUnits * tuning.groupsPerComputeUnit) }

    /// How to split a reduction of length `k` when only `tiles` work-groups would run otherwise:
    /// (slices, chunk), chunk a multiple of `tileK`, slices * `slabFloats` within the scratch limit.
    func splitK(tiles: Int, k: Int, tileK: Int, slabFloats: Int, fixed: Int? = nil) -> (splits: Int, chunk: Int) {
        guard k > tileK else { return (1, max(k, 1)) }
        var wanted: Int
        if let fixed {
            wanted = min(max(1, fixed), ceilDiv(k, tileK))
        } else if let forced = gemmWorkspace.forcedSplits {
            wanted = min(forced, ceilDiv(k, tileK))
        } else {
            wanted = tiles < busySlots ? ceilDiv(busySlots, tiles) : 1
            wanted = min(wanted, max(1, k / max(8 * tileK, 128)), 256)
        }
        wanted = max(1, min(wanted, gemmWorkspace.scratchLimit / max(1, slabFloats)))
        if wanted == 1 { return (1, k) }
        let chunk = ceilDiv(ceilDiv(k, wanted), tileK) * tileK
        return (ceilDiv(k, chunk), chunk)
    }

    /// C = alpha op(A) op(B) + beta C (+ bias) (then the activation), as `GemmOperation` describes. Long
    /// reductions with few output tiles are split along K (when beta is 0 and there is no epilogue)
    /// and the slices added up in a fixed order.
    public func sgemm(_ op: GemmOperation, a: DeviceBuffer, b: DeviceBuffer, c: DeviceBuffer,
                      bias: DeviceBuffer? = nil) throws {
        let (A, B, C) = (try cl(a), try cl(b), try cl(c))
        let biasBuffer = try bias.map { try cl($0) }
        try op.validate(a: A.count, b: B.count, c: C.count, bias: biasBuffer?.count)
        if op.m == 0 || op.n == 0 || op.batch == 0 { return }
        let shape = KernelShape(op)
        let variant = tuning.variant(for: shape)
        if variant?.engine == .clblast, try clblastGemm(op, a: A, b: B, c: C, bias: biasBuffer, shape: shape) { return }
        let channels = op.activationPerRow ? op.m : op.n
        let (activationArguments, table) = try activationArguments(op.activation, channels: channels, placeholder: A)
        while true {
            let (tiling, split, defines) = try gemmLaunch(op, variant: variant)
            guard let kernel = try gemmKernel("gemm.cl", "gemm", tiling: tiling, defines: defines) else { continue }

            // With slices, matrix b's slice s writes the packed m x n slab b * splits + s of scratch.
            let slabs = op.batch * split.splits
            let target = split.splits > 1 ? try gemmWorkspace.scratch(count: slabs * op.m * op.n, context: context) : C
            let biasMode = op.bias == .perRow ? 1 : op.bias == .perColumn ? 2 : 0
            let global = [ceilDiv(op.n, tiling.tileN) * tiling.workGroup[0],
                          ceilDiv(op.m, tiling.tileM) * tiling.workGroup[1], slabs]
            try enqueue(kernel, [
                .int(op.m), .int(op.n), .int(op.k), .int(split.splits), .int(split.chunk),
                .float(op.alpha), .float(op.beta),
                .buffer(A), .int(op.offsetA), .int(op.lda), .int(op.strideA),
                .buffer(B), .int(op.offsetB), .int(op.ldb), .int(op.strideB),
                .buffer(target), .int(split.splits > 1 ? 0 : op.offsetC),
                .int(split.splits > 1 ? op.n : op.ldc), .int(split.splits > 1 ? op.m * op.n : op.strideC),
                .buffer(biasBuffer ?? A), .int(biasMode), .int(op.activationPerRow ? 1 : 0),
            ] + activationArguments, global: global, local: tiling.workGroup + [1], defines: defines, holding: table)
            guard split.splits > 1 else { return }
            for i in 0..<op.batch {
                try sumSlabs(target, offset: i * split.splits * op.m * op.n, rows: op.m, columns: op.n,
                             slabs: split.splits, into: C, offset: op.offsetC + i * op.strideC, ld: op.ldc)
            }
            return
        }
    }

    /// The tiling, split of the reduction and gemm.cl defines `op` launches with: what `sgemm` builds
    /// and what preparation builds ahead (`OpenCLBackend+Preparation.swift`). Long reductions with few
    /// output tiles are split along K when beta is 0 and there is no epilogue.
    func gemmLaunch(_ op: GemmOperation, variant: KernelVariant?) throws
        -> (tiling: GemmTiling, split: (splits: Int, chunk: Int), defines: [String: String]) {
        let canSplit = op.beta == 0 && op.bias == .none && op.activation == nil
        let tiling = try gemmTiling(rows: op.m, columns: op.n, slabs: op.batch, splittable: canSplit && op.k > 1024,
                                    variant: variant)
        var split = (splits: 1, chunk: max(op.k, 1))
        if canSplit {
            let tiles = ceilDiv(op.m, tiling.tileM) * ceilDiv(op.n, tiling.tileN) * op.batch
            split = splitK(tiles: tiles, k: op.k, tileK: tiling.tileK, slabFloats: op.m * op.n * op.batch,
                           fixed: variant?.splits)
        }
        var defines = tiling.defines
        defines["TRANS_A"] = op.transA ? "1" : "0"
        defines["TRANS_B"] = op.transB ? "1" : "0"
        let exact = op.m % tiling.tileM == 0 && op.n % tiling.tileN == 0 && op.k % tiling.tileK == 0
            && (split.splits == 1 || split.chunk % tiling.tileK == 0)
        defines["GEMM_EXACT"] = exact ? "1" : "0"
        return (tiling, split, defines)
    }

    /// out[outOffset + r * ld + c] = sum over s < slabs of parts[offset + (s * rows + r) * columns + c],
    /// s ascending: adds up split-K slices.
    func sumSlabs(_ parts: OpenCLBuffer, offset: Int, rows: Int, columns: Int, slabs: Int,
                  into out: OpenCLBuffer, offset outOffset: Int, ld: Int) throws {
        let wg = reductionGroupSize, count = rows * columns
        try enqueue(try opsKernel("gemm_reduce.cl", "sum_slabs"),
                    [.buffer(parts), .int(offset), .int(columns), .int(count), .int(slabs), .buffer(out), .int(outOffset), .int(ld)],
                    global: [ceilDiv(count, wg) * wg], local: [wg], defines: ["WG_SIZE": "\(wg)"])
    }

    /// db[c] = sum over images n and positions p of dy[n, c, p] for dy [images, channels, spatial]:
    /// work-groups sum chunks of each channel (a tree in local memory), then the chunks are added in order.
    func biasGradient(_ dy: OpenCLBuffer, images: Int, channels: Int, spatial: Int, into db: OpenCLBuffer) throws {
        guard channels > 0 else { return }
        let total = images * spatial
        if total == 0 { try context.fill(db, with: 0, count: channels); return }
        let wg = reductionGroupSize
        let defines = ["WG_SIZE": "\(wg)"]
        // Enough work-groups to fill the device, each summing at least 4 values per work-item.
        let wanted = max(1, min(ceilDiv(2 * busySlots, channels), total / (4 * wg)))
        let chunk = ceilDiv(total, wanted)
        let slices = ceilDiv(total, chunk)
        let partial = slices > 1 ? try gemmWorkspace.scratch(count: slices * channels, context: context) : db
        try enqueue(try opsKernel("gemm_reduce.cl", "bias_grad_partial"),
                    [.buffer(dy), .int(images), .int(channels), .int(spatial), .int(chunk), .buffer(partial), .int(0)],
                    global: [slices * wg, channels], local: [wg, 1], defines: defines)
        guard slices > 1 else { return }
        try enqueue(try opsKernel("gemm_reduce.cl", "bias_grad_final"),
                    [.buffer(partial), .int(channels), .int(slices), .buffer(db)],
                    global: [ceilDiv(channels, wg) * wg], local: [wg], defines: defines)
    }
}

@inline(__always) private func ceilDiv(_ a: Int, _ b: Int) -> Int { (a + b - 1) / b }
