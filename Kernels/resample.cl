// Resampling (upsample and the layers that resize on a grid): x [N, C, H, W] -> y [N, C, Ho, Wo].
// The host (OpenCLBackend+Resample.swift) computes the taps of Ops/Resample.swift and uploads them as
// small tables, one shared by every example (per_example 0) or one per example (per_example 1):
// output row oh reads input rows i0, i1 with weights 1 - f, f, likewise each output column.
// Forward: one work-item per output element. Backward: one work-item per input element, summing the
// outputs that read it from per-axis reader lists (the transpose of the taps), so no two work-items
// write one element and no atomics are needed.
#include "common.h"

// taps (ints): per table Ho + Wo pairs (i0, i1), rows first; weights: per table Ho + Wo values f.
__kernel void resample_forward(__global const float* x, __global float* y, __global const int* taps,
                               __global const float* weights, const int H, const int W, const int Ho, const int Wo,
                               const int C, const int per_example, const int count) {
    const int i = GID0;
    if (i >= count) return;
    const int ow = i % Wo, t = i / Wo, oh = t % Ho, plane = t / Ho;
    const int table = per_example ? plane / C : 0;
    __global const int* ti = taps + table * 2 * (Ho + Wo);
    __global const float* tf = weights + table * (Ho + Wo);
    const int h0 = ti[2 * oh], h1 = ti[2 * oh + 1], w0 = ti[2 * (Ho + ow)], w1 = ti[2 * (Ho + ow) + 1];
    const float fh = tf[oh], fw = tf[Ho + ow];
    __global const float* p = x + plane * H * W;
    const float top = p[h0 * W + w0] + fw * (p[h0 * W + w1] - p[h0 * W + w0]);
    const float bottom = p[h1 * W + w0] + fw * (p[h1 * W + w1] - p[h1 * W + w0]);
    y[i] = top + fh * (bottom - top);
}

// readers (ints), per table: H + 1 row offsets, W + 1 column offsets, then 2 Ho output rows and
// 2 Wo output columns (input row h is read by output rows rows[rowOffsets[h] .. rowOffsets[h + 1]));
// reader_weights, per table: the 2 Ho row weights, then the 2 Wo column weights.
__kernel void resample_backward(__global const float* dy, __global float* dx, __global const int* readers,
                                __global const float* reader_weights, const int H, const int W, const int Ho,
                                const int Wo, const int C, const int per_example, const int count) {
    const int i = GID0;
    if (i >= count) return;
    const int w = i % W, t = i / W, h = t % H, plane = t / H;
    const int table = per_example ? plane / C : 0;
    __global const int* row_offsets = readers + table * (H + 1 + W + 1 + 2 * Ho + 2 * Wo);
    __global const int* col_offsets = row_offsets + H + 1;
    __global const int* rows = col_offsets + W + 1;
    __global const int* cols = rows + 2 * Ho;
    __global const float* row_weights = reader_weights + table * (2 * Ho + 2 * Wo);
    __global const float* col_weights = row_weights + 2 * Ho;
    __global const float* d = dy + plane * Ho * Wo;
    float sum = 0.0f;
    for (int k = row_offsets[h]; k < row_offsets[h + 1]; ++k) {
        __global const float* drow = d + rows[k] * Wo;
        float row = 0.0f;
        for (int j = col_offsets[w]; j < col_offsets[w + 1]; ++j) row += col_weights[j] * drow[cols[j]];
        sum += row_weights[k] * row;
    }
    dx[i] = sum;
}
