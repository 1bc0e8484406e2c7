// The kernels' bodies, included once per vector level by kernels_baseline.c, kernels_avx2.c and
// kernels_avx512.c, each of which sets UPD_SUFFIX and wraps this file in a
// `#pragma clang attribute` giving every function its `target`: the same plain loops, vectorised
// by the compiler for that level's registers. Not compiled on its own.
//
// Contraction (a * b + c into one FMA) is off, so every element's arithmetic, and the result, is
// the same at every level and the same as the Swift expressions these loops replaced. The loops
// are marked safe to vectorise: the in-place calls the header allows have output == input, where
// each element is read before it is written.

#include "kernel_table.h"
#include <math.h>

#pragma clang fp contract(off)

#define UPD_JOIN2(a, b) a##_##b
#define UPD_JOIN(a, b) UPD_JOIN2(a, b)
#define UPD_FN(name) UPD_JOIN(name, UPD_SUFFIX)
#define UPD_VECTOR_LOOP _Pragma("clang loop vectorize(assume_safety) interleave(enable)")

static void UPD_FN(relu_forward)(const float *x, float *y, ptrdiff_t n) {
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) { float v = x[i]; y[i] = v > 0.0f ? v : 0.0f; }
}

static void UPD_FN(relu_backward)(const float *v, const float *dy, float *dx, ptrdiff_t n) {
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) dx[i] = dy[i] * (v[i] > 0.0f ? 1.0f : 0.0f);
}

static void UPD_FN(leaky_forward)(const float *x, float *y, ptrdiff_t n, float a) {
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) { float v = x[i]; y[i] = v > 0.0f ? v : a * v; }
}

static void UPD_FN(leaky_backward)(const float *v, const float *dy, float *dx, ptrdiff_t n, float a) {
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) dx[i] = dy[i] * (v[i] > 0.0f ? 1.0f : a);
}

static void UPD_FN(linear_forward)(const float *x, float *y, ptrdiff_t n, float a, float b) {
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) y[i] = a * x[i] + b;
}

// Swift's max(x, y) is `y >= x ? y : x` and min(x, y) `y < x ? y : x`: kept exactly (NaN, -0).
static void UPD_FN(clip_forward)(const float *x, float *y, ptrdiff_t n, float lo, float hi) {
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) {
        float v = x[i];
        float m = lo >= v ? lo : v;
        y[i] = hi < m ? hi : m;
    }
}

static void UPD_FN(add)(float *y, const float *x, ptrdiff_t n) {
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) y[i] += x[i];
}

static void UPD_FN(sgd_step)(float *w, const float *grad, float *v, ptrdiff_t n, float lr, float momentum, float decay) {
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) {
        float g = grad[i] + decay * w[i];
        float vi = momentum * v[i] + g;
        v[i] = vi;
        w[i] -= lr * vi;
    }
}

static void UPD_FN(adam_step)(float *w, const float *grad, float *m, float *v, ptrdiff_t n, float lr, float b1, float b2,
                              float eps, float decay, float inv1, float inv2) {
    const float c1 = 1.0f - b1, c2 = 1.0f - b2;
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) {
        float g = grad[i] + decay * w[i];
        float mi = b1 * m[i] + c1 * g;
        float vi = b2 * v[i] + c2 * g * g;
        m[i] = mi;
        v[i] = vi;
        w[i] -= lr * (mi * inv1) / (__builtin_elementwise_sqrt(vi * inv2) + eps);
    }
}

static void UPD_FN(bytes_to_float_affine)(const uint8_t *restrict x, float *restrict y, ptrdiff_t n, float scale, float shift) {
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) y[i] = scale * (float)x[i] + shift;
}

static void UPD_FN(bytes_to_float)(const uint8_t *restrict x, float *restrict y, ptrdiff_t n) {
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) y[i] = (float)x[i];
}

static void UPD_FN(float_to_half)(const float *restrict x, uint16_t *restrict y, ptrdiff_t n) {
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) {
        _Float16 h = (_Float16)x[i];
        uint16_t bits;
        __builtin_memcpy(&bits, &h, sizeof bits);
        y[i] = bits;
    }
}

