// The tiled SGEMM engine shared by gemm.cl (plain matrices) and convolution.cl (implicit im2col).
//
// One work-group computes a TM x TN tile of C = op(A)[M x K] * op(B)[K x N]: it walks K in slices of
// TK, staging a TM x TK slice of A and a TK x TN slice of B in local memory, and every work-item
// keeps WPTM x WPTN outputs in registers. The work-group is (RTN, RTM) = (TN/WPTN, TM/WPTM)
// work-items, local id 0 running along N.
//
// Work-item (tx, ty) owns rows    (i * RTM + ty) * VWM + u   (i < WPTM/VWM, u < VWM)
//                    and columns (j * RTN + tx) * VWN + v   (j < WPTN/VWN, v < VWN),
// so each k step reads WPTM/VWM + WPTN/VWN vectors from local memory: neighbouring work-items read
// neighbouring vectors (no bank conflicts; same-address reads are broadcasts), and neighbouring
// work-items store neighbouring columns of C (coalesced).
//
// Global loads: the next slice is fetched into registers while the current one is multiplied. Each
// operand is fetched along its contiguous direction so that neighbouring work-items read
// neighbouring addresses: along K when GEMM_A_KFAST / GEMM_B_KFAST is 1, else along M / N. Local
// rows are padded by one vector, which keeps vector alignment and spreads the K-fast stores over banks.
//
// The includer includes gemm_params.h first (tunables and vector types), then defines:
//   GemmParams                      a struct of whatever sizes the loaders need
//   GEMM_A_KFAST, GEMM_B_KFAST      0 or 1 (see above)
//   GemmAState gemm_a_state(const GemmParams* p, int m)          per-row state, computed once
//   float gemm_a_load(const GemmParams* p, __global const float* A, GemmAState s, int k)
//   GemmBState gemm_b_state(const GemmParams* p, int n)          per-column state, computed once
//   float gemm_b_load(const GemmParams* p, __global const float* B, GemmBState s, int k)
// The loaders are called only for 0 <= m < M, 0 <= n < N and kBegin <= k < kEnd (states may be
// computed for rows and columns past the edge; they must not read memory). With GEMM_EXACT = 1 the
// host promises M % TM == 0, N % TN == 0 and (kEnd - kBegin) % TK == 0, and the checks go.
//
// With GEMM_K_TABLE = 1 the loaders receive, instead of k, a GemmKInfo that the includer computes
// with `GemmKInfo gemm_k_info(const GemmParams* p, int k)`: the work-group fills a TK-entry table in
// local memory once per slice, so an implicit-im2col loader reads its (channel, kh, kw) offsets with
// one broadcast load instead of decomposing k with divisions for every element it fetches.
//
// Tuning knobs besides the tile shape (gemm_params.h): KUNROLL unrolls the inner product KUNROLL k
// steps at a time (0: the whole slice), and STAGE_LOCAL 0 skips local memory altogether: each
// work-item reads its WPTM rows of A and WPTN columns of B straight from global memory (caches do the
// sharing), no barriers; the k table is then replaced by gemm_k_info per step.
#ifndef UPDRAFT_GEMM_CORE_H
#define UPDRAFT_GEMM_CORE_H

#ifndef GEMM_K_TABLE
#define GEMM_K_TABLE 0
#endif
#if GEMM_K_TABLE && STAGE_LOCAL
#define GEMM_K(k, kk) kTab[kk]           // what the loaders receive for slice row kk (absolute k)
#define GEMM_KTAB_DECL ; __local GemmKInfo kTab[TK]
#define GEMM_KTAB_PARAM , __local GemmKInfo* kTab
#define GEMM_KTAB_ARG , kTab
#else
#define GEMM_K(k, kk) (k)
#define GEMM_KTAB_DECL
#define GEMM_KTAB_PARAM
#define GEMM_KTAB_ARG
#endif

// acc += a b^T: one k step of the work-item's WPTM x WPTN outputs.
GEMM_INLINE void gemm_outer(const float a[WPTM], const float b[WPTN], float acc[WPTM * WPTN]) {
    #pragma unroll
    for (int i = 0; i < WPTM; i++) {
        #pragma unroll
        for (int j = 0; j < WPTN; j++) acc[i * WPTN + j] = fma(a[i], b[j], acc[i * WPTN + j]);
    }
}

