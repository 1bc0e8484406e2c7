import COpenBLAS
import Foundation
import Synchronization
import UpdraftCore

/// One neighbour found by a search: the sample's index and its squared Euclidean distance to the
/// query, as `NeighborSearch.exactDistance` computes it (in Double, in dimension order).
public struct NeighborMatch: Hashable, Sendable {
    public var sample: Int
    public var squaredDistance: Double
    public init(sample: Int, squaredDistance: Double) { self.sample = sample; self.squaredDistance = squaredDistance }

    /// The search's order: nearer first, a tie to the lower sample index.
    @inlinable public func precedes(_ other: NeighborMatch) -> Bool {
        squaredDistance < other.squaredDistance || (squaredDistance == other.squaredDistance && sample < other.sample)
    }
}

/// Exact k-nearest-neighbour search over `count` samples of `dimension` floats (a k-NN's linear
/// index), on the CPU.
///
/// Exact means the answer of the plain loop (`exactDistance` for every sample, the k smallest in
/// `NeighborMatch.precedes` order), found faster: distances are first computed in float (one SGEMM
/// per block of samples for a batch of queries, ‖q‖² + ‖x‖² − 2 q·x with the sample norms kept; a
/// SIMD loop for a few queries, which is bound by memory, not arithmetic) and only a sample whose
/// float distance, less its proven rounding bound, could still enter the k best is measured again
/// exactly, once the scan is over and has ruled most of those out (`PendingMatches`). The bounds:
/// a dot product of D floats is within γ_D·Σ|q_i x_i| ≤ γ_D·(‖q‖²+‖x‖²)/2 of the true value,
/// γ_D = D·u/(1 − D·u), u = 2⁻²⁴; a float sum of D squared differences within γ_{D+2} of it relatively.
public final class NeighborSearch: @unchecked Sendable {
    public let dimension: Int
    public let count: Int
    /// `count` rows of `dimension` values.
    public let samples: [Float]
    /// ‖x‖² of each sample, in Double.
    let norms: [Double]
    let threads: Int

    /// The device the distance products of a batch run on (`attach`), with the samples uploaded in
    /// blocks; nil: OpenBLAS on the host.
    private var device: (backend: Backend, blocks: [DeviceBuffer])?
    /// Why the device was dropped (it failed; the search went on on the host), for a warning; nil while it serves.
    public private(set) var deviceFailure: String?
    /// Blocks whose candidates the device picked (Kernels/neighbors.cl) since the search was made.
    public private(set) var deviceFilteredBlocks = 0
    /// The name of the device batches run on ("cpu" without one).
    public var deviceName: String { device?.backend.name ?? "cpu" }

    /// Queries at least this many go through SGEMM; fewer through the SIMD loop.
    public static let batchThreshold = 8
    /// Samples per SGEMM block: about 2 MB of samples (4096 of 128 floats), 1024 to 8192.
    var block: Int { min(8192, max(1024, 524_288 / dimension)) }

    /// A search over `samples` (`count` × `dimension`, row-major) on `threads` threads (default: every core).
    public init(samples: [Float], dimension: Int, threads: Int? = nil) {
        precondition(dimension > 0 && samples.count % dimension == 0, "samples must be whole rows of \(dimension)")
        self.samples = samples
        self.dimension = dimension
        count = samples.count / dimension
        self.threads = max(1, threads ?? HostInfo.defaultCPUThreads)
        norms = samples.withUnsafeBufferPointer { x in
            (0..<samples.count / dimension).map { s in
                var n = 0.0
                for j in 0..<dimension { let v = Double(x[s * dimension + j]); n += v * v }
                return n
            }
        }
    }

    /// The definition: the squared Euclidean distance of `query` to sample `s`, in Double, summed in dimension order.
    @inlinable public static func exactDistance(_ query: UnsafePointer<Float>, _ sample: UnsafePointer<Float>, dimension: Int) -> Double {
        var d = 0.0
        for j in 0..<dimension {
            let t = Double(query[j]) - Double(sample[j])
            d += t * t
        }
        return d
    }

    /// `exactDistance` of one query to four samples, the same sums (each in dimension order), side
    /// by side: one sum's additions wait on each other; four independent chains hide that latency.
    @inlinable static func exactDistances(_ query: UnsafePointer<Float>, _ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>,
                                          _ c: UnsafePointer<Float>, _ e: UnsafePointer<Float>, dimension: Int) -> (Double, Double, Double, Double) {
        var da = 0.0, db = 0.0, dc = 0.0, de = 0.0
        for j in 0..<dimension {
            let q = Double(query[j])
            let ta = q - Double(a[j]), tb = q - Double(b[j]), tc = q - Double(c[j]), te = q - Double(e[j])
            da += ta * ta
            db += tb * tb
            dc += tc * tc
            de += te * te
        }
        return (da, db, dc, de)
    }

