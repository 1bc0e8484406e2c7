// k-NN candidates (Backends/CPU/CPUNeighborSearch.swift, OpenCLBackend+Neighbors.swift): after a
// batch's dot products with a block of samples, the samples each query must still look at. One
// work-item per (query r, sample j): with a = keep·‖x_j‖² (rounded down on the host) and d the dot
// product, the sample is a candidate when a − 2d, less the two float roundings of that expression,
// is at most the query's limit (rounded up on the host; +inf until it has k neighbours). Passing
// samples are appended to the query's list with an atomic counter; a count above `capacity` tells
// the host the list is incomplete (it then filters that query's row itself). The order of a list is
// not fixed; the host measures every candidate exactly, so the answer is.
#include "common.h"

__kernel void neighbor_candidates(__global const float* dots, __global const float* scaled_norms,
                                  __global const float* limits, const int rows, const int n, const int capacity,
                                  volatile __global int* counts, __global int* indices) {
    const int i = get_global_id(0);
    if (i >= rows * n) return;
    const int r = i / n, j = i - r * n;
    const float d = dots[i];
    const float a = scaled_norms[j];
    const float v = a - 2.0f * d;
    const float slack = 4.0f * FLT_EPSILON * (fabs(a) + 2.0f * fabs(d));
    if (v - slack <= limits[r]) {
        const int at = atomic_inc(&counts[r]);
        if (at < capacity) indices[r * capacity + at] = j;
    }
}
