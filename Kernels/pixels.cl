// 8-bit image samples to the network's float input (Backend.uploadPixels): a batch crosses to the
// device at one byte a sample and is converted here, with the model's image scaler applied as
// elementwise.cl's channel_affine_forward applies it (the same float expression, so the result is
// bit for bit the float upload's). x [N, C, S] bytes (count = N*C*S), y [N, C, S] floats.
// CPU twin: CPUBackend+Pixels.swift; definition: Reference.pixelsToFloat.
#include "common.h"

// y = x.
__kernel void pixels_to_float(__global const uchar* x, __global float* y, const int count) {
    const int i = GID0;
    if (i < count) y[i] = (float)x[i];
}

// y[n, c, s] = scale[c] * x[n, c, s] + shift[c].
__kernel void pixels_to_float_affine(__global const uchar* x, __global const float* scale, __global const float* shift,
                                     __global float* y, const int channels, const int spatial, const int count) {
    const int i = GID0;
    if (i >= count) return;
    const int c = (i / spatial) % channels;
    y[i] = scale[c] * (float)x[i] + shift[c];
}
