// oneDNN through dlopen: see include/updraft_dnnl.h. Every oneDNN function is resolved with dlsym
// from libdnnl.so.2, so nothing links against it and a host without it loses only this engine.
#define _GNU_SOURCE
#include "updraft_dnnl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void say(char *why, size_t capacity, const char *format, ...) {
    if (!why || capacity == 0) return;
    va_list args;
    va_start(args, format);
    vsnprintf(why, capacity, format, args);
    va_end(args);
}

#if __has_include(<oneapi/dnnl/dnnl.h>) && !defined(UPDRAFT_WITHOUT_DNNL)
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>

#define DNNL_FUNCTIONS(X)                                                                                  \
    X(dnnl_version) X(dnnl_engine_create) X(dnnl_stream_create) X(dnnl_stream_wait) X(dnnl_stream_destroy) \
    X(dnnl_memory_desc_init_by_tag) X(dnnl_memory_desc_init_by_strides) X(dnnl_memory_desc_equal)           \
    X(dnnl_memory_desc_get_size)                                                                           \
    X(dnnl_memory_create) X(dnnl_memory_set_data_handle) X(dnnl_memory_destroy)                             \
    X(dnnl_dilated_convolution_forward_desc_init) X(dnnl_dilated_convolution_backward_data_desc_init)       \
    X(dnnl_dilated_convolution_backward_weights_desc_init) X(dnnl_primitive_desc_create)                    \
    X(dnnl_primitive_desc_query) X(dnnl_primitive_desc_query_md) X(dnnl_primitive_desc_destroy)             \
    X(dnnl_primitive_create) X(dnnl_primitive_execute) X(dnnl_primitive_destroy)                            \
    X(dnnl_reorder_primitive_desc_create) X(dnnl_primitive_attr_create) X(dnnl_primitive_attr_destroy)      \
    X(dnnl_primitive_attr_set_post_ops) X(dnnl_post_ops_create) X(dnnl_post_ops_append_eltwise)             \
    X(dnnl_post_ops_destroy) X(dnnl_set_max_cpu_isa) X(dnnl_get_effective_cpu_isa)

#define DECLARE(name) static __typeof__(&name) p_##name;
DNNL_FUNCTIONS(DECLARE)
#undef DECLARE

static void (*p_omp_set_num_threads)(int);
static int (*p_omp_get_max_threads)(void);
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int loaded;
static char load_error[256];
static char version_string[96];
static dnnl_engine_t engine;
static int limit_level = -1;

void updraft_dnnl_limit_level(int level) { limit_level = level; }

static const char *isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
    }
}

static const char *runtime_name(unsigned runtime) {
    switch (runtime) {
    case DNNL_RUNTIME_SEQ: return "sequential";
    case DNNL_RUNTIME_OMP: return "OpenMP";
    case DNNL_RUNTIME_TBB: return "TBB";
    case DNNL_RUNTIME_THREADPOOL: return "threadpool";
    default: return "unknown runtime";
    }
}

static void load(void) {
    // libgomp reads this when it starts (inside dlopen): idle OpenMP threads then sleep instead of
    // spinning against Updraft's own workers between calls. A value the user set is kept.
    setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
    void *library = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *error = dlerror();
        say(load_error, sizeof load_error, "cannot load libdnnl.so.2 (%s)", error ? error : "not found");
        return;
    }
