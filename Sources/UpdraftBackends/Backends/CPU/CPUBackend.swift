import CUpdraftKernels
import Foundation
import Synchronization
import UpdraftCore

/// The fast CPU path (`cpuOnly`): float32 throughout, convolutions and inner products as OpenBLAS
/// SGEMMs (im2col for general convolutions, none for pointwise ones), every other op a tight loop over
/// raw pointers, spread over the cores with `DispatchQueue.concurrentPerform` when the tensor is big
/// enough to pay for the threads. The ops live in extensions, one file per family (CPUBackend+*.swift).
///
/// Buffers are `CPUBuffer`s made by this class; a buffer of another backend throws. A buffer must hold
/// at least the elements an op reads or writes (a larger one is fine: elements past those are neither
/// read nor changed); a smaller one throws. Work runs immediately, so `synchronize` has nothing to wait for.
///
/// Threads: everything runs on Dispatch's pool, `threadCount` ways at most. OpenBLAS is held to one
/// thread while the backend calls it, and the backend splits GEMMs itself: in a convolution each
/// thread takes the batch's images one at a time (`CPUConvolutionSchedule`), an inner product or a
/// single-image convolution splits the output matrix into row or column blocks (`parallelSGEMM`).
/// Loops and image lists are handed out in turn (`dynamicForEach`), so that on a shared machine a
/// core slowed by other processes does less of the work instead of holding the others up; every
/// result is the same whichever thread computed it. Measured on 2 cores this beats OpenBLAS's own
/// threads (whose workers spin after each call and then compete with the element-wise loops that
/// follow), and it never runs more threads than cores.
///
/// Calls from several threads are safe: ops that use the scratch workspaces take a lock (and so run
/// one at a time); the others touch only the buffers they are given.
public final class CPUBackend: Backend {
    /// Always "cpu" (one CPU backend per process; `threadCount` is not part of the name).
    public let name = "cpu"
    /// Always true: buffers are host memory, so readers may use them without a download.
    public var runsOnHostCPU: Bool { true }

    /// Threads used by the element-wise loops and by batch-parallel convolutions.
    public let threadCount: Int
    /// One scratch workspace per worker thread, reused across calls.
    let workspaces: [CPUWorkspace]
    let workspaceLock = NSLock()
    /// Partial weight-gradient sums of a batch-parallel convolution (held with the workspaces).
    let partialSums = CPUWorkspace()
    /// A backward-data Winograd pass's filters, turned and transposed (held with the workspaces).
    let turnedFilters = CPUWorkspace()
    /// Forces a convolution schedule (tests and measurements); nil chooses per geometry.
    var convolutionScheduleOverride: CPUConvolutionSchedule?
    /// Forces the forward and backward-data algorithm of the 3x3 stride-1 convolutions Winograd can
    /// compute: `.im2col` reproduces earlier versions' results bit for bit, `.winograd` (F(2x2, 3x3)) and
    /// `.winograd4x4` take it even for thin layers. nil (the default) chooses by channel counts and output
    /// size; `UPDRAFT_WINOGRAD=off` in the environment sets `.im2col`, `=2x2` F(2x2, 3x3), `=4x4` F(4x4, 3x3).
    public var convolutionAlgorithmOverride: CPUConvolutionAlgorithm?
    /// The per-shape choices `updraft tune --cpu` stored for this CPU model, oneDNN version and thread
    /// count (loaded at init unless `UPDRAFT_ONEDNN=off`); nil uses the built-in rule.
    public var convolutionTuning: CPUConvolutionTuning?
    /// oneDNN in its own blocked layouts, with reorders from and to NCHW around each call (true), or
    /// on NCHW directly (false, `UPDRAFT_ONEDNN_LAYOUT=plain`).
    public var oneDNNBlockedLayouts = true
    /// oneDNN's primitives per geometry and pass (CPUBackend+OneDNN.swift).
    let oneDNNPrimitives: OneDNNCache<OneDNNConvolutionKey, OneDNNConvolution>
    /// Forces the engine of every pooling and inner-product pass (tests, gradcheck, UPDRAFT_ONEDNN=on);
    /// nil uses the stored tuning, else Updraft's own (CPUBackend+OneDNNOps.swift).
    public var opEngineOverride: CPUOpEngine?
    /// oneDNN's pooling and inner-product primitives per shape and pass.
    let oneDNNOpPrimitives: OneDNNCache<OneDNNOpKey, OneDNNOp>

