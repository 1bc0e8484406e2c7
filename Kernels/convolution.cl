// Convolution as implicit GEMM: the tiled engine of gemm_core.h with loaders that read the im2col
// matrix straight from the NCHW tensors (nothing is unrolled in memory), the batch folded into the
// GEMM's columns so that small images still fill whole tiles, and groups along get_group_id(2).
//
// x [N, Cin, H, W], w [Cout, Cin/G, KH, KW], b [Cout], y [N, Cout, Ho, Wo]; Mg = Cout/G, Cg = Cin/G,
// P = Ho*Wo. Output (oh, ow) reads input (oh*SH - PT + kh*DH, ow*SW - PL + kw*DW); outside is zero.
//
// CONV_MODE selects the direction (one program each):
//   0 forward           y_g[m, (n,p)]   = sum_(c,kh,kw) w_g[m, (c,kh,kw)] * col_g[(c,kh,kw), (n,p)]  (+ b, then the fused activation)
//   1 backward data     dx_g[c, (n,h,w)] = sum_(m,kh,kw) w_g[m, c, kh, kw] * dy[n, m, oh, ow]
//                       over the (oh, ow) with oh*SH - PT + kh*DH = h (likewise ow): the transposed conv
//   2 backward weights  dw_g[m, (c,kh,kw)] = sum_(n,p) dy_g[m, (n,p)] * col_g[(c,kh,kw), (n,p)], split
//                       along (n,p) into `splits` slabs that gemm_reduce.cl's sum_slabs adds up
// POINTWISE = 1 specialises to 1x1 kernels with stride 1 and no padding: plain strided GEMMs.
//
// Index arithmetic stays out of the inner loops: each work-item decomposes its fixed GEMM column (or
// row) once (the loader states), the forward and backward-data loaders read their kernel-tap offsets
// from a per-slice table in local memory (GEMM_K_TABLE), and the remaining divisions use divmod()'s
// float reciprocals.
// Forward only: X_HALF / Y_HALF (storage.h) keep x / y as halves (the frozen prefix's fp16 option);
// x then stays the kernel argument's own pointer and GemmParams.xOff holds the image/group offset.
#include "gemm_params.h"
#include "activation.h"
#include "storage.h"

#ifndef CONV_MODE
#define CONV_MODE 0
#endif
#ifndef POINTWISE
#define POINTWISE 0
#endif

// Sizes shared by the loaders, with reciprocals for divmod().
typedef struct {
    int Cin, H, W, Cout, Ho, Wo, KH, KW, SH, SW, DH, DW, PT, PL;
    int Cg, Mg, P, HW, KHW;
    int xOff;                                                // X_HALF: where B starts, in halves
    float invP, invWo, invKHW, invKW, invSH, invSW;
} GemmParams;

#define CONV_ARGS \
    const int Cin, const int H, const int W, const int Cout, const int Ho, const int Wo, \
    const int KH, const int KW, const int SH, const int SW, const int DH, const int DW, \
    const int PT, const int PL, const int groups

GEMM_INLINE GemmParams conv_params(CONV_ARGS) {
    GemmParams p;
    p.Cin = Cin; p.H = H; p.W = W; p.Cout = Cout; p.Ho = Ho; p.Wo = Wo;
    p.KH = KH; p.KW = KW; p.SH = SH; p.SW = SW; p.DH = DH; p.DW = DW; p.PT = PT; p.PL = PL;
    p.xOff = 0;
    p.Cg = Cin / groups; p.Mg = Cout / groups; p.P = Ho * Wo; p.HW = H * W; p.KHW = KH * KW;
    p.invP = 1.0f / p.P; p.invWo = 1.0f / Wo;
    p.invKHW = 1.0f / p.KHW; p.invKW = 1.0f / KW; p.invSH = 1.0f / SH; p.invSW = 1.0f / SW;
    return p;
}

// The im2col value (c, kh, kw) x (n, oh, ow): `base` is image n's channel 0 of the group.
GEMM_INLINE float im2col_at(const GemmParams* p, __global const float* X, int base, int ih, int iw) {
    return ((uint)ih < (uint)p->H && (uint)iw < (uint)p->W) ? X[base + ih * p->W + iw] : 0.0f;
}

