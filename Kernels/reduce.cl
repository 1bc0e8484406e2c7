// Reductions (Ops/Reduce.swift), one program per kind: built with -D REDUCE_KIND=<code> and every
// kind's code as REDUCE_<NAME> (`ReductionKind.openCLDefines`).
//
// The input's axes are merged into up to three kept runs (sizes k*, input strides ks*) and three
// reduced runs (r*, rs*). One work-item per output element walks its group in row-major order:
// forward writes scale * the kind's value, backward writes every element of its group (scale * dy
// times the kind's derivative), so no two work-items write one element and no atomics are needed.
// Each kind composes the primitives below: a sum of a mapped value (GROUP_SUM) and the first
// extremum (group_first: a later element replaces only when strictly better).
#include "common.h"

#define REDUCTION_ARGS const int k0, const int k1, const int k2, const int ks0, const int ks1, const int ks2, \
                       const int r0, const int r1, const int r2, const int rs0, const int rs1, const int rs2
#define RUNS r0, r1, r2, rs0, rs1, rs2

// The input offset of output element j's group.
inline int reduction_base(const int j, const int k0, const int k1, const int k2, const int ks0, const int ks1,
                          const int ks2) {
    int rest = j;
    const int c2 = rest % k2; rest /= k2;
    const int c1 = rest % k1; rest /= k1;
    return rest * ks0 + c1 * ks1 + c2 * ks2;
}

// Runs BODY for every offset o of the group, in row-major order.
#define GROUP_FOR(BODY) \
    for (int i0 = 0; i0 < r0; ++i0) \
        for (int i1 = 0; i1 < r1; ++i1) \
            for (int i2 = 0; i2 < r2; ++i2) { const int o = i0 * rs0 + i1 * rs1 + i2 * rs2; BODY; }

// acc = the sum of EXPR (of v, the element) over the group g.
#define GROUP_SUM(acc, EXPR) float acc = 0.0f; GROUP_FOR({ const float v = g[o]; acc += (EXPR); })

// The offset (x) and row-major position (y) of the group's first maximum (want_max) or minimum.
inline int2 group_first(__global const float* g, const int r0, const int r1, const int r2, const int rs0,
                        const int rs1, const int rs2, const int want_max) {
    int best = 0, position = 0, i = 0;
    float value = g[0];
    GROUP_FOR({
        const float v = g[o];
        if (i > 0 && (want_max ? v > value : v < value)) { value = v; best = o; position = i; }
        ++i;
    })
    return (int2)(best, position);
}

__kernel void reduce_forward(__global const float* x, __global float* y, REDUCTION_ARGS, const float scale,
                             const float offset, const int count) {
    const int j = GID0;
    if (j >= count) return;
    __global const float* g = x + reduction_base(j, k0, k1, k2, ks0, ks1, ks2);
    float r;
#if REDUCE_KIND == REDUCE_SUM
    GROUP_SUM(s, v);
    r = s;
#elif REDUCE_KIND == REDUCE_MAX
    r = g[group_first(g, RUNS, 1).x];
#elif REDUCE_KIND == REDUCE_MIN
    r = g[group_first(g, RUNS, 0).x];
#elif REDUCE_KIND == REDUCE_PROD
    float p = 1.0f;
    GROUP_FOR(p *= g[o])
    r = p;
#elif REDUCE_KIND == REDUCE_L1
    GROUP_SUM(s, fabs(v));
    r = s;
#elif REDUCE_KIND == REDUCE_L2
    GROUP_SUM(s, v * v);
    r = sqrt(s);
#elif REDUCE_KIND == REDUCE_SUMSQUARE
    GROUP_SUM(s, v * v);
    r = s;
#elif REDUCE_KIND == REDUCE_LOGSUM
    GROUP_SUM(s, v);
    r = log(s + offset);
#elif REDUCE_KIND == REDUCE_LOGSUMEXP
    const float m = g[group_first(g, RUNS, 1).x];
    GROUP_SUM(s, exp(v - m));
    r = m + log(s);
#elif REDUCE_KIND == REDUCE_ARGMAX
    r = (float)group_first(g, RUNS, 1).y;
#elif REDUCE_KIND == REDUCE_ARGMIN
    r = (float)group_first(g, RUNS, 0).y;
#endif
    y[j] = scale * r;
}

__kernel void reduce_backward(__global const float* x, __global const float* dy, __global float* dx, REDUCTION_ARGS,
                              const float scale, const float offset, const int count) {
    const int j = GID0;
    if (j >= count) return;
    const int base = reduction_base(j, k0, k1, k2, ks0, ks1, ks2);
    __global const float* g = x + base;
    __global float* d = dx + base;
    const float w = scale * dy[j];
#if REDUCE_KIND == REDUCE_SUM
    GROUP_FOR(d[o] = w)
#elif REDUCE_KIND == REDUCE_MAX
    GROUP_FOR(d[o] = 0.0f)
    d[group_first(g, RUNS, 1).x] = w;
#elif REDUCE_KIND == REDUCE_MIN
    GROUP_FOR(d[o] = 0.0f)
    d[group_first(g, RUNS, 0).x] = w;
#elif REDUCE_KIND == REDUCE_PROD
    // the product of the others, from the non-zero product and the count of zeros
    int zeros = 0;
    float p = 1.0f;
    GROUP_FOR({ const float v = g[o]; if (v == 0.0f) ++zeros; else p *= v; })
    GROUP_FOR({ const float v = g[o]; d[o] = zeros == 0 ? w * p / v : (zeros == 1 && v == 0.0f ? w * p : 0.0f); })
#elif REDUCE_KIND == REDUCE_L1
    GROUP_FOR({ const float v = g[o]; d[o] = v > 0.0f ? w : (v < 0.0f ? -w : 0.0f); })
#elif REDUCE_KIND == REDUCE_L2
    GROUP_SUM(s, v * v);
    const float norm = sqrt(s);
    GROUP_FOR(d[o] = norm > 0.0f ? w * g[o] / norm : 0.0f)
#elif REDUCE_KIND == REDUCE_SUMSQUARE
    GROUP_FOR(d[o] = 2.0f * w * g[o])
#elif REDUCE_KIND == REDUCE_LOGSUM
    GROUP_SUM(s, v);
    const float q = w / (s + offset);
    GROUP_FOR(d[o] = q)
#elif REDUCE_KIND == REDUCE_LOGSUMEXP
    const float m = g[group_first(g, RUNS, 1).x];
    GROUP_SUM(s, exp(v - m));
    const float y = m + log(s);
    GROUP_FOR(d[o] = w * exp(g[o] - y))
#elif REDUCE_KIND == REDUCE_ARGMAX || REDUCE_KIND == REDUCE_ARGMIN
    GROUP_FOR(d[o] = 0.0f)  // no gradient: the host refuses before launching
#endif
}
