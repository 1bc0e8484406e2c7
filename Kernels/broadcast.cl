// Broadcasting binary ops and reductions (Ops/Broadcast.swift).
//
// broadcast_binary: y = a op b (op 0 add, 1 subtract, 2 multiply, 3 divide) over an output of up to 6
// dimensions d0..d5 (row-major, leading ones padded with 1); each operand is read with its own
// strides, 0 along the axes it is broadcast on. One work-item per output element.
//
// Reductions: the input's axes merged into up to three kept runs (sizes k*, input strides ks*) and
// three reduced runs (r*, rs*). One work-item per output element walks its group in row-major
// order: forward writes scale * sum or the maximum (the first element, replaced only by a strictly
// greater one); backward writes every element of its group: scale * dy, or dy at that first maximum
// and 0 elsewhere. No two work-items write one element, no atomics.
#include "common.h"

__kernel void broadcast_binary(__global const float* a, __global const float* b, __global float* y, const int op,
                               const int d0, const int d1, const int d2, const int d3, const int d4, const int d5,
                               const int a0, const int a1, const int a2, const int a3, const int a4, const int a5,
                               const int b0, const int b1, const int b2, const int b3, const int b4, const int b5,
                               const int count) {
    const int i = GID0;
    if (i >= count) return;
    int rest = i;
    const int c5 = rest % d5; rest /= d5;
    const int c4 = rest % d4; rest /= d4;
    const int c3 = rest % d3; rest /= d3;
    const int c2 = rest % d2; rest /= d2;
    const int c1 = rest % d1; rest /= d1;
    const int c0 = rest;
    const float x = a[c0 * a0 + c1 * a1 + c2 * a2 + c3 * a3 + c4 * a4 + c5 * a5];
    const float z = b[c0 * b0 + c1 * b1 + c2 * b2 + c3 * b3 + c4 * b4 + c5 * b5];
    float r;
    if (op == 0) r = x + z;
    else if (op == 1) r = x - z;
    else if (op == 2) r = x * z;
    else r = x / z;
    y[i] = r;
}

// The input offset of output element j's group.
inline int reduction_base(const int j, const int k0, const int k1, const int k2, const int ks0, const int ks1,
                          const int ks2) {
    int rest = j;
    const int c2 = rest % k2; rest /= k2;
    const int c1 = rest % k1; rest /= k1;
    return rest * ks0 + c1 * ks1 + c2 * ks2;
}

#define REDUCTION_ARGS const int k0, const int k1, const int k2, const int ks0, const int ks1, const int ks2, \
                       const int r0, const int r1, const int r2, const int rs0, const int rs1, const int rs2

// The offset (from the group's base) of the group's first maximum.
inline int reduction_first_max(__global const float* x, const int r0, const int r1, const int r2, const int rs0,
                               const int rs1, const int rs2) {
    int best = 0;
    float value = x[0];
    for (int i0 = 0; i0 < r0; ++i0)
        for (int i1 = 0; i1 < r1; ++i1)
            for (int i2 = 0; i2 < r2; ++i2) {
                const int o = i0 * rs0 + i1 * rs1 + i2 * rs2;
                if (x[o] > value) { value = x[o]; best = o; }
            }
    return best;
}

__kernel void reduce_forward(__global const float* x, __global float* y, REDUCTION_ARGS, const int is_max,
                             const float scale, const int count) {
    const int j = GID0;
    if (j >= count) return;
    __global const float* g = x + reduction_base(j, k0, k1, k2, ks0, ks1, ks2);
    if (is_max) { y[j] = g[reduction_first_max(g, r0, r1, r2, rs0, rs1, rs2)]; return; }
    float sum = 0.0f;
    for (int i0 = 0; i0 < r0; ++i0)
        for (int i1 = 0; i1 < r1; ++i1)
            for (int i2 = 0; i2 < r2; ++i2) sum += g[i0 * rs0 + i1 * rs1 + i2 * rs2];
    y[j] = scale * sum;
}

__kernel void reduce_backward(__global const float* x, __global const float* dy, __global float* dx, REDUCTION_ARGS,
                              const int is_max, const float scale, const int count) {
    const int j = GID0;
    if (j >= count) return;
    const int base = reduction_base(j, k0, k1, k2, ks0, ks1, ks2);
    const float v = is_max ? 0.0f : scale * dy[j];
    for (int i0 = 0; i0 < r0; ++i0)
        for (int i1 = 0; i1 < r1; ++i1)
            for (int i2 = 0; i2 < r2; ++i2) dx[base + i0 * rs0 + i1 * rs1 + i2 * rs2] = v;
    if (is_max) dx[base + reduction_first_max(x + base, r0, r1, r2, rs0, rs1, rs2)] = dy[j];
}
