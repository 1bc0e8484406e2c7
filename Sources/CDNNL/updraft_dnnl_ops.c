// oneDNN pooling and inner product through dlopen: see include/updraft_dnnl_ops.h. The library is
// loaded by updraft_dnnl_load (updraft_dnnl.c); this file resolves the functions it needs from the
// same, already loaded, libdnnl.so.2 and keeps an engine of its own.
#define _GNU_SOURCE
#include "updraft_dnnl_ops.h"
#include "updraft_dnnl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if __has_include(<oneapi/dnnl/dnnl.h>) && !defined(UPDRAFT_WITHOUT_DNNL)
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>

#define OPS_FUNCTIONS(X)                                                                               \
    X(dnnl_engine_create) X(dnnl_stream_create) X(dnnl_stream_wait) X(dnnl_stream_destroy)             \
    X(dnnl_memory_desc_init_by_tag) X(dnnl_memory_desc_get_size) X(dnnl_memory_create)                 \
    X(dnnl_memory_set_data_handle) X(dnnl_memory_destroy) X(dnnl_primitive_desc_create)                \
    X(dnnl_primitive_desc_query) X(dnnl_primitive_desc_query_md) X(dnnl_primitive_desc_destroy)        \
    X(dnnl_primitive_create) X(dnnl_primitive_execute) X(dnnl_primitive_destroy)                       \
    X(dnnl_pooling_v2_forward_desc_init) X(dnnl_pooling_v2_backward_desc_init)                         \
    X(dnnl_inner_product_forward_desc_init) X(dnnl_inner_product_backward_data_desc_init)              \
    X(dnnl_inner_product_backward_weights_desc_init)

#define DECLARE(name) static __typeof__(&name) q_##name;
OPS_FUNCTIONS(DECLARE)
#undef DECLARE

static void (*q_omp_set_num_threads)(int);
static pthread_once_t ops_once = PTHREAD_ONCE_INIT;
static int ops_loaded;
static char ops_error[256];
static dnnl_engine_t ops_engine;

static void load_ops(void) {
    if (!updraft_dnnl_load(ops_error, sizeof ops_error)) return;
    void *library = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!library) { snprintf(ops_error, sizeof ops_error, "libdnnl.so.2 is not loaded"); return; }
#define RESOLVE(name)                                                                                  \
    q_##name = (__typeof__(q_##name))dlsym(library, #name);                                            \
    if (!q_##name) { snprintf(ops_error, sizeof ops_error, "libdnnl.so.2 lacks %s", #name); return; }
    OPS_FUNCTIONS(RESOLVE)
#undef RESOLVE
    q_omp_set_num_threads = (void (*)(int))dlsym(library, "omp_set_num_threads");  // NULL: a sequential build
    if (q_dnnl_engine_create(&ops_engine, dnnl_cpu, 0) != dnnl_success) {
        snprintf(ops_error, sizeof ops_error, "oneDNN: no CPU engine");
        return;
    }
    ops_loaded = 1;
}

/// One primitive (or, for max-pooling backward, a forward and a backward one) with a memory object per
/// argument, pointed at the caller's buffers on each call.
struct updraft_dnnl_op {
    dnnl_primitive_t primitive, forward;  // forward: max pooling backward's argmax pass, else NULL
    dnnl_stream_t stream;
    int args[5];                          // DNNL_ARG_* per slot: a, b, bias, out, out_bias (0: unused)
    dnnl_memory_t memory[5];
    dnnl_memory_t forward_out, workspace; // max backward: oneDNN's output and argmax, in scratch
    size_t forward_out_bytes, scratch_bytes;
    char implementation[64];
};

void updraft_dnnl_op_destroy(updraft_dnnl_op *op) {
    if (!op) return;
    for (int i = 0; i < 5; i++) if (op->memory[i]) q_dnnl_memory_destroy(op->memory[i]);
    if (op->forward_out) q_dnnl_memory_destroy(op->forward_out);
    if (op->workspace) q_dnnl_memory_destroy(op->workspace);
    if (op->primitive) q_dnnl_primitive_destroy(op->primitive);
    if (op->forward) q_dnnl_primitive_destroy(op->forward);
    if (op->stream) q_dnnl_stream_destroy(op->stream);
    free(op);
}

#define CHECK(call, what)                                                                              \
    do {                                                                                               \
        dnnl_status_t status_ = (call);                                                                \
        if (status_ != dnnl_success) {                                                                 \
            snprintf(why, why_capacity, "oneDNN %s failed (status %d)", what, (int)status_);           \
            goto fail;                                                                                 \
        }                                                                                              \
    } while (0)

