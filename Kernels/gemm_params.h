// Tunables of the tiled GEMM (gemm_core.h) with safe defaults; the host passes its per-device choice
// (OpenCLTuning) as -D defines. Also the vector types and the output-ownership macros kernels use.
#ifndef UPDRAFT_GEMM_PARAMS_H
#define UPDRAFT_GEMM_PARAMS_H

#ifndef TM            // rows of C per work-group
#define TM 32
#endif
#ifndef TN            // columns of C per work-group
#define TN 32
#endif
#ifndef TK            // depth of the K slice staged in local memory
#define TK 16
#endif
#ifndef WPTM          // rows per work-item
#define WPTM 4
#endif
#ifndef WPTN          // columns per work-item
#define WPTN 4
#endif
#ifndef VWM           // vector width of local reads along M (1, 2 or 4)
#define VWM 4
#endif
#ifndef VWN           // vector width of local reads along N (1, 2 or 4)
#define VWN 4
#endif
#ifndef PAD           // vectors of padding per local row (0 or 1): spreads stores over banks
#define PAD 1
#endif
#ifndef KUNROLL       // k steps unrolled together in the inner product (0: the whole TK slice)
#define KUNROLL 0
#endif
#ifndef STAGE_LOCAL   // 1: operands staged through local tiles; 0: read straight from global memory
#define STAGE_LOCAL 1
#endif
#ifndef GEMM_EXACT    // 1: sizes are multiples of the tile, no bounds checks
#define GEMM_EXACT 0
#endif

#define RTM (TM / WPTM)               // work-items along M
#define RTN (TN / WPTN)               // work-items along N
#define NT (RTM * RTN)                // work-items per group
#define LPTA ((TM * TK) / NT)         // A values each work-item fetches per slice
#define LPTB ((TN * TK) / NT)         // B values each work-item fetches per slice
#define LDAL (TM + PAD * VWM)         // padded local row lengths
#define LDBL (TN + PAD * VWN)
#define GEMM_KU (KUNROLL > 0 ? KUNROLL : TK)   // k steps per unrolled block

#if KUNROLL < 0 || (KUNROLL > 0 && TK % KUNROLL)
#error "KUNROLL must be 0 or divide TK"
#endif

#if (TM % WPTM) || (TN % WPTN) || (WPTM % VWM) || (WPTN % VWN)
#error "TM, TN must be multiples of WPTM, WPTN, which must be multiples of VWM, VWN"
#endif
#if (NT % TM) || (NT % TN) || (NT % TK) || ((TM * TK) % NT) || ((TN * TK) % NT)
#error "the work-group size TM/WPTM * TN/WPTN must be a multiple of TM, TN and TK and divide TM*TK and TN*TK"
#endif

// Vector types of the local reads, and STORE_x(vector, p): its components into p[0..VWx) (plain
// component stores, so that the private arrays they fill stay in registers).
#if VWM == 1
typedef float realM;
#define STORE_M(v, p) ((p)[0] = (v))
#elif VWM == 2
typedef float2 realM;
#define STORE_M(v, p) ((p)[0] = (v).x, (p)[1] = (v).y)
#elif VWM == 4
typedef float4 realM;
#define STORE_M(v, p) ((p)[0] = (v).x, (p)[1] = (v).y, (p)[2] = (v).z, (p)[3] = (v).w)
#else
#error "VWM must be 1, 2 or 4"
#endif
#if VWN == 1
typedef float realN;
#define STORE_N(v, p) ((p)[0] = (v))
#elif VWN == 2
typedef float2 realN;
#define STORE_N(v, p) ((p)[0] = (v).x, (p)[1] = (v).y)
#elif VWN == 4
typedef float4 realN;
#define STORE_N(v, p) ((p)[0] = (v).x, (p)[1] = (v).y, (p)[2] = (v).z, (p)[3] = (v).w)
#else
#error "VWN must be 1, 2 or 4"
#endif

// Every helper of the GEMM kernels is inlined: their private arrays (the accumulators) must end up in
// registers, which a real call would force into memory.
#define GEMM_INLINE inline __attribute__((always_inline))

// Row and column (within the work-group's tile) of accumulator i * WPTN + j of work-item (tx, ty).
#define GEMM_ROW(i) ((((i) / VWM) * RTM + get_local_id(1)) * VWM + (i) % VWM)
#define GEMM_COL(j) ((((j) / VWN) * RTN + get_local_id(0)) * VWN + (j) % VWN)

// The local tiles (and the k table, see gemm_core.h), declared at kernel scope by each GEMM kernel.
// Without staging (STAGE_LOCAL 0) there are none: null pointers keep the kernels' calls unchanged.
#if STAGE_LOCAL
#define GEMM_LOCAL_TILES \
    __local realM Alv[TK * LDAL / VWM]; \
    __local realN Blv[TK * LDBL / VWN] \
    GEMM_KTAB_DECL
#else
#define GEMM_LOCAL_TILES \
    __local realM* Alv = 0; \
    __local realN* Blv = 0
#endif

// Quotient and remainder of x / d (x >= 0, d >= 1), with `inv` = 1.0f / d. Below 2^20 a float
// reciprocal and one correction step give the exact answer (the quotient is off by less than one even
// with OpenCL's 2.5-ulp division), much cheaper than integer division on GPUs; above, it divides.
#ifndef DIVMOD_FAST_LIMIT
#define DIVMOD_FAST_LIMIT 1048576   // 2^20 (tests lower it to exercise the exact path)
#endif
GEMM_INLINE int2 divmod(const int x, const int d, const float inv) {
    if (x >= DIVMOD_FAST_LIMIT) return (int2)(x / d, x % d);
    int q = (int)((float)x * inv);
    int r = x - q * d;
    if (r < 0) { q -= 1; r += d; }
    else if (r >= d) { q += 1; r -= d; }
    return (int2)(q, r);
}

#endif
