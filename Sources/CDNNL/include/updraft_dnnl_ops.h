// oneDNN (libdnnl.so.2, v2 C API) for the CPU backend's pooling and inner product, next to the
// convolution in updraft_dnnl.h and loaded the same way (dlopen; `updraft_dnnl_load` first). Every
// operand is in Updraft's plain layout (NCHW, [N, C] rows, [Cout, Cin] weights): measured on the bench
// models' shapes, oneDNN's blocked layouts lose more in reorders than they gain here.
#ifndef UPDRAFT_DNNL_OPS_H
#define UPDRAFT_DNNL_OPS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// One pooling, NCHW fp32. `pad_bottom` / `pad_right` reach as far as the last window does (ceil mode
/// included), as oneDNN wants them.
typedef struct {
    long batch, channels, in_height, in_width, out_height, out_width;
    long kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right;
    int max;              // 1 max, 0 average
    int exclude_padding;  // average: divide by the in-image positions (1) or the whole window (0)
} updraft_dnnl_pool_shape;

/// One inner product: x [batch, in_channels], w [out_channels, in_channels], y [batch, out_channels].
typedef struct {
    long batch, in_channels, out_channels;
    int has_bias;
} updraft_dnnl_ip_shape;

typedef struct updraft_dnnl_op updraft_dnnl_op;

/// Pooling forward (`backward` 0) or backward (1), or NULL with the reason in `why`. Max backward
/// runs oneDNN's forward (training, into scratch: its output and argmax workspace) and then its
/// backward, so it needs only x and dy, as Updraft's own pass does.
updraft_dnnl_op *updraft_dnnl_pool_create(const updraft_dnnl_pool_shape *shape, int backward, char *why, size_t why_capacity);

/// Inner product pass UPDRAFT_DNNL_FORWARD / _BACKWARD_DATA / _BACKWARD_WEIGHTS (updraft_dnnl.h), or
/// NULL with the reason in `why`.
updraft_dnnl_op *updraft_dnnl_ip_create(const updraft_dnnl_ip_shape *shape, int pass, char *why, size_t why_capacity);

/// Runs the op on `threads` OpenMP threads. Pooling forward: a = x, out = y. Pooling backward: a = x,
/// b = dy, out = dx. Inner product as the convolution (updraft_dnnl_conv_execute). `scratch`:
/// `updraft_dnnl_op_scratch_bytes` bytes, 64-byte aligned. 1 on success, 0 with the reason in `why`.
int updraft_dnnl_op_execute(updraft_dnnl_op *op, int threads, const float *a, const float *b, const float *bias,
                            float *out, float *out_bias, void *scratch, char *why, size_t why_capacity);

size_t updraft_dnnl_op_scratch_bytes(const updraft_dnnl_op *op);

/// The implementation oneDNN chose ("jit:avx512_core", "x64:gemm:jit", ...).
const char *updraft_dnnl_op_implementation(const updraft_dnnl_op *op);

void updraft_dnnl_op_destroy(updraft_dnnl_op *op);

#ifdef __cplusplus
}
#endif
#endif
