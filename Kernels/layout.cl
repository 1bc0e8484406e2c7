// Layout ops: the permuted copy (transpose / permute), forward and backward together: backward is
// the same kernel run with the inverse permutation (TransposeGeometry.inverse).
//
// One work-item per output element i of `count` = N * example. The host passes the simplified
// geometry padded on the outside to 6 axes: d0..d5 the output dimensions (innermost d5), s0..s5 the
// input stride of each output axis (0 for padding). i decomposes into (n, o0..o5); the source is
// n * example + sum_k o_k * s_k.
#include "common.h"

__kernel void transpose(__global const float* x, __global float* y, const int count, const int example,
                        const int d0, const int d1, const int d2, const int d3, const int d4, const int d5,
                        const int s0, const int s1, const int s2, const int s3, const int s4, const int s5) {
    const int i = GID0;
    if (i >= count) return;
    int r = i % example;
    const int n = i / example;
    int src = 0;
    int o = r % d5; r /= d5; src += o * s5;
    o = r % d4; r /= d4; src += o * s4;
    o = r % d3; r /= d3; src += o * s3;
    o = r % d2; r /= d2; src += o * s2;
    o = r % d1; r /= d1; src += o * s1;
    o = r % d0; src += o * s0;
    y[i] = x[n * example + src];
}