static void UPD_FN(half_to_float)(const uint16_t *restrict x, float *restrict y, ptrdiff_t n) {
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) {
        _Float16 h;
        uint16_t bits = x[i];
        __builtin_memcpy(&h, &bits, sizeof h);
        y[i] = (float)h;
    }
}

static void UPD_FN(gather_strided)(const float *restrict x, float *restrict y, ptrdiff_t n, ptrdiff_t stride) {
    if (stride == 2) {
        UPD_VECTOR_LOOP
        for (ptrdiff_t i = 0; i < n; i++) y[i] = x[2 * i];
        return;
    }
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) y[i] = x[i * stride];
}

// A grouped (depthwise) convolution's tap sum: out[i] = sum over t of weights[t] * sources[t][i],
// the taps in order. Nine taps (3x3 depthwise) keep weights and sources in registers and start from
// the first product; other counts start from 0 and add one tap at a time over the whole span (the
// span is one output plane as wide as a phase row: tens of KiB, in cache).
static void UPD_FN(tap_sum)(const float *const *sources, const float *weights, ptrdiff_t taps, float *restrict out,
                            ptrdiff_t n) {
    if (taps == 9) {
        const float *s0 = sources[0], *s1 = sources[1], *s2 = sources[2], *s3 = sources[3], *s4 = sources[4],
                    *s5 = sources[5], *s6 = sources[6], *s7 = sources[7], *s8 = sources[8];
        const float w0 = weights[0], w1 = weights[1], w2 = weights[2], w3 = weights[3], w4 = weights[4],
                    w5 = weights[5], w6 = weights[6], w7 = weights[7], w8 = weights[8];
        UPD_VECTOR_LOOP
        for (ptrdiff_t i = 0; i < n; i++) {
            float a = w0 * s0[i];
            a += w1 * s1[i]; a += w2 * s2[i]; a += w3 * s3[i]; a += w4 * s4[i];
            a += w5 * s5[i]; a += w6 * s6[i]; a += w7 * s7[i]; a += w8 * s8[i];
            out[i] = a;
        }
        return;
    }
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) out[i] = 0.0f;
    for (ptrdiff_t t = 0; t < taps; t++) {
        const float *s = sources[t];
        const float w = weights[t];
        UPD_VECTOR_LOOP
        for (ptrdiff_t i = 0; i < n; i++) out[i] += w * s[i];
    }
}

// Max pooling's running maximum: `best` replaced only by a strictly greater value (NaN never
// replaces, a NaN `best` stays), so the first maximum in window order wins.
#define UPD_FOLD(best, v) ((v) > (best) ? (v) : (best))

// One row's interior windows: window o reads row[o * stride + k] for k < kernel, all inside the row.
static void UPD_FN(max_pool_row)(const float *restrict row, float *restrict max, float *restrict first, ptrdiff_t count,
                                 ptrdiff_t stride, ptrdiff_t kernel) {
    if (stride == 2 && kernel == 3) {  // SqueezeNet's and ResNet's 3x3/2
        UPD_VECTOR_LOOP
        for (ptrdiff_t o = 0; o < count; o++) {
            const float *p = row + 2 * o;
            float v0 = p[0], acc = UPD_FOLD(-__builtin_inff(), v0);
            acc = UPD_FOLD(acc, p[1]);
            max[o] = UPD_FOLD(acc, p[2]);
            first[o] = v0;
        }
        return;
    }
    if (stride == 1 && kernel == 3) {
        UPD_VECTOR_LOOP
        for (ptrdiff_t o = 0; o < count; o++) {
            const float *p = row + o;
            float v0 = p[0], acc = UPD_FOLD(-__builtin_inff(), v0);
            acc = UPD_FOLD(acc, p[1]);
            max[o] = UPD_FOLD(acc, p[2]);
            first[o] = v0;
        }
        return;
    }
    UPD_VECTOR_LOOP
    for (ptrdiff_t o = 0; o < count; o++) { first[o] = row[o * stride]; max[o] = -__builtin_inff(); }
    for (ptrdiff_t k = 0; k < kernel; k++) {
        const float *p = row + k;
        UPD_VECTOR_LOOP
        for (ptrdiff_t o = 0; o < count; o++) max[o] = UPD_FOLD(max[o], p[o * stride]);
    }
}