#if CONV_MODE == 0
#if X_HALF
#define CONV_LOAD_X(B, i) vload_half((size_t)((i) + p->xOff), (__global const half*)(B))
#else
#define CONV_LOAD_X(B, i) ((B)[i])
#endif
// ---- forward: A = w_g [Mg, K] (rows contiguous), B = im2col [K, N*P] (columns = output positions)
#if POINTWISE
#define GEMM_A_KFAST 1
typedef int GemmAState;
GEMM_INLINE GemmAState gemm_a_state(const GemmParams* p, int m) { return m * p->Cg; }
GEMM_INLINE float gemm_a_load(const GemmParams* p, __global const float* A, GemmAState s, int k) { return A[s + k]; }
#define GEMM_B_KFAST 0
typedef int GemmBState;                                      // offset of x[n, 0, p]
GEMM_INLINE GemmBState gemm_b_state(const GemmParams* p, int j) {
    const int n = j / p->P;
    return n * p->Cin * p->P + (j - n * p->P);
}
GEMM_INLINE float gemm_b_load(const GemmParams* p, __global const float* B, GemmBState s, int k) {
    return CONV_LOAD_X(B, s + k * p->P);
}
#else
// Slice table entry for k = (c, kh, kw): (input offset c*HW + kh*DH*W + kw*DW, kh*DH, kw*DW, k).
#define GEMM_K_TABLE 1
typedef int4 GemmKInfo;
GEMM_INLINE GemmKInfo gemm_k_info(const GemmParams* p, int k) {
    const int2 c = divmod(k, p->KHW, p->invKHW), r = divmod(c.y, p->KW, p->invKW);
    return (int4)(c.x * p->HW + r.x * p->DH * p->W + r.y * p->DW, r.x * p->DH, r.y * p->DW, k);
}
#define GEMM_A_KFAST 1
typedef int GemmAState;
GEMM_INLINE GemmAState gemm_a_state(const GemmParams* p, int m) { return m * p->Cg * p->KHW; }
GEMM_INLINE float gemm_a_load(const GemmParams* p, __global const float* A, GemmAState s, GemmKInfo k) { return A[s + k.w]; }
#define GEMM_B_KFAST 0
typedef struct { int base, ih0, iw0; } GemmBState;           // offset of the window's top-left, its position
GEMM_INLINE GemmBState gemm_b_state(const GemmParams* p, int j) {
    const int n = j / p->P, q = j - n * p->P, oh = q / p->Wo, ow = q - oh * p->Wo;
    const int ih0 = oh * p->SH - p->PT, iw0 = ow * p->SW - p->PL;
    GemmBState s = { n * p->Cin * p->HW + ih0 * p->W + iw0, ih0, iw0 };
    return s;
}
GEMM_INLINE float gemm_b_load(const GemmParams* p, __global const float* B, GemmBState s, GemmKInfo k) {
    return ((uint)(s.ih0 + k.y) < (uint)p->H && (uint)(s.iw0 + k.z) < (uint)p->W) ? CONV_LOAD_X(B, s.base + k.x) : 0.0f;
}
#endif

#elif CONV_MODE == 1
// ---- backward data: A[c, (m,kh,kw)] = w_g[m, c, kh, kw], B[(m,kh,kw), (n,h,w)] = dy_g[n, m, oh, ow] or 0
#if POINTWISE
#define GEMM_A_KFAST 0
typedef int GemmAState;                                      // c
GEMM_INLINE GemmAState gemm_a_state(const GemmParams* p, int c) { return c; }
GEMM_INLINE float gemm_a_load(const GemmParams* p, __global const float* A, GemmAState s, int m) { return A[m * p->Cg + s]; }
#define GEMM_B_KFAST 0
typedef int GemmBState;                                      // offset of dy[n, 0, p]
GEMM_INLINE GemmBState gemm_b_state(const GemmParams* p, int j) {
    const int n = j / p->P;
    return n * p->Cout * p->P + (j - n * p->P);
}
GEMM_INLINE float gemm_b_load(const GemmParams* p, __global const float* B, GemmBState s, int m) { return B[s + m * p->P]; }
#else
// Slice table entry for k = (m, kh, kw): (m*P, kh*DH, kw*DW, weight offset m*Cg*KHW + kh*KW + kw).
#define GEMM_K_TABLE 1
typedef int4 GemmKInfo;
GEMM_INLINE GemmKInfo gemm_k_info(const GemmParams* p, int k) {
    const int2 m = divmod(k, p->KHW, p->invKHW), r = divmod(m.y, p->KW, p->invKW);
    return (int4)(m.x * p->P, r.x * p->DH, r.y * p->DW, m.x * p->Cg * p->KHW + m.y);
}
#define GEMM_A_KFAST 1
typedef int GemmAState;                                      // c * KHW
GEMM_INLINE GemmAState gemm_a_state(const GemmParams* p, int c) { return c * p->KHW; }
GEMM_INLINE float gemm_a_load(const GemmParams* p, __global const float* A, GemmAState s, GemmKInfo k) { return A[s + k.w]; }
#define GEMM_B_KFAST 0
typedef struct { int base, th, tw; } GemmBState;             // image offset, padded input position
GEMM_INLINE GemmBState gemm_b_state(const GemmParams* p, int j) {
    const int n = j / p->HW, q = j - n * p->HW, h = q / p->W, w = q - h * p->W;
    GemmBState s = { n * p->Cout * p->P, h + p->PT, w + p->PL };
    return s;
}
GEMM_INLINE float gemm_b_load(const GemmParams* p, __global const float* B, GemmBState s, GemmKInfo k) {
    const int y = s.th - k.y, x = s.tw - k.z;                   // = oh * SH, ow * SW when they exist
    if (y < 0 || x < 0) return 0.0f;
    int oh = y, ow = x;
    if (p->SH != 1) { const int2 d = divmod(y, p->SH, p->invSH); if (d.y) return 0.0f; oh = d.x; }
    if (p->SW != 1) { const int2 d = divmod(x, p->SW, p->invSW); if (d.y) return 0.0f; ow = d.x; }
    return (oh < p->Ho && ow < p->Wo) ? B[s.base + k.x + oh * p->Wo + ow] : 0.0f;
}
#endif