    /// - Parameters:
    ///   - threads: worker threads (default: the environment's `cpuThreads`: `UPDRAFT_CPU_THREADS`, else
    ///     the cores the process may use).
    ///   - environment: the run's `UPDRAFT_*` settings (threads, `winograd`, `oneDNN`, layouts); the process's by default.
    public init(threads: Int? = nil, environment: UpdraftEnvironment = .process) {
        threadCount = max(1, threads ?? environment.cpuThreads)
        workspaces = (0..<threadCount).map { _ in CPUWorkspace() }
        oneDNNPrimitives = OneDNNCache(threads: threadCount) { key in
            var why = ""
            return OneDNNConvolution(key.geometry, pass: key.pass, relu: key.relu, outputImageStride: key.outputImageStride,
                                     blocked: key.blocked, why: &why)
        }
        oneDNNOpPrimitives = OneDNNCache(threads: threadCount) { key in
            var why = ""
            return OneDNNOp(key.shape, key.pass, why: &why)
        }
        // UPDRAFT_WINOGRAD=off keeps every 3x3 convolution on im2col (to compare, or to reproduce older runs bit for bit).
        switch environment.winograd {
        case .off?: convolutionAlgorithmOverride = .im2col
        case .f2x2?: convolutionAlgorithmOverride = .winograd
        case .f4x4?: convolutionAlgorithmOverride = .winograd4x4
        case nil: break
        }
        switch environment.oneDNN {
        case .on?: convolutionAlgorithmOverride = .onednn; opEngineOverride = .onednn
        case .off?: break
        case nil: convolutionTuning = CPUConvolutionTuning.stored(threads: threadCount, environment: environment.variables)
        }
        oneDNNBlockedLayouts = environment.oneDNNBlockedLayouts
    }

    // MARK: Buffer access

    /// The storage behind `buffer`, checked to hold at least `count` values.
    func pointer(_ buffer: DeviceBuffer, _ count: Int, _ what: @autoclosure () -> String) throws -> UnsafeMutablePointer<Float> {
        guard let b = buffer as? CPUBuffer else {
            throw UpdraftError(.invalidArgument, "\(name): \(what()) is a \(type(of: buffer)), not a CPU buffer",
                               hint: "create buffers with the backend that runs the op (backend.makeBuffer)")
        }
        guard count >= 0, b.count >= count else {
            throw UpdraftError(.invalidArgument, "\(name): \(what()) holds \(b.count) values, the op needs \(count)",
                               hint: "allocate buffers from the op's geometry (e.g. outputShape.count)")
        }
        return b.pointer
    }

    func cpuBuffer(_ buffer: DeviceBuffer, _ what: String) throws -> CPUBuffer {
        guard let b = buffer as? CPUBuffer else {
            throw UpdraftError(.invalidArgument, "\(name): \(what) is a \(type(of: buffer)), not a CPU buffer",
                               hint: "create buffers with the backend that runs the op (backend.makeBuffer)")
        }
        return b
    }

    /// Throws unless every size is at least 0 (or 1 where `positive`).
    func requireSizes(_ sizes: KeyValuePairs<String, Int>, positive: Bool = false, op: String) throws {
        for (label, value) in sizes where value < (positive ? 1 : 0) {
            throw UpdraftError(.invalidArgument, "\(name) \(op): \(label) is \(value), must be at least \(positive ? 1 : 0)")
        }
    }

    /// A bias buffer must be passed exactly when the geometry says the layer has one.
    func requireBias(_ hasBias: Bool, _ bias: DeviceBuffer?, _ op: String) throws {
        if hasBias != (bias != nil) {
            throw UpdraftError(.invalidArgument,
                hasBias ? "\(name): \(op) geometry has a bias but no bias buffer was passed"
                        : "\(name): \(op) geometry has no bias but a bias buffer was passed")
        }
    }

