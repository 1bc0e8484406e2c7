// Softmax over channels and the losses, forward and backward.
//
// Softmax: x, y [N, C, S] (S = H*W); for every row (n, s): y[n, :, s] = exp(x - m) / sum_c exp(x - m),
// m = max_c x[n, c, s]. Backward: dx = y * (dy - sum_c dy * y).
// Two layouts of the same computation: one work-item per row (S > 1: neighbouring work-items read
// neighbouring s, so loads coalesce), or one work-group per row (S == 1: long rows of classes).
//
// Cross-entropy on logits z [N, C] with labels [N] (class indices as floats), one work-group per row:
// row loss logsumexp(z_n) - z_n[label], dz = (softmax(z_n) - onehot(label)) / N, and whether the first
// arg-max is the label. Rows write partials; `sum_to_scalar` reduces them in a fixed order (no float
// atomics). A label that is not a class index in [0, C) makes its row loss NaN (kernels cannot throw).
//
// Mean squared error: per-group partial sums of (x - t)^2 (and dx = 2 (x - t) / count), then
// `sum_to_scalar`.
#include "common.h"

// ---- Softmax, one work-item per row (n, s); `rows` = N*S.

__kernel void softmax_forward(__global const float* x, __global float* y, const int C, const int S, const int rows) {
    const int r = GID0;
    if (r >= rows) return;
    const int base = (r / S) * C * S + r % S;
    float m = -INFINITY;
    for (int c = 0; c < C; ++c) m = fmax(m, x[base + c * S]);
    float sum = 0.0f;
    for (int c = 0; c < C; ++c) sum += exp(x[base + c * S] - m);
    const float inv = 1.0f / sum;
    for (int c = 0; c < C; ++c) y[base + c * S] = exp(x[base + c * S] - m) * inv;
}

__kernel void softmax_backward(__global const float* y, __global const float* dy, __global float* dx,
                               const int C, const int S, const int rows) {
    const int r = GID0;
    if (r >= rows) return;
    const int base = (r / S) * C * S + r % S;
    float dot = 0.0f;
    for (int c = 0; c < C; ++c) dot += dy[base + c * S] * y[base + c * S];
    for (int c = 0; c < C; ++c) {
        const int i = base + c * S;
        dx[i] = y[i] * (dy[i] - dot);
    }
}

// ---- Softmax, one work-group per row of C contiguous values (S == 1).

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void softmax_rows_forward(__global const float* x, __global float* y, const int C) {
    __local float scratch[WG_SIZE];
    const int lid = (int)get_local_id(0);
    __global const float* xr = x + (int)get_group_id(0) * C;
    __global float* yr = y + (int)get_group_id(0) * C;
    float m = -INFINITY;
    for (int c = lid; c < C; c += WG_SIZE) m = fmax(m, xr[c]);
    m = group_max(m, scratch);
    float sum = 0.0f;
    for (int c = lid; c < C; c += WG_SIZE) sum += exp(xr[c] - m);
    const float inv = 1.0f / group_sum(sum, scratch);
    for (int c = lid; c < C; c += WG_SIZE) yr[c] = exp(xr[c] - m) * inv;
}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void softmax_rows_backward(__global const float* y, __global const float* dy, __global float* dx, const int C) {
    __local float scratch[WG_SIZE];
    const int lid = (int)get_local_id(0), offset = (int)get_group_id(0) * C;
    float dot = 0.0f;
    for (int c = lid; c < C; c += WG_SIZE) dot += dy[offset + c] * y[offset + c];
    dot = group_sum(dot, scratch);
    for (int c = lid; c < C; c += WG_SIZE) dx[offset + c] = y[offset + c] * (dy[offset + c] - dot);
}

// ---- Fused softmax + cross-entropy: one work-group per row n of z [N, C].
// partials[n] = row loss, partials[N + n] = 1 when the row's first arg-max is its label, else 0.
// dz is written only when writeGradient != 0 (dz may then be any buffer: it is not touched).

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void softmax_cross_entropy_rows(__global const float* z, __global const float* labels, __global float* dz,
                                __global float* partials, const int C, const int N, const int writeGradient,
                                const float invN) {
    __local float values[WG_SIZE];
    __local int indices[WG_SIZE];
    const int n = (int)get_group_id(0), lid = (int)get_local_id(0);
    __global const float* zr = z + n * C;
    // First arg-max (also the row maximum for a stable log-sum-exp).
    float best = 0.0f;
    int bestIndex = -1;
    for (int c = lid; c < C; c += WG_SIZE)
        if (bestIndex < 0 || zr[c] > best) { best = zr[c]; bestIndex = c; }
    const int argMax = group_first_argmax(best, bestIndex, values, indices);
    const float m = zr[argMax];
    const float labelValue = labels[n];
    const bool valid = labelValue >= 0.0f && labelValue < (float)C && labelValue == floor(labelValue);
    const int label = valid ? (int)labelValue : -1;
    const float zLabel = valid ? zr[label] : 0.0f;  // read before any dz is written (dz may alias z)
    float sum = 0.0f;
    for (int c = lid; c < C; c += WG_SIZE) sum += exp(zr[c] - m);
    const float logSumExp = m + log(group_sum(sum, values));
    if (writeGradient) {
        __global float* dzr = dz + n * C;
        for (int c = lid; c < C; c += WG_SIZE)
            dzr[c] = (exp(zr[c] - logSumExp) - (c == label ? 1.0f : 0.0f)) * invN;
    }
    if (lid == 0) {
        partials[n] = valid ? logSumExp - zLabel : NAN;
        partials[N + n] = (valid && argMax == label) ? 1.0f : 0.0f;
    }
}

// ---- Mean squared error, stage 1: the launch's G work-groups cover all `count` elements with a
// grid-stride loop; group g writes partials[g]. dx = gradientScale * (x - t) when writeGradient.

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void squared_error_partials(__global const float* x, __global const float* t, __global float* dx,
                            __global float* partials, const int count, const int writeGradient,
                            const float gradientScale) {
    __local float scratch[WG_SIZE];
    const int stride = (int)get_global_size(0);
    float sum = 0.0f;
    for (int i = GID0; i < count; i += stride) {
        const float d = x[i] - t[i];
        sum += d * d;
        if (writeGradient) dx[i] = gradientScale * d;
    }
    const float total = group_sum(sum, scratch);
    if (get_local_id(0) == 0) partials[get_group_id(0)] = total;
}

// ---- dst[0] = scale * sum of src[offset ..< offset + n], by one work-group in a fixed order.

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void sum_to_scalar(__global const float* src, const int offset, const int n, __global float* dst, const float scale) {
    __local float scratch[WG_SIZE];
    float sum = 0.0f;
    for (int i = (int)get_local_id(0); i < n; i += WG_SIZE) sum += src[offset + i];
    const float total = group_sum(sum, scratch);
    if (get_local_id(0) == 0) dst[0] = total * scale;
}