#else
// ---- backward weights: A[m, (n,p)] = dy_g[n, m, p], B[(n,p), (c,kh,kw)] = im2col; both read along (n,p)
#define GEMM_A_KFAST 1
typedef int GemmAState;                                      // m * P
GEMM_INLINE GemmAState gemm_a_state(const GemmParams* p, int m) { return m * p->P; }
GEMM_INLINE float gemm_a_load(const GemmParams* p, __global const float* A, GemmAState s, int j) {
    const int2 q = divmod(j, p->P, p->invP);
    return A[s + q.x * p->Cout * p->P + q.y];
}
#define GEMM_B_KFAST 1
#if POINTWISE
typedef int GemmBState;                                      // c * P
GEMM_INLINE GemmBState gemm_b_state(const GemmParams* p, int c) { return c * p->P; }
GEMM_INLINE float gemm_b_load(const GemmParams* p, __global const float* B, GemmBState s, int j) {
    const int2 q = divmod(j, p->P, p->invP);
    return B[s + q.x * p->Cin * p->P + q.y];
}
#else
typedef struct { int off, dh, dw; } GemmBState;               // channel offset, kernel tap minus padding
GEMM_INLINE GemmBState gemm_b_state(const GemmParams* p, int kc) {
    const int c = kc / p->KHW, r = kc - c * p->KHW, kh = r / p->KW, kw = r - kh * p->KW;
    GemmBState s = { c * p->HW, kh * p->DH - p->PT, kw * p->DW - p->PL };
    return s;
}
GEMM_INLINE float gemm_b_load(const GemmParams* p, __global const float* B, GemmBState s, int j) {
    const int2 q = divmod(j, p->P, p->invP), o = divmod(q.y, p->Wo, p->invWo);
    return im2col_at(p, B, q.x * p->Cin * p->HW + s.off, o.x * p->SH + s.dh, o.y * p->SW + s.dw);
}
#endif
#endif

#include "gemm_core.h"

#if CONV_MODE == 0
// y = conv(x, w) (+ b) (+ res with -D RESIDUAL), then the fused activation (ACT_PARAMS; per-channel constants by output channel). Grid: (column tiles of N*P, row tiles of Mg, groups).
// Image n's output starts at y + offY + n * yChannels * P: yChannels > Cout writes a channel slice of a
// wider tensor (offY = the slice's first channel * P), the concat of several convolutions.
// RESIDUAL: a residual add fused into the convolution; res has y's shape and index (whole float outputs only).
#if RESIDUAL
#define RESIDUAL_ARG , __global const float* res
#else
#define RESIDUAL_ARG
#endif
__kernel __attribute__((reqd_work_group_size(RTN, RTM, 1)))
void conv_forward(__global const X_T* x, const int offX, __global const float* w,
                  __global const float* bias, const int hasBias,
                  __global Y_T* y, const int offY, const int yChannels, const int batch, ACT_PARAMS, CONV_ARGS RESIDUAL_ARG) {
    GEMM_LOCAL_TILES;
    GemmParams p = conv_params(Cin, H, W, Cout, Ho, Wo, KH, KW, SH, SW, DH, DW, PT, PL, groups);
    const int g = get_group_id(2), m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    const int M = p.Mg, N = batch * p.P, K = p.Cg * p.KHW;
    float acc[WPTM * WPTN];
#if X_HALF
    p.xOff = offX + g * p.Cg * p.HW;
    gemm_accumulate(&p, w + g * M * K, (__global const float*)x, M, N, m0, n0, 0, K, Alv, Blv, acc GEMM_KTAB_ARG);
#else
    gemm_accumulate(&p, w + g * M * K, x + offX + g * p.Cg * p.HW, M, N, m0, n0, 0, K, Alv, Blv, acc GEMM_KTAB_ARG);
#endif
    #pragma unroll
    for (int j = 0; j < WPTN; j++) {
        const int col = n0 + GEMM_COL(j);
        if (!GEMM_EXACT && col >= N) continue;
        const int n = col / p.P, q = col - n * p.P;
        const int yn = offY + n * yChannels * p.P + q;
        #pragma unroll
        for (int i = 0; i < WPTM; i++) {
            const int m = m0 + GEMM_ROW(i), co = g * M + m;
            if (!GEMM_EXACT && m >= M) continue;
            float v = acc[i * WPTN + j];
            if (hasBias) v += bias[co];
#if RESIDUAL
            v += res[yn + co * p.P];
#endif
            if (actKind != ACT_NONE) v = ACT_APPLY(v, co);
            STORE_Y(y, yn + co * p.P, v);
        }
    }
}