    /// The k nearest samples of each query (`queries`: whole rows of `dimension`), nearest first;
    /// all samples when k ≥ count.
    public func search(_ queries: [Float], k: Int) -> [[NeighborMatch]] {
        precondition(queries.count % dimension == 0, "queries must be whole rows of \(dimension)")
        let q = queries.count / dimension
        guard q > 0 else { return [] }
        let k = min(k, count)
        guard k > 0 else { return Array(repeating: [], count: q) }
        return q >= Self.batchThreshold ? batched(queries, q: q, k: k) : queries.withUnsafeBufferPointer { qs in
            (0..<q).map { single(qs.baseAddress! + $0 * dimension, k: k) }
        }
    }

    // MARK: A few queries: a SIMD loop over the samples, split across threads

    private func single(_ query: UnsafePointer<Float>, k: Int) -> [NeighborMatch] {
        let parts = min(threads, max(1, count / 4096))
        var found = [[NeighborMatch]](repeating: [], count: parts)
        let d = dimension
        // |float − exact| ≤ γ·exact, so exact lies in approx·(1 − γ)...approx / (1 − γ).
        let gamma = Self.gamma(d + 2)
        found.withUnsafeMutableBufferPointer { out in
            samples.withUnsafeBufferPointer { xs in
                forkJoin(iterations: parts) { p in
                    var best = PendingMatches(k: k)
                    let lo = count * p / parts, hi = count * (p + 1) / parts
                    for s in lo..<hi {
                        let approx = Double(Self.floatDistance(query, xs.baseAddress! + s * d, d))
                        let lower = approx * (1 - gamma)
                        if lower > best.limit { continue }
                        if best.offer(s, lower: lower, upper: approx / (1 - gamma)) { best.resolve(query: query, samples: xs.baseAddress!, dimension: d) }
                    }
                    best.resolve(query: query, samples: xs.baseAddress!, dimension: d)
                    out[p] = best.sorted()
                }
            }
        }
        return merge(found, k: k)
    }

    /// Σ (q_j − x_j)² in float, 16 lanes at a time.
    @inline(__always) static func floatDistance(_ q: UnsafePointer<Float>, _ x: UnsafePointer<Float>, _ d: Int) -> Float {
        var acc = SIMD16<Float>(repeating: 0)
        var j = 0
        while j + 16 <= d {
            let t = UnsafeRawPointer(q + j).loadUnaligned(as: SIMD16<Float>.self) - UnsafeRawPointer(x + j).loadUnaligned(as: SIMD16<Float>.self)
            acc += t * t  // not addProduct: without FMA in the baseline target it becomes a libm call per lane
            j += 16
        }
        var sum = acc.sum()
        while j < d { let t = q[j] - x[j]; sum += t * t; j += 1 }
        return sum
    }

    // MARK: A batch of queries: one SGEMM per block of samples, then the bound filter

    /// Runs the distance products of batches on `backend` (an OpenCL device): the samples are
    /// uploaded now, in blocks of `deviceBlock`. A device that fails later is dropped (`deviceFailure`)
    /// and the search goes on on the host.
    public func attach(_ backend: Backend) throws {
        var blocks: [DeviceBuffer] = []
        for start in stride(from: 0, to: count, by: Self.deviceBlock) {
            let n = min(Self.deviceBlock, count - start)
            let buffer = try backend.makeBuffer(count: n * dimension)
            try backend.upload(Array(samples[start * dimension..<(start + n) * dimension]), to: buffer)
            blocks.append(buffer)
        }
        device = (backend, blocks)
        deviceFailure = nil
    }

    /// Samples per block on a device.
    static let deviceBlock = 16384

    private func batched(_ queries: [Float], q: Int, k: Int) -> [[NeighborMatch]] {
        let queryNorms = queries.withUnsafeBufferPointer { qs in
            (0..<q).map { i in (0..<dimension).reduce(0.0) { $0 + Double(qs[i * dimension + $1]) * Double(qs[i * dimension + $1]) } }
        }
        if let device {
            do { return try onDevice(device.backend, blocks: device.blocks, queries, norms: queryNorms, k: k) } catch {
                deviceFailure = "\(device.backend.name) failed (\(firstLine(of: error))); the k-NN search goes on on the CPU"
                self.device = nil
            }
        }
        // Short samples: each thread takes its share of the queries against every block (the filter,
        // not the GEMM, costs most). Long samples: each thread takes every query against its share
        // of the blocks (larger GEMMs, which then cost most), keeping its own k best per query, merged
        // at the end. Measured on 2 cores, 10,000 samples, 256 queries: D 128, 28k against 19k
        // queries/s; D 1000, 3.9k against 5.4k (`updraft-bench knn`).
        return dimension < 512 ? splitQueries(queries, q: q, k: k, norms: queryNorms) : splitSamples(queries, q: q, k: k, norms: queryNorms)
    }