static updraft_dnnl_op *begin(char *why, size_t why_capacity) {
    pthread_once(&ops_once, load_ops);
    if (!ops_loaded) { snprintf(why, why_capacity, "%s", ops_error); return NULL; }
    updraft_dnnl_op *op = calloc(1, sizeof *op);
    if (!op) snprintf(why, why_capacity, "out of memory");
    return op;
}

/// Binds slot `slot` to argument `arg` with layout `md`.
static int bind(updraft_dnnl_op *op, int slot, int arg, const dnnl_memory_desc_t *md, char *why, size_t why_capacity) {
    op->args[slot] = arg;
    CHECK(q_dnnl_memory_create(&op->memory[slot], md, ops_engine, NULL), "memory_create");
    return 1;
fail:
    return 0;
}

static int finish(updraft_dnnl_op *op, dnnl_primitive_desc_t pd, char *why, size_t why_capacity) {
    const char *name = NULL;
    if (q_dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success && name)
        snprintf(op->implementation, sizeof op->implementation, "%s", name);
    CHECK(q_dnnl_primitive_create(&op->primitive, pd), "primitive_create");
    CHECK(q_dnnl_stream_create(&op->stream, ops_engine, dnnl_stream_default_flags), "stream_create");
    return 1;
fail:
    return 0;
}

/// A create's last step: frees its primitive descriptors (the primitives made from them keep what
/// they need) and, where it failed (`ok` 0), the op. Returns the op, or NULL on failure.
static updraft_dnnl_op *settle(updraft_dnnl_op *op, int ok, dnnl_primitive_desc_t pd, dnnl_primitive_desc_t forward_pd) {
    if (pd) q_dnnl_primitive_desc_destroy(pd);
    if (forward_pd) q_dnnl_primitive_desc_destroy(forward_pd);
    if (ok) return op;
    updraft_dnnl_op_destroy(op);
    return NULL;
}

updraft_dnnl_op *updraft_dnnl_pool_create(const updraft_dnnl_pool_shape *s, int backward, char *why, size_t why_capacity) {
    updraft_dnnl_op *op = begin(why, why_capacity);
    if (!op) return NULL;
    dnnl_primitive_desc_t forward_pd = NULL, pd = NULL;
    dnnl_dims_t src_dims = {s->batch, s->channels, s->in_height, s->in_width};
    dnnl_dims_t dst_dims = {s->batch, s->channels, s->out_height, s->out_width};
    dnnl_dims_t strides = {s->stride_h, s->stride_w}, kernel = {s->kernel_h, s->kernel_w}, dilation = {0, 0};
    dnnl_dims_t pad_l = {s->pad_top, s->pad_left}, pad_r = {s->pad_bottom, s->pad_right};
    dnnl_alg_kind_t alg = s->max ? dnnl_pooling_max
                                 : (s->exclude_padding ? dnnl_pooling_avg_exclude_padding : dnnl_pooling_avg_include_padding);
    dnnl_memory_desc_t src_md, dst_md;
    dnnl_pooling_v2_desc_t forward, back;
    CHECK(q_dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dnnl_f32, dnnl_nchw), "pooling input layout");
    CHECK(q_dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, dnnl_nchw), "pooling output layout");
    int training = backward && s->max;  // only max backward needs the forward's argmax
    CHECK(q_dnnl_pooling_v2_forward_desc_init(&forward, training ? dnnl_forward_training : dnnl_forward_inference, alg,
                                              &src_md, &dst_md, strides, kernel, dilation, pad_l, pad_r),
          "pooling forward descriptor");
    dnnl_status_t status = q_dnnl_primitive_desc_create(&forward_pd, &forward, NULL, ops_engine, NULL);
    if (status != dnnl_success) {
        snprintf(why, why_capacity, "oneDNN has no pooling for this shape (status %d)", (int)status);
        goto fail;
    }
    if (!backward) {
        if (!bind(op, 0, DNNL_ARG_SRC, &src_md, why, why_capacity) || !bind(op, 3, DNNL_ARG_DST, &dst_md, why, why_capacity))
            goto fail;
        if (!finish(op, forward_pd, why, why_capacity)) goto fail;
        q_dnnl_primitive_desc_destroy(forward_pd);
        return op;
    }
    CHECK(q_dnnl_pooling_v2_backward_desc_init(&back, alg, &src_md, &dst_md, strides, kernel, dilation, pad_l, pad_r),
          "pooling backward descriptor");
    status = q_dnnl_primitive_desc_create(&pd, &back, NULL, ops_engine, forward_pd);
    if (status != dnnl_success) {
        snprintf(why, why_capacity, "oneDNN has no pooling backward for this shape (status %d)", (int)status);
        goto fail;
    }
    if (!bind(op, 1, DNNL_ARG_DIFF_DST, &dst_md, why, why_capacity) || !bind(op, 3, DNNL_ARG_DIFF_SRC, &src_md, why, why_capacity))
        goto fail;
    if (training) {
        // x -> (oneDNN's y, argmax) in scratch, then dy and the argmax -> dx.
        const dnnl_memory_desc_t *ws_md = q_dnnl_primitive_desc_query_md(forward_pd, dnnl_query_workspace_md, 0);
        if (!ws_md) { snprintf(why, why_capacity, "oneDNN max pooling gave no workspace"); goto fail; }
        if (!bind(op, 0, DNNL_ARG_SRC, &src_md, why, why_capacity)) goto fail;
        CHECK(q_dnnl_memory_create(&op->forward_out, &dst_md, ops_engine, NULL), "memory_create (output)");
        CHECK(q_dnnl_memory_create(&op->workspace, ws_md, ops_engine, NULL), "memory_create (workspace)");
        op->forward_out_bytes = (q_dnnl_memory_desc_get_size(&dst_md) + 63) / 64 * 64;
        op->scratch_bytes = op->forward_out_bytes + (q_dnnl_memory_desc_get_size(ws_md) + 63) / 64 * 64;
        CHECK(q_dnnl_primitive_create(&op->forward, forward_pd), "primitive_create (forward)");
    }
    if (!finish(op, pd, why, why_capacity)) goto fail;
    return settle(op, 1, pd, forward_pd);
