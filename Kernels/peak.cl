// What the device can do at most, measured rather than taken from a datasheet (updraft-bench kernels
// reports every kernel as a fraction of these).
#ifndef PEAK_ITERS
#define PEAK_ITERS 256     // rounds of the FMA loop
#endif

// FMA throughput: each work-item runs 8 independent float4 chains (32 scalar chains: enough
// independent work to keep every FMA pipeline busy), PEAK_ITERS rounds, so
// FLOPs = global size * PEAK_ITERS * 32 * 2. The sum is stored so no chain is optimised away.
__kernel void fma_peak(__global float* out, const float a, const float b) {
    const float s = (float)get_global_id(0) * 1.0e-9f;
    float4 x0 = (float4)(s, s + 1.0f, s + 2.0f, s + 3.0f), x1 = x0 + 4.0f, x2 = x0 + 8.0f, x3 = x0 + 12.0f;
    float4 x4 = x0 + 16.0f, x5 = x0 + 20.0f, x6 = x0 + 24.0f, x7 = x0 + 28.0f;
    const float4 av = (float4)(a), bv = (float4)(b);
    for (int i = 0; i < PEAK_ITERS; i++) {
        x0 = fma(x0, av, bv); x1 = fma(x1, av, bv); x2 = fma(x2, av, bv); x3 = fma(x3, av, bv);
        x4 = fma(x4, av, bv); x5 = fma(x5, av, bv); x6 = fma(x6, av, bv); x7 = fma(x7, av, bv);
    }
    const float4 t = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
    out[get_global_id(0)] = t.x + t.y + t.z + t.w;
}

// Copy bandwidth: dst = src, n4 float4 values; bytes moved = 2 * 16 * n4.
__kernel void copy_peak(__global const float4* src, __global float4* dst, const int n4) {
    const int i = get_global_id(0);
    if (i < n4) dst[i] = src[i];
}
