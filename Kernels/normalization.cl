// Normalizations without learned statistics, forward and backward:
// - LRN across channels (LRNLayerParams): s[c] = k + alpha / n * sum_{j in W(c)} x[j]², y = x * s^-beta,
//   W(c) = [c - before, c - before + n) clipped to [0, C). One work-item per element.
// - L2 normalize (L2NormalizeLayerParams) over each example's M = C*H*W values:
//   y = x / sqrt(sum x² + eps). One work-group per example.
// - Instance normalization over each (n, c) plane of S = H*W values: y = (x - mean) / sqrt(var + eps)
//   (biased variance). One work-group per plane.
#include "common.h"

inline float lrn_scale(__global const float* x, const int n, const int c, const int p, const int C, const int S,
                       const int size, const int before, const float k, const float a) {
    const int lo = max(0, c - before), hi = min(C, c - before + size);
    float sum = 0.0f;
    for (int j = lo; j < hi; ++j) { const float v = x[(n * C + j) * S + p]; sum += v * v; }
    return k + a * sum;
}

__kernel void lrn_forward(__global const float* x, __global float* y, const int C, const int S, const int size,
                          const int before, const float k, const float a, const float beta, const int count) {
    const int i = GID0;
    if (i >= count) return;
    const int p = i % S, c = (i / S) % C, n = i / (S * C);
    y[i] = x[i] * pow(lrn_scale(x, n, c, p, C, S, size, before, k, a), -beta);
}

// dx[j] = dy[j] s[j]^-beta - 2 a beta x[j] sum_{c : j in W(c)} dy[c] x[c] s[c]^(-beta-1).
__kernel void lrn_backward(__global const float* x, __global const float* dy, __global float* dx, const int C,
                           const int S, const int size, const int before, const float k, const float a,
                           const float beta, const int count) {
    const int i = GID0;
    if (i >= count) return;
    const int p = i % S, j = (i / S) % C, n = i / (S * C);
    const float sj = lrn_scale(x, n, j, p, C, S, size, before, k, a);
    const int lo = max(0, j - size + 1 + before), hi = min(C - 1, j + before);
    float sum = 0.0f;
    for (int c = lo; c <= hi; ++c) {
        const int e = (n * C + c) * S + p;
        const float s = lrn_scale(x, n, c, p, C, S, size, before, k, a);
        sum += dy[e] * x[e] * pow(s, -beta) / s;
    }
    dx[i] = dy[i] * pow(sj, -beta) - 2.0f * a * beta * x[i] * sum;
}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void l2_normalize_forward(__global const float* x, __global float* y, const int M, const float eps) {
    __local float scratch[WG_SIZE];
    const int lid = (int)get_local_id(0);
    __global const float* xs = x + (int)get_group_id(0) * M;
    __global float* ys = y + (int)get_group_id(0) * M;
    float sum = 0.0f;
    for (int i = lid; i < M; i += WG_SIZE) sum += xs[i] * xs[i];
    const float r = rsqrt(group_sum(sum, scratch) + eps);
    for (int i = lid; i < M; i += WG_SIZE) ys[i] = xs[i] * r;
}

// dx = r dy - r³ x sum(dy x).
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void l2_normalize_backward(__global const float* x, __global const float* dy, __global float* dx, const int M,
                           const float eps) {
    __local float scratch[WG_SIZE];
    const int lid = (int)get_local_id(0);
    const int base = (int)get_group_id(0) * M;
    float sum = 0.0f, dot = 0.0f;
    for (int i = lid; i < M; i += WG_SIZE) { sum += x[base + i] * x[base + i]; dot += dy[base + i] * x[base + i]; }
    const float r = rsqrt(group_sum(sum, scratch) + eps);
    const float kx = r * r * r * group_sum(dot, scratch);
    for (int i = lid; i < M; i += WG_SIZE) dx[base + i] = r * dy[base + i] - kx * x[base + i];
}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void instance_norm_forward(__global const float* x, __global float* y, const int S, const float eps) {
    __local float scratch[WG_SIZE];
    const float2 s = row_statistics(x, S, eps, scratch);
    const float mean = s.x, inv = s.y;
    const int lid = (int)get_local_id(0), base = (int)get_group_id(0) * S;
    for (int i = lid; i < S; i += WG_SIZE) y[base + i] = (x[base + i] - mean) * inv;
}

// dx = inv (dy - mean(dy) - xhat mean(dy xhat)).
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void instance_norm_backward(__global const float* x, __global const float* dy, __global float* dx, const int S,
                            const float eps) {
    __local float scratch[WG_SIZE];
    const float2 s = row_statistics(x, S, eps, scratch);
    const float mean = s.x, inv = s.y;
    const int lid = (int)get_local_id(0), base = (int)get_group_id(0) * S;
    float sdy = 0.0f, sdyx = 0.0f;
    for (int i = lid; i < S; i += WG_SIZE) {
        sdy += dy[base + i];
        sdyx += dy[base + i] * (x[base + i] - mean) * inv;
    }
    const float meanDy = group_sum(sdy, scratch) / (float)S;
    const float meanDyXhat = group_sum(sdyx, scratch) / (float)S;
    for (int i = lid; i < S; i += WG_SIZE)
        dx[base + i] = inv * (dy[base + i] - meanDy - (x[base + i] - mean) * inv * meanDyXhat);
}