    private func splitQueries(_ queries: [Float], q: Int, k: Int, norms queryNorms: [Double]) -> [[NeighborMatch]] {
        let parts = min(threads, q), blocks = (count + block - 1) / block
        var results = [[NeighborMatch]](repeating: [], count: q)
        CPUKernels.withSingleThreadedBLAS {
            results.withUnsafeMutableBufferPointer { out in
                queries.withUnsafeBufferPointer { qs in
                    forkJoin(iterations: parts) { p in
                        let rows = q * p / parts..<q * (p + 1) / parts
                        var next = 0
                        let nextBlock = { () -> Int? in next += 1; return next <= blocks ? next - 1 : nil }
                        for (r, var best) in zip(rows, scan(qs.baseAddress!, rows: rows, blocks: nextBlock, k: k, norms: queryNorms)) {
                            resolve(&best, qs.baseAddress!, row: r)
                            out[r] = best.sorted()
                        }
                    }
                }
            }
        }
        return results
    }

    private func splitSamples(_ queries: [Float], q: Int, k: Int, norms queryNorms: [Double]) -> [[NeighborMatch]] {
        let blocks = (count + block - 1) / block
        let parts = max(1, min(threads, blocks))
        var found = [[PendingMatches]](repeating: [], count: parts)
        var results = [[NeighborMatch]](repeating: [], count: q)
        // Each thread claims the next block when it is done with one: a thread the machine holds
        // back (other processes on the cores) leaves its blocks to the others instead of stalling the batch.
        let claimed = Atomic<Int>(0)
        CPUKernels.withSingleThreadedBLAS {
            queries.withUnsafeBufferPointer { qs in
                found.withUnsafeMutableBufferPointer { out in
                    forkJoin(iterations: parts) { p in
                        let nextBlock = { () -> Int? in
                            let b = claimed.wrappingAdd(1, ordering: .relaxed).oldValue
                            return b < blocks ? b : nil
                        }
                        out[p] = scan(qs.baseAddress!, rows: 0..<q, blocks: nextBlock, k: k, norms: queryNorms)
                    }
                }
                // The parts' states merged before measuring: about k exact distances per query, not k per part.
                results.withUnsafeMutableBufferPointer { out in
                    let workers = min(threads, q)
                    forkJoin(iterations: workers) { w in
                        for r in q * w / workers..<q * (w + 1) / workers {
                            var merged = found[0][r]
                            for part in found.dropFirst() { merged.absorb(part[r]) }
                            resolve(&merged, qs.baseAddress!, row: r)
                            out[r] = merged.sorted()
                        }
                    }
                }
            }
        }
        return results
    }

    /// Measures the pending samples of query `row`.
    private func resolve(_ best: inout PendingMatches, _ queries: UnsafePointer<Float>, row: Int) {
        samples.withUnsafeBufferPointer { best.resolve(query: queries + row * dimension, samples: $0.baseAddress!, dimension: dimension) }
    }

    /// The candidates of the sample blocks `nextBlock` gives (until nil) for each query of `rows`
    /// (still to `resolve`): one SGEMM per block (OpenBLAS held to this thread by the caller), then the bound filter.
    private func scan(_ queries: UnsafePointer<Float>, rows: Range<Int>, blocks nextBlock: () -> Int?, k: Int, norms queryNorms: [Double]) -> [PendingMatches] {
        let d = dimension
        var best = rows.map { _ in PendingMatches(k: k) }
        var dots = [Float](repeating: 0, count: rows.count * block)
        samples.withUnsafeBufferPointer { xs in
            dots.withUnsafeMutableBufferPointer { c in
                while let b = nextBlock() {
                    let start = b * block, n = min(block, count - start)
                    CPUKernels.sgemm(transB: true, m: rows.count, n: n, k: d, a: queries + rows.lowerBound * d, lda: d,
                                     b: xs.baseAddress! + start * d, ldb: d, c: c.baseAddress!, ldc: block)
                    filter(c.baseAddress!, ld: block, samples: start..<start + n, queries: queries, rows: rows, norms: queryNorms, margin: 1, best: &best)
                }
            }
        }
        return best
    }

