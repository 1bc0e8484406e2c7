// Optimizer updates, one fused pass over a parameter tensor of `count` floats (formulas as documented
// on SGDHyperparameters and AdamHyperparameters).
#include "common.h"

// g = grad + weightDecay * w;  v = momentum * v + g;  w -= learningRate * v.
__kernel void sgd_step(__global float* w, __global const float* grad, __global float* velocity, const int count,
                       const float learningRate, const float momentum, const float weightDecay) {
    const int i = GID0;
    if (i >= count) return;
    const float p = w[i];
    const float g = grad[i] + weightDecay * p;
    const float v = momentum * velocity[i] + g;
    velocity[i] = v;
    w[i] = p - learningRate * v;
}

// g = grad + weightDecay * w;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
// w -= learningRate * (m / correction1) / (sqrt(v / correction2) + eps), correction_k = 1 - b_k^step
// (computed by the host in double precision).
__kernel void adam_step(__global float* w, __global const float* grad, __global float* m, __global float* v,
                        const int count, const float learningRate, const float beta1, const float beta2,
                        const float eps, const float weightDecay, const float correction1, const float correction2) {
    const int i = GID0;
    if (i >= count) return;
    const float p = w[i];
    const float g = grad[i] + weightDecay * p;
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    w[i] = p - learningRate * (mi / correction1) / (sqrt(vi / correction2) + eps);
}