    /// A bias gradient may be skipped, but not asked of a layer without a bias.
    func requireBiasGradient(_ hasBias: Bool, _ biasGradient: DeviceBuffer?, _ op: String) throws {
        if !hasBias, biasGradient != nil {
            throw UpdraftError(.invalidArgument, "\(name): \(op) geometry has no bias but a bias gradient buffer was passed")
        }
    }

    /// Runs `body` with the worker workspaces held.
    func withWorkspaces<R>(_ body: ([CPUWorkspace]) throws -> R) rethrows -> R {
        workspaceLock.lock()
        defer { workspaceLock.unlock() }
        return try body(workspaces)
    }

    // MARK: Memory

    /// A zero-filled `CPUBuffer` of `count` floats; throws `.invalidArgument` for a negative count.
    public func makeBuffer(count: Int) throws -> DeviceBuffer {
        guard count >= 0 else { throw UpdraftError(.invalidArgument, "\(name): cannot make a buffer of \(count) values") }
        return CPUBuffer(count: count)
    }

    /// Copies into the buffer at once, on the worker threads when large (a mini-batch of images:
    /// tens of MB); `values.count` must equal the buffer's count.
    public func upload(_ values: [Float], to buffer: DeviceBuffer) throws {
        let b = try cpuBuffer(buffer, "upload destination")
        guard values.count == b.count else {
            throw UpdraftError(.invalidArgument, "\(name): uploading \(values.count) values into a buffer of \(b.count)")
        }
        let d = b.pointer
        values.withUnsafeBufferPointer { src in
            guard let base = src.baseAddress else { return }
            parallelChunks(src.count, grain: CPUParallel.copyGrain) { r in
                (d + r.lowerBound).update(from: base + r.lowerBound, count: r.count)
            }
        }
    }

    /// Copies the whole buffer into a new array (no waiting: work has already run).
    public func download(_ buffer: DeviceBuffer) throws -> [Float] {
        let b = try cpuBuffer(buffer, "download source")
        return Array(UnsafeBufferPointer(start: b.pointer, count: b.count))
    }

    /// Fills on the worker threads when the buffer is large.
    public func fill(_ buffer: DeviceBuffer, with value: Float) throws {
        let b = try cpuBuffer(buffer, "fill destination")
        let p = b.pointer
        parallelChunks(b.count, grain: CPUParallel.copyGrain) { r in
            (p + r.lowerBound).update(repeating: value, count: r.count)
        }
    }

    /// Copies `source.count` values (the destination may be larger; the rest is untouched); a no-op when both are the same buffer.
    public func copy(_ source: DeviceBuffer, to destination: DeviceBuffer) throws {
        let s = try cpuBuffer(source, "copy source")
        let d = try pointer(destination, s.count, "copy destination")
        if d == s.pointer { return }
        let sp = s.pointer
        parallelChunks(s.count, grain: CPUParallel.copyGrain) { r in
            (d + r.lowerBound).update(from: sp + r.lowerBound, count: r.count)
        }
    }

    /// Adds `source` into the first `source.count` values of `destination`, on the worker threads when large.
    public func accumulate(_ source: DeviceBuffer, into destination: DeviceBuffer) throws {
        let s = try cpuBuffer(source, "accumulate source")
        let d = try pointer(destination, s.count, "accumulate destination")
        let sp = s.pointer
        parallelChunks(s.count, grain: CPUParallel.elementGrain) { r in
            upd_add(d + r.lowerBound, sp + r.lowerBound, r.count)
        }
    }

    /// Does nothing: every op has finished when it returns.
    public func synchronize() throws {}

    // MARK: Threads

    /// `parallelChunks` when `parallel`, else one call over the whole range (for loops that already
    /// run inside a worker thread).
    func chunks(_ count: Int, grain: Int, parallel: Bool, _ body: (Range<Int>) -> Void) {
        if parallel { parallelChunks(count, grain: grain, body) } else if count > 0 { body(0..<count) }
    }

