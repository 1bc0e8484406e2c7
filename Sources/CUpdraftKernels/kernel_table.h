#ifndef UPDRAFT_KERNEL_TABLE_H
#define UPDRAFT_KERNEL_TABLE_H
// One vector level's kernels (CUpdraftKernels.h documents each); the dispatcher holds one table
// per level and installs one.
#include <stddef.h>
#include <stdint.h>
#include "include/CUpdraftKernels.h"

typedef struct {
    void (*relu_forward)(const float *, float *, ptrdiff_t);
    void (*relu_backward)(const float *, const float *, float *, ptrdiff_t);
    void (*leaky_forward)(const float *, float *, ptrdiff_t, float);
    void (*leaky_backward)(const float *, const float *, float *, ptrdiff_t, float);
    void (*linear_forward)(const float *, float *, ptrdiff_t, float, float);
    void (*clip_forward)(const float *, float *, ptrdiff_t, float, float);
    void (*add)(float *, const float *, ptrdiff_t);
    void (*sgd_step)(float *, const float *, float *, ptrdiff_t, float, float, float);
    void (*adam_step)(float *, const float *, float *, float *, ptrdiff_t, float, float, float, float, float, float, float);
    void (*bytes_to_float_affine)(const uint8_t *, float *, ptrdiff_t, float, float);
    void (*bytes_to_float)(const uint8_t *, float *, ptrdiff_t);
    void (*float_to_half)(const float *, uint16_t *, ptrdiff_t);
    void (*half_to_float)(const uint16_t *, float *, ptrdiff_t);
    void (*gather_strided)(const float *, float *, ptrdiff_t, ptrdiff_t);
    void (*max_pool_planes)(const float *, float *, ptrdiff_t, ptrdiff_t, ptrdiff_t, ptrdiff_t, ptrdiff_t, const ptrdiff_t *,
                            const ptrdiff_t *, const ptrdiff_t *, const ptrdiff_t *, ptrdiff_t, ptrdiff_t, ptrdiff_t,
                            ptrdiff_t, ptrdiff_t, float *);
    void (*conv_small_rows)(const float *, const upd_conv_shape *, const float *, const float *, float *, ptrdiff_t,
                            ptrdiff_t, int, float *);
    void (*tap_sum)(const float *const *, const float *, ptrdiff_t, float *, ptrdiff_t);
} upd_kernel_table;

extern const upd_kernel_table upd_kernel_table_baseline;
#if defined(__x86_64__)
extern const upd_kernel_table upd_kernel_table_avx2;
extern const upd_kernel_table upd_kernel_table_avx512;
#endif
#endif
