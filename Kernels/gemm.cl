// Row-major SGEMM on plain matrices, batched with strides and split along K:
//   C_z = alpha * op(A_b) * op(B_b) + beta * C_z (+ bias, then the fused activation)
// where z = get_group_id(2) = b * splits + s, and slice s sums k in [s * kChunk, min(K, (s+1) * kChunk)).
// With splits > 1 each slice writes its own C_z (strideC apart) and gemm_reduce.cl adds them up.
//
// op(A) is M x K: A[m * lda + k], or A[k * lda + m] with TRANS_A = 1.
// op(B) is K x N: B[k * ldb + n], or B[n * ldb + k] with TRANS_B = 1.
// bias: biasMode 0 none, 1 bias[m] (per row), 2 bias[n] (per column). The fused activation
// (ACT_PARAMS) takes per-channel constants by row m when actRows, else by column n.
// Tiles and work per item come from gemm_params.h defines (chosen by OpenCLTuning).
#include "gemm_params.h"
#include "activation.h"

#ifndef TRANS_A
#define TRANS_A 0
#endif
#ifndef TRANS_B
#define TRANS_B 0
#endif

typedef struct { int lda, ldb; } GemmParams;

#if TRANS_A
#define GEMM_A_KFAST 0
typedef int GemmAState;                                    // m
GEMM_INLINE GemmAState gemm_a_state(const GemmParams* p, int m) { return m; }
GEMM_INLINE float gemm_a_load(const GemmParams* p, __global const float* A, GemmAState s, int k) { return A[k * p->lda + s]; }
#else
#define GEMM_A_KFAST 1
typedef int GemmAState;                                    // m * lda
GEMM_INLINE GemmAState gemm_a_state(const GemmParams* p, int m) { return m * p->lda; }
GEMM_INLINE float gemm_a_load(const GemmParams* p, __global const float* A, GemmAState s, int k) { return A[s + k]; }
#endif

#if TRANS_B
#define GEMM_B_KFAST 1
typedef int GemmBState;                                    // n * ldb
GEMM_INLINE GemmBState gemm_b_state(const GemmParams* p, int n) { return n * p->ldb; }
GEMM_INLINE float gemm_b_load(const GemmParams* p, __global const float* B, GemmBState s, int k) { return B[s + k]; }
#else
#define GEMM_B_KFAST 0
typedef int GemmBState;                                    // n
GEMM_INLINE GemmBState gemm_b_state(const GemmParams* p, int n) { return n; }
GEMM_INLINE float gemm_b_load(const GemmParams* p, __global const float* B, GemmBState s, int k) { return B[k * p->ldb + s]; }
#endif

#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(RTN, RTM, 1)))
void gemm(const int M, const int N, const int K, const int splits, const int kChunk,
          const float alpha, const float beta,
          __global const float* A, const int offA, const int lda, const int strideA,
          __global const float* B, const int offB, const int ldb, const int strideB,
          __global float* C, const int offC, const int ldc, const int strideC,
          __global const float* bias, const int biasMode, const int actRows, ACT_PARAMS) {
    GEMM_LOCAL_TILES;
    const int z = get_group_id(2), b = z / splits, s = z - b * splits;
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    const int kBegin = s * kChunk, kEnd = min(K, kBegin + kChunk);
    const GemmParams p = { lda, ldb };
    float acc[WPTM * WPTN];
    gemm_accumulate(&p, A + offA + b * strideA, B + offB + b * strideB, M, N, m0, n0, kBegin, kEnd, Alv, Blv, acc GEMM_KTAB_ARG);

    __global float* Cz = C + offC + z * strideC;
    #pragma unroll
    for (int i = 0; i < WPTM; i++) {
        const int m = m0 + GEMM_ROW(i);
        #pragma unroll
        for (int j = 0; j < WPTN; j++) {
            const int n = n0 + GEMM_COL(j);
#if !GEMM_EXACT
            if (m >= M || n >= N) continue;
#endif
            float v = alpha * acc[i * WPTN + j];
            if (beta != 0.0f) v += beta * Cz[m * ldc + n];      // beta == 0 never reads C (it may hold NaN)
            if (biasMode == 1) v += bias[m];
            else if (biasMode == 2) v += bias[n];
            if (actKind != ACT_NONE) v = ACT_APPLY(v, actRows ? m : n);
            Cz[m * ldc + n] = v;
        }
    }
}
