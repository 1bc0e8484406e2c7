// oneDNN (libdnnl.so.2, the v2 C API) as a second CPU convolution engine, loaded with dlopen at run
// time: a host without it still builds and runs Updraft (every call here then reports "unavailable").
// Built against <oneapi/dnnl/dnnl.h> when the header is present; without it the same functions exist
// and `updraft_dnnl_load` says why oneDNN cannot be used.
#ifndef UPDRAFT_DNNL_H
#define UPDRAFT_DNNL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Loads libdnnl.so.2 and resolves every function (once per process; later calls return the first
/// answer). 1 when oneDNN is usable; 0 with the reason in `why` otherwise.
int updraft_dnnl_load(char *why, size_t why_capacity);

/// "major.minor.patch (runtime)" of the loaded library, or "" when none is loaded.
const char *updraft_dnnl_version(void);

/// Caps the instruction sets oneDNN's generated code may use at Updraft's vector level (0 baseline:
/// SSE4.1, oneDNN's lowest; 1 AVX2; 2 AVX-512: no cap), so that forcing a level with
/// UPDRAFT_CPU_LEVEL constrains both engines. Only before the first `updraft_dnnl_load`: later calls
/// change nothing. A DNNL_MAX_CPU_ISA the user set wins.
void updraft_dnnl_limit_level(int level);

/// The instruction set oneDNN generates code for ("avx512_core", "avx2", "sse41", ...), or "" when
/// oneDNN is unavailable.
const char *updraft_dnnl_isa(void);

/// One convolution layer, NCHW fp32 (weights [G, Cout/G, Cin/G, kH, kW] as [Cout, Cin/G, kH, kW]).
typedef struct {
    long batch, in_channels, in_height, in_width, out_channels, out_height, out_width;
    long kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w;
    long pad_top, pad_left, pad_bottom, pad_right, groups;
    int has_bias;
    /// Forward only: floats from one image's output to the next (out_channels * Ho * Wo when the
    /// output is the whole tensor; more when it is a channel slice of a wider one).
    long output_image_stride;
} updraft_dnnl_conv_shape;

enum {
    UPDRAFT_DNNL_FORWARD = 0,          // (src, weights, bias) -> dst
    UPDRAFT_DNNL_BACKWARD_DATA = 1,    // (diff_dst, weights) -> diff_src
    UPDRAFT_DNNL_BACKWARD_WEIGHTS = 2, // (src, diff_dst) -> diff_weights, diff_bias
};

typedef struct updraft_dnnl_conv updraft_dnnl_conv;

/// A primitive for one pass of `shape`, or NULL with the reason in `why` (oneDNN unavailable, or it
/// has no implementation for the shape). `relu` (forward only) fuses max(0, y) after the bias.
/// `blocked` lets oneDNN pick its own (blocked) layouts, with reorders from and to NCHW around the
/// call; otherwise every operand is plain NCHW.
updraft_dnnl_conv *updraft_dnnl_conv_create(const updraft_dnnl_conv_shape *shape, int pass, int relu, int blocked,
                                            char *why, size_t why_capacity);

/// Sets the calling thread's OpenMP thread count. A primitive fixes its work split for the count in
/// effect on the thread that creates it, so call this before `updraft_dnnl_conv_create` (and the
/// pooling and inner-product creators): else a primitive made on a fresh thread splits for every core
/// and runs on all of them, whatever `threads` its execution is given.
void updraft_dnnl_use_threads(int threads);
/// The calling thread's OpenMP thread count (what a primitive created now would split for); 0 without oneDNN.
int updraft_dnnl_max_threads(void);

/// Bytes of scratch `updraft_dnnl_conv_execute` needs for the operands in oneDNN's own layouts (0 when
/// every operand is plain). Primitives run one at a time can share one scratch.
size_t updraft_dnnl_conv_scratch_bytes(const updraft_dnnl_conv *conv);

/// Runs the pass on `threads` OpenMP threads. Forward: a = src, b = weights, bias, out = dst.
/// Backward data: a = diff_dst, b = weights, out = diff_src. Backward weights: a = src, b = diff_dst,
/// out = diff_weights, out_bias = diff_bias (or NULL). `scratch`: `updraft_dnnl_conv_scratch_bytes`
/// bytes, 64-byte aligned. 1 on success, 0 with the reason in `why`.
int updraft_dnnl_conv_execute(updraft_dnnl_conv *conv, int threads, const float *a, const float *b, const float *bias,
                              float *out, float *out_bias, void *scratch, char *why, size_t why_capacity);

/// The implementation oneDNN chose (e.g. "jit:avx2", "gemm:jit"), for profiles and benchmarks.
const char *updraft_dnnl_conv_implementation(const updraft_dnnl_conv *conv);

void updraft_dnnl_conv_destroy(updraft_dnnl_conv *conv);

#ifdef __cplusplus
}
#endif

// Pooling and inner product on the same library.
#include "updraft_dnnl_ops.h"
#endif
