// Broadcasting binary ops (Ops/Broadcast.swift); reductions are in reduce.cl.
//
// broadcast_binary: y = a op b (op 0 add, 1 subtract, 2 multiply, 3 divide) over an output of up to 6
// dimensions d0..d5 (row-major, leading ones padded with 1); each operand is read with its own
// strides, 0 along the axes it is broadcast on. One work-item per output element.

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
