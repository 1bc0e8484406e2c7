// Device calibration for the scheduler (Sources/Updraft/Scheduling/OpenCLCalibration.swift):
// three tiny kernels that measure a device's multiply-add rate, its memory bandwidth and the cost
// of launching a kernel. OpenCL C 1.2; nothing here is used for training.

// FMA rate: each work-item runs `iterations` rounds of 8 independent float4 multiply-adds
// (8 chains x 4 lanes x 2 flops = 64 flops a round). The chains are independent so a pipelined
// unit stays busy; `a` and `b` are arguments so the compiler cannot fold the loop, and the sum is
// written out so it cannot drop it. With a = 0.999, b = 0.001 the values stay bounded.
__kernel void calibrate_fma(__global float* out, float a, float b, int iterations) {
    const float seed = (float)get_global_id(0) * 1.0e-6f;
    float4 x0 = (float4)(seed, seed + 0.1f, seed + 0.2f, seed + 0.3f);
    float4 x1 = x0 + 1.0f, x2 = x0 + 2.0f, x3 = x0 + 3.0f;
    float4 x4 = x0 + 4.0f, x5 = x0 + 5.0f, x6 = x0 + 6.0f, x7 = x0 + 7.0f;
    for (int i = 0; i < iterations; ++i) {
        x0 = mad(x0, a, b); x1 = mad(x1, a, b); x2 = mad(x2, a, b); x3 = mad(x3, a, b);
        x4 = mad(x4, a, b); x5 = mad(x5, a, b); x6 = mad(x6, a, b); x7 = mad(x7, a, b);
    }
    const float4 s = (x0 + x1) + (x2 + x3) + (x4 + x5) + (x6 + x7);
    out[get_global_id(0)] = s.x + s.y + s.z + s.w;
}

// Copy bandwidth: y = x over `n` float4 values (reads 16n bytes, writes 16n bytes).
__kernel void calibrate_copy(__global const float4* x, __global float4* y, int n) {
    const int i = get_global_id(0);
    if (i < n) y[i] = x[i];
}

// Launch latency: as little work as a kernel can do.
__kernel void calibrate_empty(__global float* y) {
    if (get_global_id(0) == 0) y[0] = 1.0f;
}