#if STAGE_LOCAL
// Loads the K slice starting at k0 into registers (zeros outside the matrix).
GEMM_INLINE void gemm_fetch(const GemmParams* p, __global const float* A, __global const float* B,
                       const GemmAState* aState, const GemmBState* bState, const int M, const int N,
                       const int m0, const int n0, const int k0, const int kEnd, const int tid,
                       float ra[LPTA], float rb[LPTB] GEMM_KTAB_PARAM) {
    #pragma unroll
    for (int r = 0; r < LPTA; r++) {
#if GEMM_A_KFAST
        const int m = m0 + tid / TK + r * (NT / TK), kk = tid % TK;
        const GemmAState s = aState[r];
#else
        const int m = m0 + tid % TM, kk = tid / TM + r * (NT / TM);
        const GemmAState s = aState[0];
#endif
#if GEMM_EXACT
        ra[r] = gemm_a_load(p, A, s, GEMM_K(k0 + kk, kk));
#else
        ra[r] = (m < M && k0 + kk < kEnd) ? gemm_a_load(p, A, s, GEMM_K(k0 + kk, kk)) : 0.0f;
#endif
    }
    #pragma unroll
    for (int r = 0; r < LPTB; r++) {
#if GEMM_B_KFAST
        const int n = n0 + tid / TK + r * (NT / TK), kk = tid % TK;
        const GemmBState s = bState[r];
#else
        const int n = n0 + tid % TN, kk = tid / TN + r * (NT / TN);
        const GemmBState s = bState[0];
#endif
#if GEMM_EXACT
        rb[r] = gemm_b_load(p, B, s, GEMM_K(k0 + kk, kk));
#else
        rb[r] = (n < N && k0 + kk < kEnd) ? gemm_b_load(p, B, s, GEMM_K(k0 + kk, kk)) : 0.0f;
#endif
    }
}

// Stores the fetched registers into the local tiles Al[k][m] and Bl[k][n].
GEMM_INLINE void gemm_stage(__local float* Al, __local float* Bl, const int tid,
                       const float ra[LPTA], const float rb[LPTB]) {
    #pragma unroll
    for (int r = 0; r < LPTA; r++) {
#if GEMM_A_KFAST
        Al[(tid % TK) * LDAL + tid / TK + r * (NT / TK)] = ra[r];
#else
        Al[(tid / TM + r * (NT / TM)) * LDAL + tid % TM] = ra[r];
#endif
    }
    #pragma unroll
    for (int r = 0; r < LPTB; r++) {
#if GEMM_B_KFAST
        Bl[(tid % TK) * LDBL + tid / TK + r * (NT / TK)] = rb[r];
#else
        Bl[(tid / TN + r * (NT / TN)) * LDBL + tid % TN] = rb[r];
#endif
    }
}

