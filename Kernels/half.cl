// Rows stored in half precision (the feature cache's fp16 option) with fp32 everywhere else. Only
// vload_half / vstore_half are used, which are core OpenCL C 1.2: no cl_khr_fp16 needed (PoCL on the
// CPU has none). A half buffer holds two halves per float of its size; half row r starts at half
// r * rowLength. `pairs` (source row, destination row) as in concat.cl's copy_rows; 2-D launch: dim 0
// along the row, dim 1 over the pairs. Row starts in 64 bits (arenas may pass 2^31 halves).
// CPU twin: convertRows in Backends/Backend.swift (Swift's Float16 rounds to nearest even, as
// vstore_half does by default).

__kernel void copy_rows_to_half(__global const float* src, __global half* dst, __global const int* pairs,
                                const int rowLength, const int count) {
    const int p = (int)get_global_id(1);
    const size_t i = get_global_id(0);
    if (p >= count || i >= (size_t)rowLength) return;
    const long from = (long)pairs[2 * p] * rowLength, to = (long)pairs[2 * p + 1] * rowLength;
    vstore_half(src[from + (long)i], to + (long)i, dst);
}

__kernel void copy_rows_from_half(__global const half* src, __global float* dst, __global const int* pairs,
                                  const int rowLength, const int count) {
    const int p = (int)get_global_id(1);
    const size_t i = get_global_id(0);
    if (p >= count || i >= (size_t)rowLength) return;
    const long from = (long)pairs[2 * p] * rowLength, to = (long)pairs[2 * p + 1] * rowLength;
    dst[to + (long)i] = vload_half(from + (long)i, src);
}
