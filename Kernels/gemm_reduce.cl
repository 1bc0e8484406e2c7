// Deterministic reductions that finish the GEMM-based ops: every sum runs in a fixed order, so
// results are the same from run to run (no atomics). WG_SIZE and group_sum come from common.h.
#include "common.h"
#include "activation.h"

// out[offOut + (i / columns) * ld + i % columns] = sum over s < slabs of parts[offParts + s * count + i],
// s ascending: adds up split-K slices (packed rows x columns slabs) into a matrix with leading dimension ld.
__kernel void sum_slabs(__global const float* parts, const int offParts, const int columns, const int count,
                        const int slabs, __global float* out, const int offOut, const int ld) {
    const int i = get_global_id(0);
    if (i >= count) return;
    float v = 0.0f;
    for (int s = 0; s < slabs; s++) v += parts[offParts + s * count + i];
    const int r = i / columns;
    out[offOut + r * ld + (i - r * columns)] = v;
}

// Bias gradient, stage 1. dy holds `images` blocks of [channels, spatial]; channel c of chunk s
// (get_group_id(0) = s, get_group_id(1) = c) sums the positions t in [s * chunk, (s+1) * chunk) of
// the flattened (image, position) range, t < images * spatial, into partial[c * slices + s].
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void bias_grad_partial(__global const float* dy, const int images, const int channels, const int spatial,
                       const int chunk, __global float* partial, const int offPartial) {
    __local float scratch[WG_SIZE];
    const int s = get_group_id(0), c = get_group_id(1), slices = get_num_groups(0);
    const int total = images * spatial;
    const int begin = s * chunk, end = min(total, begin + chunk);
    float v = 0.0f;
    if (spatial == 1) {
        for (int t = begin + get_local_id(0); t < end; t += WG_SIZE) v += dy[t * channels + c];
    } else {
        for (int t = begin + get_local_id(0); t < end; t += WG_SIZE) {
            const int n = t / spatial, p = t - n * spatial;
            v += dy[(n * channels + c) * spatial + p];
        }
    }
    v = group_sum(v, scratch);
    if (get_local_id(0) == 0) partial[offPartial + c * slices + s] = v;
}

// Bias gradient, stage 2: db[c] = sum over s of partial[c * slices + s], s ascending.
__kernel void bias_grad_final(__global const float* partial, const int channels, const int slices,
                              __global float* db) {
    const int c = get_global_id(0);
    if (c >= channels) return;
    float v = 0.0f;
    for (int s = 0; s < slices; s++) v += partial[c * slices + s];
    db[c] = v;
}

// The epilogue CLBlast cannot fuse: C[off + b * strideC + i * ldc + j] += bias (biasMode 1: bias[i],
// 2: bias[j]), then the fused activation (per-channel constants by i when actRows, else by j), for
// i < rows, j < cols, b < batch (global: cols, rows, batch).
__kernel void gemm_epilogue(__global float* C, const int off, const int rows, const int cols, const int ldc,
                            const int strideC, const int batch, __global const float* bias, const int biasMode,
                            const int actRows, ACT_PARAMS) {
    const int j = get_global_id(0), i = get_global_id(1), b = get_global_id(2);
    if (j >= cols || i >= rows || b >= batch) return;
    const int at = off + b * strideC + i * ldc + j;
    float v = C[at];
    if (biasMode == 1) v += bias[i];
    else if (biasMode == 2) v += bias[j];
    if (actKind != ACT_NONE) v = ACT_APPLY(v, actRows ? i : j);
    C[at] = v;
}
