// The kernels for AVX2 + FMA + F16C (8 floats a register, vcvtps2ph for halves). Run only when
// the dispatcher found all three in cpuid and the OS saves the AVX state.
#if defined(__x86_64__)
#define UPD_SUFFIX avx2
// The direct convolution's block: 4 channels x 16 columns = 8 ymm accumulators (8 spilled the 16 ymm:
// SqueezeNet's conv1 0.80-1.22 against 0.55 ms an image, standalone, this EPYC at the AVX2 level).
#define UPD_CONV_CHANNELS 4
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#include "kernels_body.h"
#pragma clang attribute pop
#endif