#define RESOLVE(name)                                                                          \
    p_##name = (__typeof__(p_##name))dlsym(library, #name);                                    \
    if (!p_##name) {                                                                           \
        say(load_error, sizeof load_error, "libdnnl.so.2 lacks %s (not the oneDNN 2.x C API)", #name); \
        return;                                                                                \
    }
    DNNL_FUNCTIONS(RESOLVE)
#undef RESOLVE
    const dnnl_version_t *v = p_dnnl_version();
    if (v->major != 2) {
        say(load_error, sizeof load_error, "libdnnl.so.2 is oneDNN %d.%d, not 2.x", v->major, v->minor);
        return;
    }
    snprintf(version_string, sizeof version_string, "%d.%d.%d (%s)", v->major, v->minor, v->patch,
             runtime_name(v->cpu_runtime));
    if (v->cpu_runtime == DNNL_RUNTIME_OMP) {
        p_omp_set_num_threads = (void (*)(int))dlsym(library, "omp_set_num_threads");
        p_omp_get_max_threads = (int (*)(void))dlsym(library, "omp_get_max_threads");
        if (!p_omp_set_num_threads) {
            say(load_error, sizeof load_error, "oneDNN %s: omp_set_num_threads not found", version_string);
            return;
        }
    } else if (v->cpu_runtime != DNNL_RUNTIME_SEQ) {
        // TBB or a threadpool build would run a pool of its own next to Updraft's workers.
        say(load_error, sizeof load_error, "oneDNN %s: only OpenMP and sequential builds are supported", version_string);
        return;
    }
    // Before anything is generated: the cap holds for the process.
    if (limit_level == 0 || limit_level == 1) {
        const char *user = getenv("DNNL_MAX_CPU_ISA");
        if (!user || !*user) p_dnnl_set_max_cpu_isa(limit_level == 0 ? dnnl_cpu_isa_sse41 : dnnl_cpu_isa_avx2);
    }
    dnnl_status_t status = p_dnnl_engine_create(&engine, dnnl_cpu, 0);
    if (status != dnnl_success) {
        say(load_error, sizeof load_error, "oneDNN %s: no CPU engine (status %d)", version_string, (int)status);
        return;
    }
    loaded = 1;
}

int updraft_dnnl_load(char *why, size_t why_capacity) {
    pthread_once(&load_once, load);
    if (!loaded) say(why, why_capacity, "%s", load_error);
    return loaded;
}

const char *updraft_dnnl_version(void) { return loaded ? version_string : ""; }

const char *updraft_dnnl_isa(void) { return loaded ? isa_name(p_dnnl_get_effective_cpu_isa()) : ""; }

/// One operand: the user's plain memory, and when oneDNN wants another layout, its own memory (placed
/// in the caller's scratch at `offset` on each call) and the reorder between the two (user -> inner for
/// inputs, inner -> user for outputs).
typedef struct {
    dnnl_memory_t user, inner;
    dnnl_primitive_t reorder;
    int arg, output;
    size_t offset;
} operand;

struct updraft_dnnl_conv {
    dnnl_primitive_t primitive;
    dnnl_stream_t stream;
    operand operands[3];
    dnnl_memory_t bias;
    int bias_arg;
    size_t scratch_bytes;
    char implementation[64];
};

void updraft_dnnl_conv_destroy(updraft_dnnl_conv *c) {
    if (!c) return;
    for (int i = 0; i < 3; i++) {
        operand *o = &c->operands[i];
        if (o->reorder) p_dnnl_primitive_destroy(o->reorder);
        if (o->inner) p_dnnl_memory_destroy(o->inner);
        if (o->user) p_dnnl_memory_destroy(o->user);
    }
    if (c->bias) p_dnnl_memory_destroy(c->bias);
    if (c->primitive) p_dnnl_primitive_destroy(c->primitive);
    if (c->stream) p_dnnl_stream_destroy(c->stream);
    free(c);
}

#define CHECK(call, what)                                                                         \
    do {                                                                                          \
        dnnl_status_t status_ = (call);                                                           \
        if (status_ != dnnl_success) {                                                            \
            say(why, why_capacity, "oneDNN %s failed (status %d)", what, (int)status_);           \
            goto fail;                                                                            \
        }                                                                                         \
    } while (0)