static void UPD_FN(max_fold_rows)(const float *restrict first, const float *restrict rows, ptrdiff_t row_stride,
                                  ptrdiff_t row_count, float *restrict y, ptrdiff_t n) {
    UPD_VECTOR_LOOP
    for (ptrdiff_t i = 0; i < n; i++) y[i] = first[i];
    for (ptrdiff_t r = 0; r < row_count; r++) {
        const float *row = rows + r * row_stride;
        UPD_VECTOR_LOOP
        for (ptrdiff_t i = 0; i < n; i++) y[i] = UPD_FOLD(y[i], row[i]);
    }
}

// Max pooling forward of whole planes (see upd_max_pool_planes): each read row reduced to rowMax /
// rowFirst (interior windows by max_pool_row, clipped border windows scalar), then each output row
// folded from its window's first element through its rows' maxima.
static void UPD_FN(max_pool_planes)(const float *restrict x, float *restrict y, ptrdiff_t planes, ptrdiff_t H,
                                    ptrdiff_t W, ptrdiff_t Ho, ptrdiff_t Wo, const ptrdiff_t *rlo, const ptrdiff_t *rhi,
                                    const ptrdiff_t *clo, const ptrdiff_t *chi, ptrdiff_t ilo, ptrdiff_t ihi,
                                    ptrdiff_t sw, ptrdiff_t kw, ptrdiff_t pl, float *restrict scratch) {
    float *row_max = scratch, *row_first = scratch + H * Wo;
    ptrdiff_t row_lo = Ho > 0 ? rlo[0] : 0, row_hi = Ho > 0 ? rhi[Ho - 1] : 0;
    if (row_hi < row_lo) row_hi = row_lo;
    for (ptrdiff_t p = 0; p < planes; p++) {
        const float *plane = x + p * H * W;
        float *out = y + p * Ho * Wo;
        for (ptrdiff_t ih = row_lo; ih < row_hi; ih++) {
            const float *row = plane + ih * W;
            float *mx = row_max + ih * Wo, *first = row_first + ih * Wo;
            for (ptrdiff_t ow = 0; ow < Wo; ow++) {
                if (ow == ilo && ihi > ilo) {
                    UPD_FN(max_pool_row)(row + sw * ilo - pl, mx + ilo, first + ilo, ihi - ilo, sw, kw);
                    ow = ihi - 1;
                    continue;
                }
                ptrdiff_t c0 = clo[ow], c1 = chi[ow];
                if (c0 >= c1) { mx[ow] = 0; first[ow] = 0; continue; }
                float best = -__builtin_inff();
                for (ptrdiff_t iw = c0; iw < c1; iw++) best = UPD_FOLD(best, row[iw]);
                mx[ow] = best;
                first[ow] = row[c0];
            }
        }
        for (ptrdiff_t oh = 0; oh < Ho; oh++) {
            ptrdiff_t r0 = rlo[oh], r1 = rhi[oh];
            float *dst = out + oh * Wo;
            if (r0 >= r1) {
                for (ptrdiff_t i = 0; i < Wo; i++) dst[i] = 0;
                continue;
            }
            UPD_FN(max_fold_rows)(row_first + r0 * Wo, row_max + r0 * Wo, Wo, r1 - r0, dst, Wo);
        }
    }
}

#include "conv_body.h"

const upd_kernel_table UPD_FN(upd_kernel_table) = {
    .relu_forward = UPD_FN(relu_forward),
    .relu_backward = UPD_FN(relu_backward),
    .leaky_forward = UPD_FN(leaky_forward),
    .leaky_backward = UPD_FN(leaky_backward),
    .linear_forward = UPD_FN(linear_forward),
    .clip_forward = UPD_FN(clip_forward),
    .add = UPD_FN(add),
    .sgd_step = UPD_FN(sgd_step),
    .adam_step = UPD_FN(adam_step),
    .bytes_to_float_affine = UPD_FN(bytes_to_float_affine),
    .bytes_to_float = UPD_FN(bytes_to_float),
    .float_to_half = UPD_FN(float_to_half),
    .half_to_float = UPD_FN(half_to_float),
    .gather_strided = UPD_FN(gather_strided),
    .max_pool_planes = UPD_FN(max_pool_planes),
    .conv_small_rows = UPD_FN(conv_small_rows),
    .tap_sum = UPD_FN(tap_sum),
};
