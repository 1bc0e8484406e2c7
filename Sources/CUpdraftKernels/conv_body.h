// The small-K direct convolution (a network's first layer: few input channels, so K = cin*kh*kw is
// small and an SGEMM over im2col columns spends its time packing rather than multiplying). Included
// by kernels_body.h once per vector level. Unlike the element loops there, contraction is on in the
// accumulation: each multiply-add is one FMA where the level has FMA, so the levels round
// differently, as BLAS does; each level is deterministic and independent of the thread count.
//
// Per chunk of output rows (`upd_conv_small_rows_per_chunk`): the rows' columns col[k][r*wo + ox]
// (k = (ci*kh + ky)*kw + kx) are gathered into the scratch, zero outside the input and zero-padded to
// a multiple of UPD_CONV_COLUMNS; then blocks of
// UPD_CONV_CHANNELS output channels x UPD_CONV_COLUMNS columns accumulate in registers over k, start
// from the bias and store once, with the ReLU applied at the store when asked.

// Output channels per register block: 8 (8 accumulators of one zmm) unless the level's file sets
// fewer to fit its registers (AVX2: 16 ymm; baseline: 16 xmm). Packed weights are padded to 8, a
// multiple of every block.
#ifndef UPD_CONV_CHANNELS
#define UPD_CONV_CHANNELS 8
#endif
#define UPD_CONV_COLUMNS 16

static void UPD_FN(conv_gather_row)(const float *restrict x, const upd_conv_shape *s, ptrdiff_t oy, ptrdiff_t ld,
                                    float *restrict col) {
    const ptrdiff_t sw = s->sw;
    for (ptrdiff_t ci = 0; ci < s->cin; ci++) {
        for (ptrdiff_t ky = 0; ky < s->kh; ky++) {
            ptrdiff_t iy = oy * s->sh - s->pt + ky * s->dh;
            for (ptrdiff_t kx = 0; kx < s->kw; kx++) {
                float *row = col + ((ci * s->kh + ky) * s->kw + kx) * ld;
                ptrdiff_t ox = 0;
                if (iy >= 0 && iy < s->h) {
                    // Columns ox read x at ox*sw + offset: those before `lo` and from `hi` on fall outside.
                    const ptrdiff_t offset = kx * s->dw - s->pl;
                    ptrdiff_t lo = offset >= 0 ? 0 : (-offset + sw - 1) / sw;
                    ptrdiff_t hi = s->w - offset <= 0 ? 0 : (s->w - offset + sw - 1) / sw;
                    if (lo > s->wo) lo = s->wo;
                    if (hi > s->wo) hi = s->wo;
                    if (hi < lo) hi = lo;
                    const float *src = x + (ci * s->h + iy) * s->w + offset;
                    for (; ox < lo; ox++) row[ox] = 0.0f;
                    if (sw == 1) {
                        UPD_VECTOR_LOOP
                        for (ptrdiff_t i = lo; i < hi; i++) row[i] = src[i];
                    } else if (sw == 2) {
                        UPD_VECTOR_LOOP
                        for (ptrdiff_t i = lo; i < hi; i++) row[i] = src[2 * i];
                    } else {
                        for (ptrdiff_t i = lo; i < hi; i++) row[i] = src[i * sw];
                    }
                    ox = hi;
                }
                for (; ox < s->wo; ox++) row[ox] = 0.0f;
            }
        }
    }
}

typedef float upd_conv_v16 __attribute__((vector_size(64), aligned(4)));
typedef int32_t upd_conv_i16 __attribute__((vector_size(64), aligned(4)));

