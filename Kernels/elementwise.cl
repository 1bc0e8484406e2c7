// Element-wise arithmetic: accumulate, add, multiply, and the frozen channel affine (batchnorm with
// frozen statistics) forward and backward. All 1-D over `count` elements.
#include "common.h"

// dst[i] += src[i].
__kernel void accumulate(__global const float* src, __global float* dst, const int count) {
    const int i = GID0;
    if (i < count) dst[i] += src[i];
}

// y = a + b.
__kernel void elementwise_add(__global const float* a, __global const float* b, __global float* y, const int count) {
    const int i = GID0;
    if (i < count) y[i] = a[i] + b[i];
}

// y = a * b.
__kernel void elementwise_multiply(__global const float* a, __global const float* b, __global float* y,
                                   const int count) {
    const int i = GID0;
    if (i < count) y[i] = a[i] * b[i];
}

// x, y [N, C, S] (count = N*C*S), scale, shift [C]:  y[n, c, s] = scale[c] * x[n, c, s] + shift[c].
__kernel void channel_affine_forward(__global const float* x, __global const float* scale,
                                     __global const float* shift, __global float* y,
                                     const int channels, const int spatial, const int count) {
    const int i = GID0;
    if (i >= count) return;
    const int c = (i / spatial) % channels;
    y[i] = scale[c] * x[i] + shift[c];
}

// dy, dx [N, C, S], scale [C]:  dx[n, c, s] = scale[c] * dy[n, c, s].
__kernel void channel_affine_backward(__global const float* dy, __global const float* scale, __global float* dx,
                                      const int channels, const int spatial, const int count) {
    const int i = GID0;
    if (i >= count) return;
    const int c = (i / spatial) % channels;
    dx[i] = scale[c] * dy[i];
}