    /// The products on the device, one inner product per block of samples, filtered on the host.
    /// The device's GEMM may sum in any order and contract to FMA; the bound allows 4 times γ_D.
    private func onDevice(_ backend: Backend, blocks: [DeviceBuffer], _ queries: [Float], norms: [Double], k: Int) throws -> [[NeighborMatch]] {
        let q = queries.count / dimension
        var best = (0..<q).map { _ in PendingMatches(k: k) }
        let input = try backend.makeBuffer(count: queries.count)
        try backend.upload(queries, to: input)
        let output = try backend.makeBuffer(count: q * Self.deviceBlock)
        // On OpenCL the device also picks each query's candidates (Kernels/neighbors.cl), once the
        // query has k neighbours to beat; other rows (and other backends) come back whole.
        let candidates = try (backend as? OpenCLBackend).map { try DeviceCandidates(backend: $0, rows: q) }
        let keep = 1 - 4 * Self.gamma(dimension)
        for (b, block) in blocks.enumerated() {
            let start = b * Self.deviceBlock, n = min(Self.deviceBlock, count - start)
            let g = InnerProductGeometry(batch: q, inputChannels: dimension, outputChannels: n, hasBias: false)
            try backend.innerProductForward(g, input: input, weights: block, bias: nil, output: output, epilogue: nil)
            var whole = Array(0..<q)
            if let candidates, best.contains(where: { $0.limit.isFinite }) {
                let limits = (0..<q).map { r in best[r].limit.isFinite ? Self.roundedUp(best[r].limit - keep * norms[r]) : .infinity }
                let scaled = (start..<start + n).map { Self.roundedDown(keep * self.norms[$0]) }
                let found = try candidates.run(dots: output, scaledNorms: scaled, limits: limits, n: n)
                deviceFilteredBlocks += 1
                whole = []
                queries.withUnsafeBufferPointer { qs in
                    samples.withUnsafeBufferPointer { xs in
                        for r in 0..<q {
                            guard let list = found[r] else { whole.append(r); continue }
                            for j in list {
                                let s = start + j
                                best[r].offer(NeighborMatch(sample: s, squaredDistance: Self.exactDistance(qs.baseAddress! + r * dimension,
                                                                                                            xs.baseAddress! + s * dimension, dimension: dimension)))
                            }
                        }
                    }
                }
            }
            guard !whole.isEmpty else { continue }
            let dots = whole.count == q ? try backend.download(output, offset: 0, count: q * n) : []
            for r in whole {
                let row = whole.count == q ? Array(dots[r * n..<(r + 1) * n]) : try backend.download(output, offset: r * n, count: n)
                var one = [best[r]]
                row.withUnsafeBufferPointer { c in
                    queries.withUnsafeBufferPointer { qs in
                        filter(c.baseAddress!, ld: n, samples: start..<start + n, queries: qs.baseAddress!, rows: r..<r + 1, norms: norms, margin: 4, best: &one)
                    }
                }
                best[r] = one[0]
            }
        }
        return queries.withUnsafeBufferPointer { qs in
            (0..<q).map { r in
                resolve(&best[r], qs.baseAddress!, row: r)
                return best[r].sorted()
            }
        }
    }

    /// The nearest float at or below `x`, and at or above it.
    static func roundedDown(_ x: Double) -> Float { let f = Float(x); return Double(f) > x ? f.nextDown : f }
    static func roundedUp(_ x: Double) -> Float { let f = Float(x); return Double(f) < x ? f.nextUp : f }

    /// The device buffers of the candidate filter, made once per batch search.
    private struct DeviceCandidates {
        let backend: OpenCLBackend
        let rows: Int
        /// Candidates kept per query and block; a query with more comes back whole.
        static let capacity = 256
        let counts: DeviceBuffer, indices: DeviceBuffer, limits: DeviceBuffer, scaled: DeviceBuffer

        init(backend: OpenCLBackend, rows: Int) throws {
            self.backend = backend
            self.rows = rows
            counts = try backend.makeBuffer(count: rows)
            indices = try backend.makeBuffer(count: rows * Self.capacity)
            limits = try backend.makeBuffer(count: rows)
            scaled = try backend.makeBuffer(count: NeighborSearch.deviceBlock)
        }