    /// C = op(A) op(B) (see `CPUKernels.sgemm`) split over the worker threads by blocks of C's rows or
    /// columns, whichever dimension is larger, each block one single-threaded SGEMM. Call inside
    /// `CPUKernels.withSingleThreadedBLAS`. Small products run in one call.
    func parallelSGEMM(transA: Bool = false, transB: Bool = false, m: Int, n: Int, k: Int,
                       a: UnsafePointer<Float>, lda: Int, b: UnsafePointer<Float>, ldb: Int,
                       beta: Float = 0, c: UnsafeMutablePointer<Float>, ldc: Int, parallel: Bool = true) {
        let macs = m * n * k
        let byRows = m >= n
        let extent = byRows ? m : n
        // A fork/join costs about as much as 2^20 multiply-adds; blocks stay multiples of 16 (vector friendly).
        let pieces = parallel ? min(threadCount, macs >> 21, extent / 16) : 1
        guard pieces > 1 else {
            CPUKernels.sgemm(transA: transA, transB: transB, m: m, n: n, k: k, a: a, lda: lda, b: b, ldb: ldb,
                             beta: beta, c: c, ldc: ldc)
            return
        }
        let blocks = (extent + 15) / 16
        forkJoin(iterations: pieces) { i in
            let lo = min(extent, blocks * i / pieces * 16), hi = min(extent, blocks * (i + 1) / pieces * 16)
            guard lo < hi else { return }
            if byRows {
                CPUKernels.sgemm(transA: transA, transB: transB, m: hi - lo, n: n, k: k,
                                 a: a + (transA ? lo : lo * lda), lda: lda, b: b, ldb: ldb,
                                 beta: beta, c: c + lo * ldc, ldc: ldc)
            } else {
                CPUKernels.sgemm(transA: transA, transB: transB, m: m, n: hi - lo, k: k, a: a, lda: lda,
                                 b: b + (transB ? lo * ldb : lo), ldb: ldb, beta: beta, c: c + lo, ldc: ldc)
            }
        }
    }

    /// Runs `body(worker, item)` for every item in `0..<count` on `workers` threads (at most
    /// `threadCount`, the calling thread among them), each taking the next item nobody has taken yet:
    /// a thread slowed by other work on the machine takes fewer items. `worker` is in 0..<workers and
    /// is the same for every item one thread runs (per-worker scratch).
    func dynamicForEach(_ count: Int, workers: Int, _ body: (_ worker: Int, _ item: Int) -> Void) {
        let workers = max(1, min(workers, threadCount, count))
        guard workers > 1 else { for i in 0..<count { body(0, i) }; return }
        let next = Atomic<Int>(0)
        forkJoin(iterations: workers) { t in
            while true {
                let i = next.wrappingAdd(1, ordering: .relaxed).oldValue
                guard i < count else { return }
                body(t, i)
            }
        }
    }

    /// Splits `0..<count` into contiguous chunks of at least `grain` items and runs `body` on each, on
    /// at most `threadCount` threads. With more than one thread there are a few chunks per thread,
    /// taken in turn (`dynamicForEach`), so a core slowed by other work does less of the loop.
    /// `body` must only depend on its range (chunk boundaries vary with the thread count).
    func parallelChunks(_ count: Int, grain: Int, _ body: (Range<Int>) -> Void) {
        guard count > 0 else { return }
        let most = count / max(1, grain)
        let workers = min(threadCount, most)
        if workers <= 1 { body(0..<count); return }
        let pieces = min(most, 4 * workers)
        dynamicForEach(pieces, workers: workers) { _, i in
            body((count * i / pieces)..<(count * (i + 1) / pieces))
        }
    }
}

/// Thread granularity: how many items of each kind of loop one thread must get before splitting pays
/// (a Dispatch fan-out costs a few microseconds; a core streams ~1-4 floats per nanosecond).
enum CPUParallel {
    /// Element-wise loops with a few flops per element.
    static let elementGrain = 1 << 15
    /// Plain copies and fills.
    static let copyGrain = 1 << 17
    /// Loops that call exp / tanh per element.
    static let transcendentalGrain = 1 << 12
}
