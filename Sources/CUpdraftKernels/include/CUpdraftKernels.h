#ifndef UPDRAFT_KERNELS_H
#define UPDRAFT_KERNELS_H
// The CPU backend's hot element loops, compiled three times (baseline x86-64, AVX2+FMA+F16C,
// AVX-512 F/BW/VL/DQ) with per-function target attributes, and one table of function pointers
// chosen once at start-up from cpuid, or forced lower by UPDRAFT_CPU_LEVEL. A level the CPU
// lacks is never run: asking for one falls back to the best the CPU has, with one warning.
//
// Every loop here is element-wise (no reduction is reordered) with floating-point contraction off,
// so the three levels give bit-identical results: the vector width changes, the arithmetic of each
// element does not (only a signalling NaN may come back quieted at one level and not at another).
// Calls that allow in place (output == input) say so.

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    UPD_LEVEL_BASELINE = 0,  // x86-64 baseline (SSE2), and every non-x86 CPU
    UPD_LEVEL_AVX2 = 1,      // AVX2 + FMA + F16C
    UPD_LEVEL_AVX512 = 2     // AVX-512 F, BW, VL, DQ
};

/// The highest level this CPU and its operating system run (cpuid and xgetbv).
int upd_cpu_supported_level(void);
/// The level the kernels run at: chosen on the first call of any function here, from
/// UPDRAFT_CPU_LEVEL (see upd_cpu_resolve) and the CPU.
int upd_cpu_level(void);
/// "baseline", "avx2", "avx512" (NULL for another number).
const char *upd_cpu_level_name(int level);
/// The start-up warning about UPDRAFT_CPU_LEVEL (printed once on stderr then), or NULL when none.
const char *upd_cpu_level_warning(void);

/// What a request (the value of UPDRAFT_CPU_LEVEL; NULL or "" for none) gives on a CPU whose best
/// level is `supported`: the level, and a one-line warning in `warning` (at most `capacity`
/// bytes, NUL-terminated; empty when there is nothing to say) when the request names an unknown
/// level or one the CPU lacks. Pure: nothing is installed.
int upd_cpu_resolve(const char *request, int supported, char *warning, size_t capacity);

/// Installs `level`, lowered to the supported one when the CPU lacks it, and returns the level
/// installed. For tests comparing the levels; a program chooses once, at start-up.
int upd_cpu_force_level(int level);

// MARK: Kernels (counts are element counts; n <= 0 does nothing)

/// y[i] = x[i] > 0 ? x[i] : 0 (NaN gives 0). In place allowed.
void upd_relu_forward(const float *x, float *y, ptrdiff_t n);
/// dx[i] = dy[i] * (v[i] > 0 ? 1 : 0). In place (dx == dy) allowed.
void upd_relu_backward(const float *v, const float *dy, float *dx, ptrdiff_t n);
/// y[i] = x[i] > 0 ? x[i] : a * x[i] (leaky ReLU, one PReLU channel). In place allowed.
void upd_leaky_forward(const float *x, float *y, ptrdiff_t n, float a);
/// dx[i] = dy[i] * (v[i] > 0 ? 1 : a). In place (dx == dy) allowed.
void upd_leaky_backward(const float *v, const float *dy, float *dx, ptrdiff_t n, float a);
/// y[i] = a * x[i] + b (not fused). In place allowed.
void upd_linear_forward(const float *x, float *y, ptrdiff_t n, float a, float b);
/// y[i] = min(max(x[i], lo), hi) (Swift's min/max: NaN gives lo). In place allowed.
void upd_clip_forward(const float *x, float *y, ptrdiff_t n, float lo, float hi);

/// y[i] += x[i]. y == x is allowed; other overlaps are not.
void upd_add(float *y, const float *x, ptrdiff_t n);

/// SGD with momentum, in place: g = grad + decay * w; v = momentum * v + g; w -= lr * v.
void upd_sgd_step(float *w, const float *grad, float *v, ptrdiff_t n, float lr, float momentum, float decay);
/// Adam, in place: g = grad + decay * w; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
/// w -= lr * (m * inv1) / (sqrt(v * inv2) + eps).
void upd_adam_step(float *w, const float *grad, float *m, float *v, ptrdiff_t n, float lr, float b1, float b2,
                   float eps, float decay, float inv1, float inv2);

