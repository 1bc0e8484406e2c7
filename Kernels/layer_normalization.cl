// Layer normalization (Core ML layerNormalization, Ops/LayerNormalization.swift): each row of G contiguous
// values is normalized on its own, then scaled and shifted per position j by gamma[j] and beta[j]:
//   y = gamma (x - mean) / sqrt(var + eps) + beta  (biased variance).
// One work-group per row (the row's first value at group id * G); the statistics are work-group sums
// (common.h's group_sum and row_statistics), known to every work-item.
#include "common.h"

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void layer_norm_forward(__global const float* x, __global const float* gamma, __global const float* beta,
                        __global float* y, const int G, const float eps) {
    __local float scratch[WG_SIZE];
    const float2 s = row_statistics(x, G, eps, scratch);
    for (int j = (int)get_local_id(0), i = (int)get_group_id(0) * G + j; j < G; j += WG_SIZE, i += WG_SIZE)
        y[i] = gamma[j] * (x[i] - s.x) * s.y + beta[j];
}

// Frozen gamma: g = dy gamma, dx = inv (g - mean(g) - xhat mean(g xhat)).
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void layer_norm_backward(__global const float* x, __global const float* gamma, __global const float* dy,
                         __global float* dx, const int G, const float eps) {
    __local float scratch[WG_SIZE];
    const float2 s = row_statistics(x, G, eps, scratch);
    const int lid = (int)get_local_id(0), base = (int)get_group_id(0) * G;
    float sg = 0.0f, sgx = 0.0f;
    for (int j = lid; j < G; j += WG_SIZE) {
        const float g = dy[base + j] * gamma[j];
        sg += g;
        sgx += g * (x[base + j] - s.x) * s.y;
    }
    const float meanG = group_sum(sg, scratch) / (float)G;
    const float meanGXhat = group_sum(sgx, scratch) / (float)G;
    for (int j = lid; j < G; j += WG_SIZE)
        dx[base + j] = s.y * (dy[base + j] * gamma[j] - meanG - (x[base + j] - s.x) * s.y * meanGXhat);
}
