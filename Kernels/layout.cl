// Layout ops: the strided copy that every layout op moving values runs as (transpose, concatND, …;
// Ops/Layout.swift StridedCopy), forward and backward alike (backward is the copy reversed).
//
// One work-item per element i of the box, `count` elements. The host passes the simplified
// geometry padded on the outside to 7 axes: d0..d6 the box's dimensions (innermost d6), s0..s6 the
// source stride and t0..t6 the destination stride of each axis (0 for padding). i decomposes into
// (o0..o6); y[y_offset + sum_k o_k * t_k] = x[x_offset + sum_k o_k * s_k].
#include "common.h"

__kernel void strided_copy(__global const float* x, __global float* y, const int count,
                           const int x_offset, const int y_offset,
                           const int d0, const int d1, const int d2, const int d3, const int d4, const int d5, const int d6,
                           const int s0, const int s1, const int s2, const int s3, const int s4, const int s5, const int s6,
                           const int t0, const int t1, const int t2, const int t3, const int t4, const int t5, const int t6) {
    const int i = GID0;
    if (i >= count) return;
    int r = i;
    int src = x_offset, dst = y_offset;
    int o = r % d6; r /= d6; src += o * s6; dst += o * t6;
    o = r % d5; r /= d5; src += o * s5; dst += o * t5;
    o = r % d4; r /= d4; src += o * s4; dst += o * t4;
    o = r % d3; r /= d3; src += o * s3; dst += o * t3;
    o = r % d2; r /= d2; src += o * s2; dst += o * t2;
    o = r % d1; r /= d1; src += o * s1; dst += o * t1;
    src += r * s0; dst += r * t0;
    y[dst] = x[src];
}
