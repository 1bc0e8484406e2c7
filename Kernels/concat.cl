// Concat along channels, forward and backward, as a blocked copy: `blocks` blocks of `blockLength`
// floats, block b read from src[b * srcStride + srcOffset ...] and written to dst[b * dstStride + dstOffset ...].
//   forward, input i:  blocks = N, blockLength = C_i*S, src stride C_i*S, dst stride C*S, dst offset c0*S
//   backward, input i: the same with source and destination swapped.
// Row gathers and scatters (Backend.copyRows) follow at the end.
#include "common.h"

__kernel void copy_blocks(__global const float* src, const int srcStride, const int srcOffset,
                          __global float* dst, const int dstStride, const int dstOffset,
                          const int blockLength, const int count) {
    const int i = GID0;
    if (i >= count) return;
    const int b = i / blockLength, r = i - b * blockLength;
    dst[b * dstStride + dstOffset + r] = src[b * srcStride + srcOffset + r];
}

// Row gather/scatter (Backend.copyRows): both buffers are rows of `rowLength` floats, and pair p of
// `pairs` (source row, destination row; `count` pairs) copies one row. 2-D launch: dim 0 walks along
// the row, dim 1 over the pairs, so a whole batch of rows is one launch. Row starts are computed in
// 64 bits: a cache arena may hold more than 2^31 floats (the host checks rows and lengths fit an int).
__kernel void copy_rows(__global const float* src, __global float* dst, __global const int* pairs,
                        const int rowLength, const int count) {
    const int p = (int)get_global_id(1);
    const size_t i = get_global_id(0);
    if (p >= count || i >= (size_t)rowLength) return;
    const long from = (long)pairs[2 * p] * rowLength, to = (long)pairs[2 * p + 1] * rowLength;
    dst[to + (long)i] = src[from + (long)i];
}

// copy_rows for rowLength % 4 == 0, one float4 per work-item: `rowLength4` = rowLength / 4. Every
// row then starts 16-byte aligned (buffers start at the device's base alignment, at least 16 bytes).
__kernel void copy_rows4(__global const float4* src, __global float4* dst, __global const int* pairs,
                         const int rowLength4, const int count) {
    const int p = (int)get_global_id(1);
    const size_t i = get_global_id(0);
    if (p >= count || i >= (size_t)rowLength4) return;
    const long from = (long)pairs[2 * p] * rowLength4, to = (long)pairs[2 * p + 1] * rowLength4;
    dst[to + (long)i] = src[from + (long)i];
}
