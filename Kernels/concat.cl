// Concat along channels, forward and backward, as a blocked copy: `blocks` blocks of `blockLength`
// floats, block b read from src[b * srcStride + srcOffset ...] and written to dst[b * dstStride + dstOffset ...].
//   forward, input i:  blocks = N, blockLength = C_i*S, src stride C_i*S, dst stride C*S, dst offset c0*S
//   backward, input i: the same with source and destination swapped.
#include "common.h"

__kernel void copy_blocks(__global const float* src, const int srcStride, const int srcOffset,
                          __global float* dst, const int dstStride, const int dstOffset,
                          const int blockLength, const int count) {
    const int i = GID0;
    if (i >= count) return;
    const int b = i / blockLength, r = i - b * blockLength;
    dst[b * dstStride + dstOffset + r] = src[b * srcStride + srcOffset + r];
}