// acc += Al^T Bl for this work-item's outputs: TK rank-1 updates from registers.
GEMM_INLINE void gemm_multiply(__local const realM* Alv, __local const realN* Blv, const int tx, const int ty,
                          float acc[WPTM * WPTN]) {
#if KUNROLL
    #pragma unroll 1
    for (int kb = 0; kb < TK; kb += GEMM_KU) {
    #pragma unroll
    for (int ku = 0; ku < GEMM_KU; ku++) {
        const int k = kb + ku;
#else
    {
    #pragma unroll
    for (int k = 0; k < TK; k++) {
#endif
        float a[WPTM], b[WPTN];
        #pragma unroll
        for (int i = 0; i < WPTM / VWM; i++) STORE_M(Alv[k * (LDAL / VWM) + i * RTM + ty], a + i * VWM);
        #pragma unroll
        for (int j = 0; j < WPTN / VWN; j++) STORE_N(Blv[k * (LDBL / VWN) + j * RTN + tx], b + j * VWN);
        gemm_outer(a, b, acc);
    }
    }
}

// acc = the (m0, n0) tile of op(A) op(B) summed over k in [kBegin, kEnd). Every work-item of the
// group must call it (it synchronises through barriers).
GEMM_INLINE void gemm_accumulate(const GemmParams* p, __global const float* A, __global const float* B,
                            const int M, const int N, const int m0, const int n0,
                            const int kBegin, const int kEnd,
                            __local realM* Alv, __local realN* Blv, float acc[WPTM * WPTN] GEMM_KTAB_PARAM) {
    const int tx = get_local_id(0), ty = get_local_id(1), tid = ty * RTN + tx;
    #pragma unroll
    for (int i = 0; i < WPTM * WPTN; i++) acc[i] = 0.0f;

    // Per-row and per-column loader state: one per register slot along the slow direction.
#if GEMM_A_KFAST
    GemmAState aState[LPTA];
    #pragma unroll
    for (int r = 0; r < LPTA; r++) aState[r] = gemm_a_state(p, m0 + tid / TK + r * (NT / TK));
#else
    GemmAState aState[1];
    aState[0] = gemm_a_state(p, m0 + tid % TM);
#endif
#if GEMM_B_KFAST
    GemmBState bState[LPTB];
    #pragma unroll
    for (int r = 0; r < LPTB; r++) bState[r] = gemm_b_state(p, n0 + tid / TK + r * (NT / TK));
#else
    GemmBState bState[1];
    bState[0] = gemm_b_state(p, n0 + tid % TN);
#endif

    __local float* Al = (__local float*)Alv;
    __local float* Bl = (__local float*)Blv;
    float ra[LPTA], rb[LPTB];
    if (kBegin >= kEnd) return;
#if GEMM_K_TABLE
    if (tid < TK) kTab[tid] = gemm_k_info(p, min(kBegin + tid, kEnd - 1));
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    gemm_fetch(p, A, B, aState, bState, M, N, m0, n0, kBegin, kEnd, tid, ra, rb GEMM_KTAB_ARG);
    for (int k0 = kBegin; k0 < kEnd; k0 += TK) {
        barrier(CLK_LOCAL_MEM_FENCE);            // everyone is done reading the previous slice (and table)
        gemm_stage(Al, Bl, tid, ra, rb);
#if GEMM_K_TABLE
        if (tid < TK && k0 + TK < kEnd) kTab[tid] = gemm_k_info(p, min(k0 + TK + tid, kEnd - 1));
#endif
        barrier(CLK_LOCAL_MEM_FENCE);
        if (k0 + TK < kEnd) gemm_fetch(p, A, B, aState, bState, M, N, m0, n0, k0 + TK, kEnd, tid, ra, rb GEMM_KTAB_ARG);
        gemm_multiply(Alv, Blv, tx, ty, acc);
    }
}

#else  // !STAGE_LOCAL

// acc += op(A)[rows, k] op(B)[k, columns] for this work-item's outputs, straight from global memory.
GEMM_INLINE void gemm_direct_step(const GemmParams* p, __global const float* A, __global const float* B,
                                  const GemmAState aState[WPTM], const GemmBState bState[WPTN],
                                  const int rowsLeft, const int colsLeft, const int k, float acc[WPTM * WPTN]) {
#if GEMM_K_TABLE
    const GemmKInfo kk = gemm_k_info(p, k);
#else
    const int kk = k;
#endif
    float a[WPTM], b[WPTN];
    #pragma unroll
    for (int i = 0; i < WPTM; i++)
        a[i] = (GEMM_EXACT || GEMM_ROW(i) < rowsLeft) ? gemm_a_load(p, A, aState[i], kk) : 0.0f;
    #pragma unroll
    for (int j = 0; j < WPTN; j++)
        b[j] = (GEMM_EXACT || GEMM_COL(j) < colsLeft) ? gemm_b_load(p, B, bState[j], kk) : 0.0f;
    gemm_outer(a, b, acc);
}

// acc = the (m0, n0) tile of op(A) op(B) summed over k in [kBegin, kEnd), without local memory:
// whole TK slices unrolled GEMM_KU steps at a time, then the remainder one step at a time.
GEMM_INLINE void gemm_accumulate(const GemmParams* p, __global const float* A, __global const float* B,
                            const int M, const int N, const int m0, const int n0,
                            const int kBegin, const int kEnd,
                            __local realM* Alv, __local realN* Blv, float acc[WPTM * WPTN]) {
    #pragma unroll
    for (int i = 0; i < WPTM * WPTN; i++) acc[i] = 0.0f;
    GemmAState aState[WPTM];
    GemmBState bState[WPTN];
    #pragma unroll
    for (int i = 0; i < WPTM; i++) aState[i] = gemm_a_state(p, m0 + GEMM_ROW(i));
    #pragma unroll
    for (int j = 0; j < WPTN; j++) bState[j] = gemm_b_state(p, n0 + GEMM_COL(j));
    const int rowsLeft = M - m0, colsLeft = N - n0;
    int k0 = kBegin;
    #pragma unroll 1
    for (; k0 + TK <= kEnd; k0 += TK) {
        #pragma unroll 1
        for (int kb = 0; kb < TK; kb += GEMM_KU) {
            #pragma unroll
            for (int ku = 0; ku < GEMM_KU; ku++)
                gemm_direct_step(p, A, B, aState, bState, rowsLeft, colsLeft, k0 + kb + ku, acc);
        }
    }
    #pragma unroll 1
    for (; k0 < kEnd; k0++) gemm_direct_step(p, A, B, aState, bState, rowsLeft, colsLeft, k0, acc);
}

#endif  // STAGE_LOCAL

#endif