static int make_operand(updraft_dnnl_conv *c, operand *o, const dnnl_memory_desc_t *user_md, const_dnnl_primitive_desc_t pd,
                        dnnl_query_t query, int arg, int output, char *why, size_t why_capacity) {
    dnnl_primitive_desc_t reorder_pd = NULL;
    o->arg = arg;
    o->output = output;
    CHECK(p_dnnl_memory_create(&o->user, user_md, engine, NULL), "memory_create");
    const dnnl_memory_desc_t *inner_md = p_dnnl_primitive_desc_query_md(pd, query, 0);
    if (!inner_md) { say(why, why_capacity, "oneDNN gave no layout for argument %d", arg); return 0; }
    if (p_dnnl_memory_desc_equal(inner_md, user_md)) return 1;
    CHECK(p_dnnl_memory_create(&o->inner, inner_md, engine, NULL), "memory_create (layout)");
    o->offset = c->scratch_bytes;
    c->scratch_bytes += (p_dnnl_memory_desc_get_size(inner_md) + 63) / 64 * 64;
    if (output) {
        CHECK(p_dnnl_reorder_primitive_desc_create(&reorder_pd, inner_md, engine, user_md, engine, NULL), "reorder");
    } else {
        CHECK(p_dnnl_reorder_primitive_desc_create(&reorder_pd, user_md, engine, inner_md, engine, NULL), "reorder");
    }
    CHECK(p_dnnl_primitive_create(&o->reorder, reorder_pd), "reorder primitive_create");
    p_dnnl_primitive_desc_destroy(reorder_pd);
    return 1;
fail:
    if (reorder_pd) p_dnnl_primitive_desc_destroy(reorder_pd);
    return 0;
}

