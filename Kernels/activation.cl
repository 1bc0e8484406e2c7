// Element-wise activations, forward and backward (Core ML ActivationParams).
//   x, y, dy, dx: `count` floats.  `kind` selects the function (ACT_* below, matching the host),
//   alpha/beta are its parameters (leaky ReLU slope; linear alpha*x + beta), unused otherwise.
// Backward reads x (ReLU, leaky ReLU, linear) or y (sigmoid, tanh); at x = 0 ReLU and leaky ReLU
// take the x <= 0 branch.
#include "common.h"

#define ACT_RELU 0
#define ACT_LEAKY_RELU 1
#define ACT_SIGMOID 2
#define ACT_TANH 3
#define ACT_LINEAR 4

__kernel void activation_forward(__global const float* x, __global float* y, const int count,
                                 const int kind, const float alpha, const float beta) {
    const int i = GID0;
    if (i >= count) return;
    const float v = x[i];
    float r;
    switch (kind) {
    case ACT_RELU: r = v > 0.0f ? v : 0.0f; break;
    case ACT_LEAKY_RELU: r = v > 0.0f ? v : alpha * v; break;
    case ACT_SIGMOID: r = 1.0f / (1.0f + exp(-v)); break;
    case ACT_TANH: r = tanh(v); break;
    default: r = alpha * v + beta; break;
    }
    y[i] = r;
}

__kernel void activation_backward(__global const float* x, __global const float* y, __global const float* dy,
                                  __global float* dx, const int count, const int kind, const float alpha) {
    const int i = GID0;
    if (i >= count) return;
    const float g = dy[i];
    float r;
    switch (kind) {
    case ACT_RELU: r = x[i] > 0.0f ? g : 0.0f; break;
    case ACT_LEAKY_RELU: r = x[i] > 0.0f ? g : alpha * g; break;
    case ACT_SIGMOID: { const float s = y[i]; r = g * s * (1.0f - s); break; }
    case ACT_TANH: { const float t = y[i]; r = g * (1.0f - t * t); break; }
    default: r = alpha * g; break;
    }
    dx[i] = r;
}
