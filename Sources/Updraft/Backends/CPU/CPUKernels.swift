import COpenBLAS
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