/// y[i] = scale * (float)x[i] + shift (not fused).
void upd_bytes_to_float_affine(const uint8_t *x, float *y, ptrdiff_t n, float scale, float shift);
/// y[i] = (float)x[i].
void upd_bytes_to_float(const uint8_t *x, float *y, ptrdiff_t n);

/// IEEE binary16, round to nearest even (OpenCL's vstore_half), and back.
void upd_float_to_half(const float *x, uint16_t *y, ptrdiff_t n);
void upd_half_to_float(const uint16_t *x, float *y, ptrdiff_t n);

/// out[i] = sum over t < taps of weights[t] * sources[t][i], i < n, the taps in order (a grouped or
/// depthwise convolution's output plane from its phase planes). out must not overlap any source.
void upd_tap_sum(const float *const *sources, const float *weights, ptrdiff_t taps, float *out, ptrdiff_t n);

/// y[i] = x[i * stride] (a strided convolution's im2col row). y must not overlap x's span.
void upd_gather_strided(const float *x, float *y, ptrdiff_t n, ptrdiff_t stride);

/// Max pooling forward of `planes` planes x [H, W] -> y [Ho, Wo]. Separable: each row some window reads
/// is reduced, per window column, to the first maximum of its non-NaN values in that row (-infinity if
/// none: a value replaces the running maximum only when strictly greater) and its first value; then
/// each output is its window's first value, replaced by each of its rows' maxima that is strictly
/// greater, top to bottom (so a NaN first value stays and later NaNs never replace). Window rows
/// rlo[oh] ..< rhi[oh] and columns clo[ow] ..< chi[ow] (the in-image spans, monotone; an empty window
/// gives 0); the interior columns [interior_lo, interior_hi) read row[ow * sw - pl + k] for k < kw.
/// One call for all the planes: a call per row cost more than its work. scratch: 2 * H * Wo floats.
void upd_max_pool_planes(const float *x, float *y, ptrdiff_t planes, ptrdiff_t h, ptrdiff_t w, ptrdiff_t ho, ptrdiff_t wo,
                         const ptrdiff_t *rlo, const ptrdiff_t *rhi, const ptrdiff_t *clo, const ptrdiff_t *chi,
                         ptrdiff_t interior_lo, ptrdiff_t interior_hi, ptrdiff_t sw, ptrdiff_t kw, ptrdiff_t pl, float *scratch);

/// A convolution's geometry for one image: x [cin, h, w], weights [cout, cin, kh, kw], y [cout, ho, wo];
/// output (oy, ox) reads x at (oy*sh - pt + ky*dh, ox*sw - pl + kx*dw), zero outside.
typedef struct {
    ptrdiff_t cin, h, w, cout, kh, kw, sh, sw, dh, dw, pt, pl, ho, wo;
} upd_conv_shape;

/// Floats of the packed weights `upd_conv_small_rows` reads: K x cout rounded up to 8 (K = cin*kh*kw).
ptrdiff_t upd_conv_small_packed_count(const upd_conv_shape *s);
/// packed[k * coutp + c] = w[c * K + k] for c < cout, 0 for the padding channels (w is [cout, K]).
void upd_conv_small_pack(const float *w, const upd_conv_shape *s, float *packed);
/// Output rows `upd_conv_small_rows` computes together (about 512 outputs: the chunk's columns).
ptrdiff_t upd_conv_small_rows_per_chunk(const upd_conv_shape *s);
/// Floats of scratch one `upd_conv_small_rows` call needs: K x (a chunk's outputs rounded up to 16).
ptrdiff_t upd_conv_small_scratch_count(const upd_conv_shape *s);
/// The small-K direct convolution of one image, output rows [oy0, oy1): y[c, oy, ox] = bias[c] (0
/// when bias is NULL) + sum over k of w[c, k] * col[k](oy, ox), with ReLU (NaN gives 0) when `relu`
/// is nonzero. Every output of those rows is written once; y's channel planes are ho*wo apart. The
/// sum runs over k in order, with FMA where the level has it (levels round differently; a level is
/// deterministic). For first layers: K = cin*kh*kw small. Scratch: `upd_conv_small_scratch_count`.
void upd_conv_small_rows(const float *x, const upd_conv_shape *s, const float *packed, const float *bias, float *y,
                         ptrdiff_t oy0, ptrdiff_t oy1, int relu, float *scratch);

#ifdef __cplusplus
}
#endif
#endif