updraft_dnnl_conv *updraft_dnnl_conv_create(const updraft_dnnl_conv_shape *s, int pass, int relu, int blocked,
                                            char *why, size_t why_capacity) {
    if (!updraft_dnnl_load(why, why_capacity)) return NULL;
    updraft_dnnl_conv *c = calloc(1, sizeof *c);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post_ops = NULL;
    dnnl_primitive_desc_t forward_pd = NULL, pd = NULL;
    if (!c) { say(why, why_capacity, "out of memory"); return NULL; }
    const long G = s->groups;
    dnnl_dims_t src_dims = {s->batch, s->in_channels, s->in_height, s->in_width};
    dnnl_dims_t dst_dims = {s->batch, s->out_channels, s->out_height, s->out_width};
    long plane = s->out_height * s->out_width;
    long image = pass == UPDRAFT_DNNL_FORWARD ? s->output_image_stride : s->out_channels * plane;
    dnnl_dims_t dst_strides = {image, plane, s->out_width, 1};
    dnnl_dims_t weight_dims = {G, s->out_channels / G, s->in_channels / G, s->kernel_h, s->kernel_w};
    dnnl_dims_t bias_dims = {s->out_channels};
    dnnl_dims_t strides = {s->stride_h, s->stride_w};
    dnnl_dims_t dilates = {s->dilation_h - 1, s->dilation_w - 1};
    dnnl_dims_t pad_l = {s->pad_top, s->pad_left}, pad_r = {s->pad_bottom, s->pad_right};
    dnnl_memory_desc_t src_md, dst_md, weights_md, bias_md, any_src, any_dst, any_weights;
    const int grouped = G > 1;
    CHECK(p_dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dnnl_f32, dnnl_nchw), "source layout");
    CHECK(p_dnnl_memory_desc_init_by_strides(&dst_md, 4, dst_dims, dnnl_f32, dst_strides), "output layout");
    CHECK(p_dnnl_memory_desc_init_by_tag(&weights_md, grouped ? 5 : 4, grouped ? weight_dims : weight_dims + 1, dnnl_f32,
                                         grouped ? dnnl_goihw : dnnl_oihw), "weights layout");
    CHECK(p_dnnl_memory_desc_init_by_tag(&bias_md, 1, bias_dims, dnnl_f32, dnnl_x), "bias layout");
    any_src = src_md; any_dst = dst_md; any_weights = weights_md;
    if (blocked) {
        CHECK(p_dnnl_memory_desc_init_by_tag(&any_src, 4, src_dims, dnnl_f32, dnnl_format_tag_any), "source layout");
        CHECK(p_dnnl_memory_desc_init_by_tag(&any_dst, 4, dst_dims, dnnl_f32, dnnl_format_tag_any), "output layout");
        CHECK(p_dnnl_memory_desc_init_by_tag(&any_weights, grouped ? 5 : 4, grouped ? weight_dims : weight_dims + 1,
                                             dnnl_f32, dnnl_format_tag_any), "weights layout");
    }
    const dnnl_memory_desc_t *bias_or_null = s->has_bias ? &bias_md : NULL;
    dnnl_convolution_desc_t forward, backward;
    // The forward pass lets oneDNN choose its algorithm: on AVX-512 it takes its fused Winograd
    // F(4x4, 3x3) (jit_wino_4x3) for the 3x3 stride-1 shapes it judges worth it, the direct
    // convolution elsewhere. `updraft-bench cpu-conv --batch 64 --threads 1`, ms: ResNet-18's 64@56 and
    // 512@7 136.6 and 108.9 with the direct algorithm (then on both cores: see updraft_dnnl_use_threads)
    // -> 61.6 and 57.1 on one core (Updraft's F(4x4) 66.0, 74.2); SqueezeNet's 16-channel expand3x3 24.0
    // (own F(4x4) 27.9). The backward passes (and the forward hint they are created with) keep direct.
    const dnnl_alg_kind_t algorithm = pass == UPDRAFT_DNNL_FORWARD ? dnnl_convolution_auto : dnnl_convolution_direct;
    CHECK(p_dnnl_dilated_convolution_forward_desc_init(&forward, dnnl_forward_training, algorithm, &any_src,
                                                       &any_weights, bias_or_null, &any_dst, strides, dilates, pad_l, pad_r),
          "convolution forward descriptor");
    CHECK(p_dnnl_primitive_attr_create(&attr), "attributes");
    if (relu && pass == UPDRAFT_DNNL_FORWARD) {
        CHECK(p_dnnl_post_ops_create(&post_ops), "post-ops");
        CHECK(p_dnnl_post_ops_append_eltwise(post_ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f), "ReLU post-op");
        CHECK(p_dnnl_primitive_attr_set_post_ops(attr, post_ops), "post-ops");
    }
    dnnl_status_t status = p_dnnl_primitive_desc_create(&forward_pd, &forward, attr, engine, NULL);
    if (status != dnnl_success) {
        say(why, why_capacity, "oneDNN has no forward convolution for this shape (status %d)", (int)status);
        goto fail;
    }
    if (pass == UPDRAFT_DNNL_FORWARD) {
        pd = forward_pd;
        forward_pd = NULL;
    } else {
        if (pass == UPDRAFT_DNNL_BACKWARD_DATA) {
            CHECK(p_dnnl_dilated_convolution_backward_data_desc_init(&backward, dnnl_convolution_direct, &any_src, &any_weights,
                                                                     &any_dst, strides, dilates, pad_l, pad_r),
                  "convolution backward-data descriptor");
        } else {
            CHECK(p_dnnl_dilated_convolution_backward_weights_desc_init(&backward, dnnl_convolution_direct, &any_src,
                                                                        &any_weights, bias_or_null, &any_dst, strides,
                                                                        dilates, pad_l, pad_r),
                  "convolution backward-weights descriptor");
        }
        status = p_dnnl_primitive_desc_create(&pd, &backward, NULL, engine, forward_pd);
        if (status != dnnl_success) {
            say(why, why_capacity, "oneDNN has no %s convolution for this shape (status %d)",
                pass == UPDRAFT_DNNL_BACKWARD_DATA ? "backward-data" : "backward-weights", (int)status);
            goto fail;
        }
    }
    const char *name = NULL;
    if (p_dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success && name)
        snprintf(c->implementation, sizeof c->implementation, "%s", name);
    int ok;
    switch (pass) {
    case UPDRAFT_DNNL_FORWARD:
        ok = make_operand(c, &c->operands[0], &src_md, pd, dnnl_query_src_md, DNNL_ARG_SRC, 0, why, why_capacity)
            && make_operand(c, &c->operands[1], &weights_md, pd, dnnl_query_weights_md, DNNL_ARG_WEIGHTS, 0, why, why_capacity)
            && make_operand(c, &c->operands[2], &dst_md, pd, dnnl_query_dst_md, DNNL_ARG_DST, 1, why, why_capacity);
        c->bias_arg = DNNL_ARG_BIAS;
        break;
    case UPDRAFT_DNNL_BACKWARD_DATA:
        ok = make_operand(c, &c->operands[0], &dst_md, pd, dnnl_query_diff_dst_md, DNNL_ARG_DIFF_DST, 0, why, why_capacity)
            && make_operand(c, &c->operands[1], &weights_md, pd, dnnl_query_weights_md, DNNL_ARG_WEIGHTS, 0, why, why_capacity)
            && make_operand(c, &c->operands[2], &src_md, pd, dnnl_query_diff_src_md, DNNL_ARG_DIFF_SRC, 1, why, why_capacity);
        break;
    default:
        ok = make_operand(c, &c->operands[0], &src_md, pd, dnnl_query_src_md, DNNL_ARG_SRC, 0, why, why_capacity)
            && make_operand(c, &c->operands[1], &dst_md, pd, dnnl_query_diff_dst_md, DNNL_ARG_DIFF_DST, 0, why, why_capacity)
            && make_operand(c, &c->operands[2], &weights_md, pd, dnnl_query_diff_weights_md, DNNL_ARG_DIFF_WEIGHTS, 1, why,
                            why_capacity);
        c->bias_arg = DNNL_ARG_DIFF_BIAS;
        break;
    }
    if (!ok) goto fail;
    if (s->has_bias && pass != UPDRAFT_DNNL_BACKWARD_DATA)
        CHECK(p_dnnl_memory_create(&c->bias, &bias_md, engine, NULL), "memory_create (bias)");
    CHECK(p_dnnl_primitive_create(&c->primitive, pd), "primitive_create");
    CHECK(p_dnnl_stream_create(&c->stream, engine, dnnl_stream_default_flags), "stream_create");
    p_dnnl_primitive_desc_destroy(pd);
    if (post_ops) p_dnnl_post_ops_destroy(post_ops);
    p_dnnl_primitive_attr_destroy(attr);
    return c;
