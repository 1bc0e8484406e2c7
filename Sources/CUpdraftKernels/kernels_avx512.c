// The kernels for AVX-512 F/BW/VL/DQ (16 floats a register). Run only when the dispatcher found
// all four in cpuid and the OS saves the ZMM state.
#if defined(__x86_64__)
#define UPD_SUFFIX avx512
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq"))), apply_to = function)
#include "kernels_body.h"
#pragma clang attribute pop
#endif