static void UPD_FN(conv_small_rows)(const float *restrict x, const upd_conv_shape *s, const float *restrict packed,
                                    const float *restrict bias, float *restrict y, ptrdiff_t oy0, ptrdiff_t oy1,
                                    int relu, float *restrict scratch) {
#pragma clang fp contract(fast)
    const ptrdiff_t K = s->cin * s->kh * s->kw;
    const ptrdiff_t rows = upd_conv_small_rows_per_chunk(s);
    const ptrdiff_t ld = (rows * s->wo + UPD_CONV_COLUMNS - 1) / UPD_CONV_COLUMNS * UPD_CONV_COLUMNS;
    const ptrdiff_t coutp = upd_conv_small_packed_count(s) / K;  // cout rounded up to 8, whatever the block
    const ptrdiff_t plane = s->ho * s->wo;
    const upd_conv_v16 zero = {0};
    // A 1x1, stride-1, unpadded convolution reads its columns from the image itself (channel k's
    // plane is row k); only a block running past the end of the plane is copied, zero-padded.
    const int pointwise = s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 && s->pt == 0 && s->pl == 0
        && s->ho == s->h && s->wo == s->w;
    for (ptrdiff_t oy = oy0; oy < oy1; oy += rows) {
        // A chunk of output rows is one run of columns: output (oy + r, ox) is column r*wo + ox, and
        // lies at the same offset from the chunk's start in every output channel's plane.
        const ptrdiff_t count = (oy1 - oy < rows ? oy1 - oy : rows) * s->wo;
        const float *columns0 = scratch;
        ptrdiff_t step = ld;
        if (pointwise) {
            columns0 = x + oy * s->wo;
            step = plane;
        } else {
            for (ptrdiff_t r = 0; oy + r < oy1 && r < rows; r++) UPD_FN(conv_gather_row)(x, s, oy + r, ld, scratch + r * s->wo);
            for (ptrdiff_t k = 0; k < K; k++) {
                for (ptrdiff_t i = count; i < ld; i++) scratch[k * ld + i] = 0.0f;
            }
        }
        for (ptrdiff_t c0 = 0; c0 < s->cout; c0 += UPD_CONV_CHANNELS) {
            const ptrdiff_t cb = s->cout - c0 < UPD_CONV_CHANNELS ? s->cout - c0 : UPD_CONV_CHANNELS;
            for (ptrdiff_t ox0 = 0; ox0 < count; ox0 += UPD_CONV_COLUMNS) {
                // One register (or two, or four, by level) of 16 columns per channel of the block.
                upd_conv_v16 acc[UPD_CONV_CHANNELS];
#pragma clang loop unroll(full)
                for (int c = 0; c < UPD_CONV_CHANNELS; c++) acc[c] = zero + (bias && c < cb ? bias[c0 + c] : 0.0f);
                const float *v = columns0 + ox0;
                ptrdiff_t vstep = step;
                if (pointwise && (oy * s->wo + ox0 + UPD_CONV_COLUMNS > plane)) {
                    const ptrdiff_t left = plane - oy * s->wo - ox0;
                    for (ptrdiff_t k = 0; k < K; k++) {
                        for (ptrdiff_t j = 0; j < UPD_CONV_COLUMNS; j++) scratch[k * UPD_CONV_COLUMNS + j] = j < left ? v[k * plane + j] : 0.0f;
                    }
                    v = scratch;
                    vstep = UPD_CONV_COLUMNS;
                }
                const float *wk = packed + c0;
                for (ptrdiff_t k = 0; k < K; k++, v += vstep, wk += coutp) {
                    const upd_conv_v16 columns = *(const upd_conv_v16 *)v;
#pragma clang loop unroll(full)
                    for (int c = 0; c < UPD_CONV_CHANNELS; c++) acc[c] += wk[c] * columns;
                }
                const ptrdiff_t n = count - ox0 < UPD_CONV_COLUMNS ? count - ox0 : UPD_CONV_COLUMNS;
                // Constant indices only (the loop unrolled, the partial block skipped by the test),
                // so the accumulators stay in registers through the k loop.
#pragma clang loop unroll(full)
                for (int c = 0; c < UPD_CONV_CHANNELS; c++) {
                    if (c >= cb) break;
                    upd_conv_v16 out = acc[c];
                    // ReLU as x > 0 ? x : 0 (NaN fails the comparison and gives 0).
                    if (relu) out = (upd_conv_v16)((upd_conv_i16)out & (upd_conv_i16)(out > zero));
                    float *dst = y + (c0 + c) * plane + oy * s->wo + ox0;
                    if (n == UPD_CONV_COLUMNS) {
                        *(upd_conv_v16 *)dst = out;
                    } else {
                        for (ptrdiff_t j = 0; j < n; j++) dst[j] = out[j];
                    }
                }
            }
        }
    }
}