fail:
    if (pd) p_dnnl_primitive_desc_destroy(pd);
    if (forward_pd) p_dnnl_primitive_desc_destroy(forward_pd);
    if (post_ops) p_dnnl_post_ops_destroy(post_ops);
    if (attr) p_dnnl_primitive_attr_destroy(attr);
    updraft_dnnl_conv_destroy(c);
    return NULL;
}

static int run_reorder(updraft_dnnl_conv *c, const operand *o, char *why, size_t why_capacity) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, o->output ? o->inner : o->user}, {DNNL_ARG_TO, o->output ? o->user : o->inner}};
    CHECK(p_dnnl_primitive_execute(o->reorder, c->stream, 2, args), "reorder");
    return 1;
fail:
    return 0;
}

void updraft_dnnl_use_threads(int threads) {
    char why[8];
    if (updraft_dnnl_load(why, sizeof why) && p_omp_set_num_threads) p_omp_set_num_threads(threads > 0 ? threads : 1);
}

int updraft_dnnl_max_threads(void) {
    char why[8];
    return updraft_dnnl_load(why, sizeof why) && p_omp_get_max_threads ? p_omp_get_max_threads() : 0;
}

int updraft_dnnl_conv_execute(updraft_dnnl_conv *c, int threads, const float *a, const float *b, const float *bias,
                              float *out, float *out_bias, void *scratch, char *why, size_t why_capacity) {
    if (c->scratch_bytes && !scratch) { say(why, why_capacity, "no scratch for oneDNN's layouts"); return 0; }
    updraft_dnnl_use_threads(threads);
    void *handles[3] = {(void *)a, (void *)b, out};
    dnnl_exec_arg_t args[4];
    int count = 0;
    for (int i = 0; i < 3; i++) {
        operand *o = &c->operands[i];
        CHECK(p_dnnl_memory_set_data_handle(o->user, handles[i]), "set_data_handle");
        if (o->inner) CHECK(p_dnnl_memory_set_data_handle(o->inner, (char *)scratch + o->offset), "set_data_handle (layout)");
        if (o->reorder && !o->output && !run_reorder(c, o, why, why_capacity)) return 0;
        args[count++] = (dnnl_exec_arg_t){o->arg, o->inner ? o->inner : o->user};
    }
    if (c->bias) {
        void *handle = c->bias_arg == DNNL_ARG_BIAS ? (void *)bias : out_bias;
        if (!handle) { say(why, why_capacity, "the convolution has a bias but none was given"); return 0; }
        CHECK(p_dnnl_memory_set_data_handle(c->bias, handle), "set_data_handle (bias)");
        args[count++] = (dnnl_exec_arg_t){c->bias_arg, c->bias};
    }
    CHECK(p_dnnl_primitive_execute(c->primitive, c->stream, count, args), "convolution");
    if (c->operands[2].reorder && !run_reorder(c, &c->operands[2], why, why_capacity)) return 0;
    CHECK(p_dnnl_stream_wait(c->stream), "stream_wait");
    return 1;
fail:
    return 0;
}