#elif CONV_MODE == 1
// dx from dy and w. Grid: (column tiles of N*H*W, row tiles of Cg, groups).
__kernel __attribute__((reqd_work_group_size(RTN, RTM, 1)))
void conv_backward_data(__global const float* dy, const int offDY, __global const float* w,
                        __global float* dx, const int offDX, const int batch, CONV_ARGS) {
    GEMM_LOCAL_TILES;
    const GemmParams p = conv_params(Cin, H, W, Cout, Ho, Wo, KH, KW, SH, SW, DH, DW, PT, PL, groups);
    const int g = get_group_id(2), m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    const int M = p.Cg, N = batch * p.HW, K = p.Mg * p.KHW;
    float acc[WPTM * WPTN];
    gemm_accumulate(&p, w + g * p.Mg * p.Cg * p.KHW, dy + offDY + g * p.Mg * p.P, M, N, m0, n0, 0, K,
                    Alv, Blv, acc GEMM_KTAB_ARG);
    #pragma unroll
    for (int j = 0; j < WPTN; j++) {
        const int col = n0 + GEMM_COL(j);
        if (!GEMM_EXACT && col >= N) continue;
        const int n = col / p.HW, q = col - n * p.HW;
        __global float* dxn = dx + offDX + (n * Cin + g * p.Cg) * p.HW + q;
        #pragma unroll
        for (int i = 0; i < WPTM; i++) {
            const int c = m0 + GEMM_ROW(i);
            if (!GEMM_EXACT && c >= M) continue;
            dxn[c * p.HW] = acc[i * WPTN + j];
        }
    }
}

#else
// dw (or split-K slabs of it). Grid: (column tiles of Cg*KH*KW, row tiles of Mg, groups * splits).
// Slice s sums (n,p) in [s * kChunk, (s+1) * kChunk) into out[offOut + s * Cout*Cg*KH*KW + dw index].
__kernel __attribute__((reqd_work_group_size(RTN, RTM, 1)))
void conv_backward_weights(__global const float* x, const int offX, __global const float* dy, const int offDY,
                           __global float* out, const int offOut, const int splits, const int kChunk,
                           const int batch, CONV_ARGS) {
    GEMM_LOCAL_TILES;
    const GemmParams p = conv_params(Cin, H, W, Cout, Ho, Wo, KH, KW, SH, SW, DH, DW, PT, PL, groups);
    const int z = get_group_id(2), g = z / splits, s = z - g * splits;
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    const int M = p.Mg, N = p.Cg * p.KHW, K = batch * p.P;
    const int kBegin = s * kChunk, kEnd = min(K, kBegin + kChunk);
    float acc[WPTM * WPTN];
    gemm_accumulate(&p, dy + offDY + g * M * p.P, x + offX + g * p.Cg * p.HW, M, N, m0, n0, kBegin, kEnd,
                    Alv, Blv, acc GEMM_KTAB_ARG);
    __global float* o = out + offOut + s * Cout * N + g * M * N;
    #pragma unroll
    for (int i = 0; i < WPTM; i++) {
        const int m = m0 + GEMM_ROW(i);
        #pragma unroll
        for (int j = 0; j < WPTN; j++) {
            const int col = n0 + GEMM_COL(j);
            if (!GEMM_EXACT && (m >= M || col >= N)) continue;
            o[m * N + col] = acc[i * WPTN + j];
        }
    }
}
#endif