        /// Each row's candidate columns, or nil for a row whose list overflowed.
        func run(dots: DeviceBuffer, scaledNorms: [Float], limits values: [Float], n: Int) throws -> [[Int]?] {
            try backend.upload([Float](repeating: 0, count: rows), to: counts)  // zero bits: Int32 0
            try backend.upload(values, to: limits)
            try backend.upload(scaledNorms, to: scaled, offset: 0)
            try backend.neighborCandidates(dots: dots, scaledNorms: scaled, limits: limits, rows: rows, n: n,
                                           capacity: Self.capacity, counts: counts, indices: indices)
            let found = try backend.download(counts).prefix(rows).map { Int(Int32(bitPattern: $0.bitPattern)) }
            guard found.contains(where: { $0 > 0 && $0 <= Self.capacity }) else { return found.map { $0 <= Self.capacity ? [] : nil } }
            let lists = try backend.download(indices, offset: 0, count: rows * Self.capacity)
            return found.enumerated().map { r, c in
                c <= Self.capacity ? (0..<c).map { Int(Int32(bitPattern: lists[r * Self.capacity + $0].bitPattern)) } : nil
            }
        }
    }

    /// Offers each sample of `samples` to each query of `rows` whose float distance (from the dot
    /// products `dots`, row r at `(r - rows.lowerBound) * ld`), less `margin` times its rounding
    /// bound, could still be among the k best; those are measured exactly later (`PendingMatches`).
    private func filter(_ dots: UnsafePointer<Float>, ld: Int, samples range: Range<Int>, queries: UnsafePointer<Float>, rows: Range<Int>,
                        norms queryNorms: [Double], margin: Double, best: inout [PendingMatches]) {
        let slack = margin * Self.gamma(dimension), keep = 1 - slack
        // A sample is skipped when qn + xn − 2·dot − γ·(qn + xn) > limit, i.e. when
        // keep·xn − 2·dot > limit − keep·qn: eight samples at a time, and a closer look only when
        // one of them passes (rare once the k best are known).
        let scaled = norms[range].map { keep * $0 }
        // The eight-at-a-time skip runs in float: keep·xn rounded down, and a limit raised by the
        // float subtraction's rounding, at most u·|keep·xn − 2·dot| ≤ u·2·(qn + max xn) (|dot| ≤
        // (qn + xn)/2), taken twice. What it skips, the Double test would skip; the rest goes through it.
        let scaledDown = scaled.map { Self.roundedDown($0) }
        let largest = norms[range].max() ?? 0
        scaled.withUnsafeBufferPointer { kx in
            scaledDown.withUnsafeBufferPointer { kxDown in
                best.withUnsafeMutableBufferPointer { kept in
                    for r in rows {
                        let i = r - rows.lowerBound
                        let qn = queryNorms[r]
                        let row = dots + i * ld
                        let roundoff = 0x1p-22 * (qn + largest)
                        var limit = kept[i].limit - keep * qn
                        var floatLimit = SIMD8<Float>(repeating: limit.isFinite ? Self.roundedUp(limit + roundoff) : .infinity)
                        var j = 0
                        while j < range.count {
                            // Eight at a time: past them all unless one passes (NaN passes, to the Double test).
                            if j + 8 <= range.count {
                                let products = UnsafeRawPointer(row + j).loadUnaligned(as: SIMD8<Float>.self)
                                let reduced = UnsafeRawPointer(kxDown.baseAddress! + j).loadUnaligned(as: SIMD8<Float>.self) - (products + products)
                                if all(reduced .> floatLimit) { j += 8; continue }
                            }
                            let end = min(j + 8, range.count)
                            while j < end {
                                let reduced = kx[j] - 2 * Double(row[j])
                                if reduced <= limit {
                                    // exact ∈ approx ± slack·(qn + xn), approx = qn + xn − 2·dot.
                                    let s = range.lowerBound + j
                                    let lower = reduced + keep * qn
                                    if kept[i].offer(s, lower: lower, upper: lower + 2 * slack * (qn + norms[s])) { resolve(&kept[i], queries, row: r) }
                                    limit = kept[i].limit - keep * qn
                                    floatLimit = SIMD8(repeating: limit.isFinite ? Self.roundedUp(limit + roundoff) : .infinity)
                                }
                                j += 1
                            }
                        }
                    }
                }
            }
        }
    }

    /// γ_n = n·u / (1 − n·u) for float's unit roundoff, with a margin for the conversions.
    static func gamma(_ n: Int) -> Double {
        let nu = Double(n + 2) * 0x1p-24
        return 1.01 * nu / max(1e-12, 1 - nu)
    }

    private func merge(_ parts: [[NeighborMatch]], k: Int) -> [NeighborMatch] {
        var best = BoundedMatches(k: k)
        for part in parts { for m in part { best.offer(m) } }
        return best.sorted()
    }
}
