// Element-wise activations, clip and unary functions, forward and backward (the host's activation
// table, Kernels/activation.h). x, y, dy, dx: `count` floats laid out [N, C, spatial]; per-channel
// constants (PReLU, parametric softplus) are indexed by channel (i / spatial) % C.
// Backward reads y when fromOutput (then x may be the same buffer as y), else x.
#include "common.h"
#include "activation.h"

__kernel void activation_forward(__global const float* x, __global float* y, const int count, const int spatial,
                                 ACT_PARAMS) {
    const int i = GID0;
    if (i >= count) return;
    const int ch = actChannels > 0 ? (i / spatial) % actChannels : 0;
    y[i] = ACT_APPLY(x[i], ch);
}

__kernel void activation_backward(__global const float* v, __global const float* dy, __global float* dx,
                                  const int count, const int spatial, const int fromOutput, ACT_PARAMS) {
    const int i = GID0;
    if (i >= count) return;
    float a = actA, b = actB;
    if (actChannels > 0) {
        const int ch = (i / spatial) % actChannels;
        a = actTable[ch];
        b = actTable[actChannels + ch];
    }
    dx[i] = dy[i] * act_derivative(actKind, v[i], fromOutput, a, b, actC, actD);
}