const char *updraft_dnnl_conv_implementation(const updraft_dnnl_conv *c) { return c ? c->implementation : ""; }

size_t updraft_dnnl_conv_scratch_bytes(const updraft_dnnl_conv *c) { return c ? c->scratch_bytes : 0; }

#else // no <oneapi/dnnl/dnnl.h> at build time: the engine is absent, and says so.

int updraft_dnnl_load(char *why, size_t why_capacity) {
    say(why, why_capacity, "built without oneDNN's header (install libdnnl-dev and rebuild)");
    return 0;
}

const char *updraft_dnnl_version(void) { return ""; }

void updraft_dnnl_limit_level(int level) { (void)level; }

const char *updraft_dnnl_isa(void) { return ""; }

updraft_dnnl_conv *updraft_dnnl_conv_create(const updraft_dnnl_conv_shape *shape, int pass, int relu, int blocked,
                                            char *why, size_t why_capacity) {
    (void)shape; (void)pass; (void)relu; (void)blocked;
    updraft_dnnl_load(why, why_capacity);
    return NULL;
}

int updraft_dnnl_conv_execute(updraft_dnnl_conv *conv, int threads, const float *a, const float *b, const float *bias,
                              float *out, float *out_bias, void *scratch, char *why, size_t why_capacity) {
    (void)conv; (void)threads; (void)a; (void)b; (void)bias; (void)out; (void)out_bias; (void)scratch;
    return updraft_dnnl_load(why, why_capacity);
}

void updraft_dnnl_use_threads(int threads) { (void)threads; }

int updraft_dnnl_max_threads(void) { return 0; }

const char *updraft_dnnl_conv_implementation(const updraft_dnnl_conv *conv) { (void)conv; return ""; }

size_t updraft_dnnl_conv_scratch_bytes(const updraft_dnnl_conv *conv) { (void)conv; return 0; }

void updraft_dnnl_conv_destroy(updraft_dnnl_conv *conv) { (void)conv; }

#endif
