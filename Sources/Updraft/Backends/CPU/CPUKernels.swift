import COpenBLAS

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
    /// the output): OpenBLAS's workers spin for a while after each threaded call, and would compete
    /// with the element-wise loops that follow. The count is process-wide; nothing else here uses BLAS.
    static func withSingleThreadedBLAS<R>(_ body: () throws -> R) rethrows -> R {
        let previous = openblas_get_num_threads()
        if previous == 1 { return try body() }
        openblas_set_num_threads(1)
        defer { openblas_set_num_threads(previous) }
        return try body()
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