fail:
    return settle(op, 0, pd, forward_pd);
}

updraft_dnnl_op *updraft_dnnl_ip_create(const updraft_dnnl_ip_shape *s, int pass, char *why, size_t why_capacity) {
    updraft_dnnl_op *op = begin(why, why_capacity);
    if (!op) return NULL;
    dnnl_primitive_desc_t forward_pd = NULL, pd = NULL;
    dnnl_dims_t src_dims = {s->batch, s->in_channels}, dst_dims = {s->batch, s->out_channels};
    dnnl_dims_t weight_dims = {s->out_channels, s->in_channels}, bias_dims = {s->out_channels};
    dnnl_memory_desc_t src_md, dst_md, weights_md, bias_md;
    dnnl_inner_product_desc_t forward, back;
    CHECK(q_dnnl_memory_desc_init_by_tag(&src_md, 2, src_dims, dnnl_f32, dnnl_nc), "inner product input layout");
    CHECK(q_dnnl_memory_desc_init_by_tag(&dst_md, 2, dst_dims, dnnl_f32, dnnl_nc), "inner product output layout");
    CHECK(q_dnnl_memory_desc_init_by_tag(&weights_md, 2, weight_dims, dnnl_f32, dnnl_oi), "inner product weights layout");
    CHECK(q_dnnl_memory_desc_init_by_tag(&bias_md, 1, bias_dims, dnnl_f32, dnnl_x), "inner product bias layout");
    const dnnl_memory_desc_t *bias_or_null = s->has_bias ? &bias_md : NULL;
    CHECK(q_dnnl_inner_product_forward_desc_init(&forward, dnnl_forward_training, &src_md, &weights_md, bias_or_null, &dst_md),
          "inner product forward descriptor");
    dnnl_status_t status = q_dnnl_primitive_desc_create(&forward_pd, &forward, NULL, ops_engine, NULL);
    if (status != dnnl_success) {
        snprintf(why, why_capacity, "oneDNN has no inner product for this shape (status %d)", (int)status);
        goto fail;
    }
    int ok;
    switch (pass) {
    case UPDRAFT_DNNL_FORWARD:
        pd = forward_pd;
        forward_pd = NULL;
        ok = bind(op, 0, DNNL_ARG_SRC, &src_md, why, why_capacity) && bind(op, 1, DNNL_ARG_WEIGHTS, &weights_md, why, why_capacity)
            && (!s->has_bias || bind(op, 2, DNNL_ARG_BIAS, &bias_md, why, why_capacity))
            && bind(op, 3, DNNL_ARG_DST, &dst_md, why, why_capacity);
        break;
    case UPDRAFT_DNNL_BACKWARD_DATA:
        CHECK(q_dnnl_inner_product_backward_data_desc_init(&back, &src_md, &weights_md, &dst_md), "inner product backward-data descriptor");
        CHECK(q_dnnl_primitive_desc_create(&pd, &back, NULL, ops_engine, forward_pd), "inner product backward-data");
        ok = bind(op, 0, DNNL_ARG_DIFF_DST, &dst_md, why, why_capacity) && bind(op, 1, DNNL_ARG_WEIGHTS, &weights_md, why, why_capacity)
            && bind(op, 3, DNNL_ARG_DIFF_SRC, &src_md, why, why_capacity);
        break;
    default:
        CHECK(q_dnnl_inner_product_backward_weights_desc_init(&back, &src_md, &weights_md, bias_or_null, &dst_md),
              "inner product backward-weights descriptor");
        CHECK(q_dnnl_primitive_desc_create(&pd, &back, NULL, ops_engine, forward_pd), "inner product backward-weights");
        ok = bind(op, 0, DNNL_ARG_SRC, &src_md, why, why_capacity) && bind(op, 1, DNNL_ARG_DIFF_DST, &dst_md, why, why_capacity)
            && bind(op, 3, DNNL_ARG_DIFF_WEIGHTS, &weights_md, why, why_capacity)
            && (!s->has_bias || bind(op, 4, DNNL_ARG_DIFF_BIAS, &bias_md, why, why_capacity));
        break;
    }
    if (!ok || !finish(op, pd, why, why_capacity)) goto fail;
    return settle(op, 1, pd, forward_pd);
fail:
    return settle(op, 0, pd, forward_pd);
}

