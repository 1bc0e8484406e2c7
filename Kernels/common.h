// Shared helpers for every Updraft kernel file (included textually by the host, once per program).
// OpenCL C 1.2, no extensions: NVIDIA's OpenCL and PoCL must both build everything that includes it.
//
// Conventions: buffers are float32; sizes and indices are `int` (the host checks they fit);
// 1-D kernels run over a global size rounded up to the work-group size, so each checks its bound.
#ifndef UPDRAFT_COMMON_H
#define UPDRAFT_COMMON_H

// Work-group size of the reduction kernels (the host passes OpenCLTuning's size, rounded down to a
// power of two). Element-wise kernels do not depend on it.
#ifndef WG_SIZE
#define WG_SIZE 64
#endif

#if (WG_SIZE & (WG_SIZE - 1)) != 0
#error "WG_SIZE must be a power of two"
#endif

// Index of this work-item in a 1-D launch.
#define GID0 ((int)get_global_id(0))

// Ceiling division for non-negative a and positive b.
inline int div_up(int a, int b) { return (a + b - 1) / b; }

// Sum of one float per work-item over the work-group, in a fixed tree order (deterministic).
// `scratch` holds WG_SIZE floats. Every work-item of the group must call it; all get the sum.
inline float group_sum(float value, __local float* scratch) {
    const int lid = (int)get_local_id(0);
    scratch[lid] = value;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int span = WG_SIZE / 2; span > 0; span >>= 1) {
        if (lid < span) scratch[lid] += scratch[lid + span];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float total = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);  // scratch may be reused right after
    return total;
}

// The mean and 1 / sqrt(var + eps) (biased variance) of the G values at x[group id * G ...], one
// work-group per row (layer and instance normalization); every work-item gets both.
inline float2 row_statistics(__global const float* x, const int G, const float eps, __local float* scratch) {
    const int lid = (int)get_local_id(0), base = (int)get_group_id(0) * G;
    float sum = 0.0f;
    for (int j = lid; j < G; j += WG_SIZE) sum += x[base + j];
    const float mean = group_sum(sum, scratch) / (float)G;
    float sq = 0.0f;
    for (int j = lid; j < G; j += WG_SIZE) { const float d = x[base + j] - mean; sq += d * d; }
    return (float2)(mean, rsqrt(group_sum(sq, scratch) / (float)G + eps));
}

// Maximum of one float per work-item over the work-group. Every work-item must call it.
inline float group_max(float value, __local float* scratch) {
    const int lid = (int)get_local_id(0);
    scratch[lid] = value;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int span = WG_SIZE / 2; span > 0; span >>= 1) {
        if (lid < span) scratch[lid] = fmax(scratch[lid], scratch[lid + span]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float total = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
}

// Whether candidate (v, i) beats the current best (best, bestIndex) as "first maximum": a larger
// value, or an equal value at a smaller index. bestIndex < 0 means no candidate yet.
inline bool beats_first_max(float v, int i, float best, int bestIndex) {
    if (i < 0) return false;
    if (bestIndex < 0) return true;
    return v > best || (v == best && i < bestIndex);
}

// First arg-max over the work-group: each work-item offers (value, index) (index < 0: nothing).
// Returns the winning index (or -1) to every work-item; `values`/`indices` hold WG_SIZE entries.
inline int group_first_argmax(float value, int index, __local float* values, __local int* indices) {
    const int lid = (int)get_local_id(0);
    values[lid] = value;
    indices[lid] = index;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int span = WG_SIZE / 2; span > 0; span >>= 1) {
        if (lid < span && beats_first_max(values[lid + span], indices[lid + span], values[lid], indices[lid])) {
            values[lid] = values[lid + span];
            indices[lid] = indices[lid + span];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int winner = indices[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return winner;
}

#endif
