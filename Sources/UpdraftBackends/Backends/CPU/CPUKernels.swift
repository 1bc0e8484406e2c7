import COpenBLAS
import CUpdraftKernels
import Foundation

/// The small building blocks the CPU backend's ops share: a row-major SGEMM wrapper, OpenBLAS thread
/// control and SIMD reductions. Free functions over raw pointers, so the op files read as loop nests.
enum CPUKernels {
    /// C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C, row-major, op = transpose when asked.
    /// `lda`, `ldb`, `ldc` are the row lengths as stored. Empty products are handled here (OpenBLAS
    /// rejects zero leading dimensions): k == 0 leaves beta * C.
    static func sgemm(transA: Bool = false, transB: Bool = false, m: Int, n: Int, k: Int, alpha: Float = 1,
                      a: UnsafePointer<Float>, lda: Int, b: UnsafePointer<Float>, ldb: Int,
                      beta: Float = 0, c: UnsafeMutablePointer<Float>, ldc: Int) {
        guard m > 0, n > 0 else { return }
        guard k > 0 else {
            for i in 0..<m {
                let row = c + i * ldc
                if beta == 0 { row.update(repeating: 0, count: n) } else { for j in 0..<n { row[j] *= beta } }
            }
            return
        }
        cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
                    blasint(m), blasint(n), blasint(k), alpha, a, blasint(max(1, lda)), b, blasint(max(1, ldb)),
                    beta, c, blasint(max(1, ldc)))
    }

    /// Runs `body` with OpenBLAS limited to one thread, then restores the previous count. The backend
    /// runs every GEMM this way and splits the work over its own threads (by image, or by blocks of
    /// the output), so OpenBLAS's workers never add threads beside ours. The count is process-wide:
    /// calls that overlap (several backends, data-parallel replicas) share one reference-counted
    /// setting, restored when the last of them ends.
    static func withSingleThreadedBLAS<R>(_ body: () throws -> R) rethrows -> R {
        blasLock.lock()
        if blasHolders == 0 {
            blasSavedThreads = openblas_get_num_threads()
            if blasSavedThreads != 1 { openblas_set_num_threads(1) }
        }
        blasHolders += 1
        blasLock.unlock()
        defer {
            blasLock.lock()
            blasHolders -= 1
            if blasHolders == 0, blasSavedThreads != 1 { openblas_set_num_threads(blasSavedThreads) }
            blasLock.unlock()
        }
        return try body()
    }

    /// OpenBLAS's current thread count (for tests).
    static var blasThreadCount: Int { Int(openblas_get_num_threads()) }

    private static let blasLock = NSLock()
    nonisolated(unsafe) private static var blasHolders = 0
    nonisolated(unsafe) private static var blasSavedThreads: Int32 = 1

    // MARK: Vector loads and stores (any alignment)
    //
    // Four lanes: the Swift code builds for baseline x86-64 (SSE2), where SIMD4<Float> is one register
    // and a compare-and-replace compiles to one maxps / cmpps+andps; wider Swift vectors are split
    // and their masks widened lane by lane. Loops that gain from wider registers move to the C target
    // CUpdraftKernels, built per vector level and chosen at start-up (CPUVectorLevel).

    @inline(__always) static func load4(_ p: UnsafePointer<Float>) -> SIMD4<Float> {
        UnsafeRawPointer(p).loadUnaligned(as: SIMD4<Float>.self)
    }

    @inline(__always) static func load4(_ p: UnsafeMutablePointer<Float>) -> SIMD4<Float> {
        UnsafeRawPointer(p).loadUnaligned(as: SIMD4<Float>.self)
    }

    /// p[0], p[2], p[4], p[6] (reads p[0...7]).
    @inline(__always) static func loadEven4(_ p: UnsafePointer<Float>) -> SIMD4<Float> {
        UnsafeRawPointer(p).loadUnaligned(as: SIMD8<Float>.self).evenHalf
    }

    @inline(__always) static func store4(_ v: SIMD4<Float>, _ p: UnsafeMutablePointer<Float>) {
        UnsafeMutableRawPointer(p).storeBytes(of: v, as: SIMD4<Float>.self)
    }

    /// One padded, strided row of a convolution input: row[v] = src[v * stride] for v in lo..<hi and
    /// zero for the rest of row[0..<width] (im2col rows and the grouped path's phase planes). Reads
    /// only src[v * stride] for v in lo..<hi (the strided loop is CUpdraftKernels').
    @inline(__always) static func gatherStridedRow(_ src: UnsafePointer<Float>, stride: Int,
                                                   into row: UnsafeMutablePointer<Float>, lo: Int, hi: Int, width: Int) {
        row.update(repeating: 0, count: lo)
        if stride == 1 {
            (row + lo).update(from: src + lo, count: hi - lo)
        } else if lo < hi {
            upd_gather_strided(src + lo * stride, row + lo, hi - lo, stride)
        }
        (row + hi).update(repeating: 0, count: width - hi)
    }

    // MARK: Streaming maps

    /// y[i] = f(x[i]) for i in `r`, four lanes at a time; the tail runs the same vector function on
    /// one lane, so every element gets exactly the same arithmetic. y may be x (each block is read
    /// before it is written).
    @inline(__always)
    static func map(_ r: Range<Int>, _ x: UnsafeMutablePointer<Float>, into y: UnsafeMutablePointer<Float>,
                    _ f: (SIMD4<Float>) -> SIMD4<Float>) {
        var i = r.lowerBound
        while i + 8 <= r.upperBound {
            let (u, v) = (load4(x + i), load4(x + i + 4))
            store4(f(u), y + i); store4(f(v), y + i + 4)
            i += 8
        }
        while i < r.upperBound { y[i] = f(SIMD4(repeating: x[i]))[0]; i += 1 }
    }

    /// y[i] = f(a[i], b[i]) for i in `r` (see `map`); y may be a or b.
    @inline(__always)
    static func map(_ r: Range<Int>, _ a: UnsafeMutablePointer<Float>, _ b: UnsafeMutablePointer<Float>,
                    into y: UnsafeMutablePointer<Float>, _ f: (SIMD4<Float>, SIMD4<Float>) -> SIMD4<Float>) {
        var i = r.lowerBound
        while i + 8 <= r.upperBound {
            let (a0, a1, b0, b1) = (load4(a + i), load4(a + i + 4), load4(b + i), load4(b + i + 4))
            store4(f(a0, b0), y + i); store4(f(a1, b1), y + i + 4)
            i += 8
        }
        while i < r.upperBound { y[i] = f(SIMD4(repeating: a[i]), SIMD4(repeating: b[i]))[0]; i += 1 }
    }

    /// The sum of `count` floats, with eight independent partial sums (vectorised; more accurate than
    /// one running sum).
    static func sum(_ p: UnsafePointer<Float>, _ count: Int) -> Float {
        var acc = SIMD8<Float>()
        var i = 0
        let raw = UnsafeRawPointer(p)
        while i + 8 <= count {
            acc += raw.loadUnaligned(fromByteOffset: i * 4, as: SIMD8<Float>.self)
            i += 8
        }
        var total = acc.sum()
        while i < count { total += p[i]; i += 1 }
        return total
    }

    /// A ceiling division that is right for negative numerators (b > 0).
    @inline(__always) static func ceilDiv(_ a: Int, _ b: Int) -> Int {
        a >= 0 ? (a + b - 1) / b : -((-a) / b)
    }
}