int updraft_dnnl_op_execute(updraft_dnnl_op *op, int threads, const float *a, const float *b, const float *bias,
                            float *out, float *out_bias, void *scratch, char *why, size_t why_capacity) {
    if (op->scratch_bytes && !scratch) { snprintf(why, why_capacity, "no scratch for oneDNN's argmax"); return 0; }
    if (q_omp_set_num_threads) q_omp_set_num_threads(threads > 0 ? threads : 1);
    void *handles[5] = {(void *)a, (void *)b, (void *)bias, out, out_bias};
    dnnl_exec_arg_t args[6];
    int count = 0;
    for (int i = 0; i < 5; i++) {
        if (!op->args[i]) continue;
        if (!handles[i]) { snprintf(why, why_capacity, "oneDNN argument %d was not given", op->args[i]); return 0; }
        CHECK(q_dnnl_memory_set_data_handle(op->memory[i], handles[i]), "set_data_handle");
        if (op->forward && op->args[i] == DNNL_ARG_SRC) continue;  // the argmax pass's input, not the backward's
        args[count++] = (dnnl_exec_arg_t){op->args[i], op->memory[i]};
    }
    if (op->forward) {
        CHECK(q_dnnl_memory_set_data_handle(op->forward_out, scratch), "set_data_handle (output)");
        CHECK(q_dnnl_memory_set_data_handle(op->workspace, (char *)scratch + op->forward_out_bytes), "set_data_handle (workspace)");
        dnnl_exec_arg_t forward_args[3] = {{DNNL_ARG_SRC, op->memory[0]}, {DNNL_ARG_DST, op->forward_out},
                                           {DNNL_ARG_WORKSPACE, op->workspace}};
        CHECK(q_dnnl_primitive_execute(op->forward, op->stream, 3, forward_args), "pooling forward (argmax)");
        args[count++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, op->workspace};
    }
    CHECK(q_dnnl_primitive_execute(op->primitive, op->stream, count, args), "primitive_execute");
    CHECK(q_dnnl_stream_wait(op->stream), "stream_wait");
    return 1;
fail:
    return 0;
}

const char *updraft_dnnl_op_implementation(const updraft_dnnl_op *op) { return op ? op->implementation : ""; }

size_t updraft_dnnl_op_scratch_bytes(const updraft_dnnl_op *op) { return op ? op->scratch_bytes : 0; }

#else // no <oneapi/dnnl/dnnl.h> at build time: the engine is absent, and says so.

updraft_dnnl_op *updraft_dnnl_pool_create(const updraft_dnnl_pool_shape *shape, int backward, char *why, size_t why_capacity) {
    (void)shape; (void)backward;
    updraft_dnnl_load(why, why_capacity);
    return NULL;
}

updraft_dnnl_op *updraft_dnnl_ip_create(const updraft_dnnl_ip_shape *shape, int pass, char *why, size_t why_capacity) {
    (void)shape; (void)pass;
    updraft_dnnl_load(why, why_capacity);
    return NULL;
}

int updraft_dnnl_op_execute(updraft_dnnl_op *op, int threads, const float *a, const float *b, const float *bias,
                            float *out, float *out_bias, void *scratch, char *why, size_t why_capacity) {
    (void)op; (void)threads; (void)a; (void)b; (void)bias; (void)out; (void)out_bias; (void)scratch;
    return updraft_dnnl_load(why, why_capacity);
}

const char *updraft_dnnl_op_implementation(const updraft_dnnl_op *op) { (void)op; return ""; }

size_t updraft_dnnl_op_scratch_bytes(const updraft_dnnl_op *op) { (void)op; return 0; }

void updraft_dnnl_op_destroy(updraft_dnnl_op *op) { (void)op; }

#endif
