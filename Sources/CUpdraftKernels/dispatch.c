// The vector level: what the CPU runs (cpuid, and xgetbv for the OS's register saving), what
// UPDRAFT_CPU_LEVEL asks, and the one table of kernels installed from them on first use.
#include "CUpdraftKernels.h"
#include "kernel_table.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

static const char *const level_names[] = {"baseline", "avx2", "avx512"};
enum { LEVEL_COUNT = 3 };

const char *upd_cpu_level_name(int level) {
    return level >= 0 && level < LEVEL_COUNT ? level_names[level] : NULL;
}

#if defined(__x86_64__)
static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}
#endif

int upd_cpu_supported_level(void) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return UPD_LEVEL_BASELINE;
    const int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!(fma && osxsave && avx && f16c)) return UPD_LEVEL_BASELINE;
    const uint64_t xcr0 = read_xcr0();
    if ((xcr0 & 0x6) != 0x6) return UPD_LEVEL_BASELINE;  // the OS saves XMM and YMM
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return UPD_LEVEL_BASELINE;
    const int avx2 = (b >> 5) & 1;
    if (!avx2) return UPD_LEVEL_BASELINE;
    const int avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1, avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1;
    const int zmm = (xcr0 & 0xe6) == 0xe6;  // and opmask, ZMM0-15 upper halves, ZMM16-31
    if (avx512f && avx512dq && avx512bw && avx512vl && zmm) return UPD_LEVEL_AVX512;
    return UPD_LEVEL_AVX2;
#else
    return UPD_LEVEL_BASELINE;
#endif
}

static const char *const level_features[] = {
    "x86-64 baseline", "AVX2, FMA and F16C", "AVX-512 F, BW, VL and DQ"};

int upd_cpu_resolve(const char *request, int supported, char *warning, size_t capacity) {
    if (warning && capacity > 0) warning[0] = 0;
    if (supported < 0) supported = UPD_LEVEL_BASELINE;
    if (supported >= LEVEL_COUNT) supported = LEVEL_COUNT - 1;
    if (!request || !request[0]) return supported;
    int asked = -1;
    for (int l = 0; l < LEVEL_COUNT; l++) {
        if (strcmp(request, level_names[l]) == 0) asked = l;
    }
    if (asked < 0) {
        if (warning && capacity > 0) {
            snprintf(warning, capacity,
                     "UPDRAFT_CPU_LEVEL=%s is not a vector level (baseline, avx2 or avx512); using %s, the best this CPU has",
                     request, level_names[supported]);
        }
        return supported;
    }
    if (asked > supported) {
        if (warning && capacity > 0) {
            snprintf(warning, capacity,
                     "UPDRAFT_CPU_LEVEL=%s needs %s, which this CPU lacks; using %s, the best it has",
                     request, level_features[asked], level_names[supported]);
        }
        return supported;
    }
    return asked;
}

static const upd_kernel_table *table_for(int level) {
#if defined(__x86_64__)
    if (level == UPD_LEVEL_AVX512) return &upd_kernel_table_avx512;
    if (level == UPD_LEVEL_AVX2) return &upd_kernel_table_avx2;
#endif
    return &upd_kernel_table_baseline;
}

static _Atomic(const upd_kernel_table *) active_table = NULL;
static _Atomic int active_level = UPD_LEVEL_BASELINE;
static char startup_warning[256];
static pthread_once_t startup_once = PTHREAD_ONCE_INIT;

static void install(int level) {
    atomic_store(&active_level, level);
    atomic_store(&active_table, table_for(level));
}

static void startup(void) {
    const int level = upd_cpu_resolve(getenv("UPDRAFT_CPU_LEVEL"), upd_cpu_supported_level(), startup_warning,
                                      sizeof startup_warning);
    if (startup_warning[0]) fprintf(stderr, "warning: %s\n", startup_warning);
    install(level);
}

static inline const upd_kernel_table *kernels(void) {
    const upd_kernel_table *t = atomic_load_explicit(&active_table, memory_order_acquire);
    if (__builtin_expect(t != NULL, 1)) return t;
    pthread_once(&startup_once, startup);
    return atomic_load(&active_table);
}

int upd_cpu_level(void) {
    (void)kernels();
    return atomic_load(&active_level);
}

const char *upd_cpu_level_warning(void) {
    (void)kernels();
    return startup_warning[0] ? startup_warning : NULL;
}

int upd_cpu_force_level(int level) {
    (void)kernels();  // the start-up choice (and its warning) happens first, once
    const int supported = upd_cpu_supported_level();
    if (level < 0) level = UPD_LEVEL_BASELINE;
    if (level > supported) level = supported;
    install(level);
    return level;
}

// MARK: The exported kernels: one indirect call each.

void upd_relu_forward(const float *x, float *y, ptrdiff_t n) { kernels()->relu_forward(x, y, n); }
void upd_relu_backward(const float *v, const float *dy, float *dx, ptrdiff_t n) { kernels()->relu_backward(v, dy, dx, n); }
void upd_leaky_forward(const float *x, float *y, ptrdiff_t n, float a) { kernels()->leaky_forward(x, y, n, a); }
void upd_leaky_backward(const float *v, const float *dy, float *dx, ptrdiff_t n, float a) {
    kernels()->leaky_backward(v, dy, dx, n, a);
}
void upd_linear_forward(const float *x, float *y, ptrdiff_t n, float a, float b) { kernels()->linear_forward(x, y, n, a, b); }
void upd_clip_forward(const float *x, float *y, ptrdiff_t n, float lo, float hi) { kernels()->clip_forward(x, y, n, lo, hi); }
void upd_add(float *y, const float *x, ptrdiff_t n) { kernels()->add(y, x, n); }
void upd_sgd_step(float *w, const float *grad, float *v, ptrdiff_t n, float lr, float momentum, float decay) {
    kernels()->sgd_step(w, grad, v, n, lr, momentum, decay);
}
void upd_adam_step(float *w, const float *grad, float *m, float *v, ptrdiff_t n, float lr, float b1, float b2,
                   float eps, float decay, float inv1, float inv2) {
    kernels()->adam_step(w, grad, m, v, n, lr, b1, b2, eps, decay, inv1, inv2);
}
void upd_bytes_to_float_affine(const uint8_t *x, float *y, ptrdiff_t n, float scale, float shift) {
    kernels()->bytes_to_float_affine(x, y, n, scale, shift);
}
void upd_bytes_to_float(const uint8_t *x, float *y, ptrdiff_t n) { kernels()->bytes_to_float(x, y, n); }
void upd_float_to_half(const float *x, uint16_t *y, ptrdiff_t n) { kernels()->float_to_half(x, y, n); }
void upd_half_to_float(const uint16_t *x, float *y, ptrdiff_t n) { kernels()->half_to_float(x, y, n); }
void upd_max_pool_planes(const float *x, float *y, ptrdiff_t planes, ptrdiff_t h, ptrdiff_t w, ptrdiff_t ho, ptrdiff_t wo,
                         const ptrdiff_t *rlo, const ptrdiff_t *rhi, const ptrdiff_t *clo, const ptrdiff_t *chi,
                         ptrdiff_t interior_lo, ptrdiff_t interior_hi, ptrdiff_t sw, ptrdiff_t kw, ptrdiff_t pl, float *scratch) {
    kernels()->max_pool_planes(x, y, planes, h, w, ho, wo, rlo, rhi, clo, chi, interior_lo, interior_hi, sw, kw, pl, scratch);
}
void upd_gather_strided(const float *x, float *y, ptrdiff_t n, ptrdiff_t stride) { kernels()->gather_strided(x, y, n, stride); }
void upd_tap_sum(const float *const *sources, const float *weights, ptrdiff_t taps, float *out, ptrdiff_t n) {
    kernels()->tap_sum(sources, weights, taps, out, n);
}

void upd_conv_small_rows(const float *x, const upd_conv_shape *s, const float *packed, const float *bias, float *y,
                         ptrdiff_t oy0, ptrdiff_t oy1, int relu, float *scratch) {
    kernels()->conv_small_rows(x, s, packed, bias, y, oy0, oy1, relu, scratch);
}

static ptrdiff_t conv_small_k(const upd_conv_shape *s) { return s->cin * s->kh * s->kw; }
static ptrdiff_t round_up(ptrdiff_t n, ptrdiff_t m) { return (n + m - 1) / m * m; }

ptrdiff_t upd_conv_small_packed_count(const upd_conv_shape *s) { return conv_small_k(s) * round_up(s->cout, 8); }

void upd_conv_small_pack(const float *w, const upd_conv_shape *s, float *packed) {
    ptrdiff_t K = conv_small_k(s), coutp = round_up(s->cout, 8);
    for (ptrdiff_t k = 0; k < K; k++) {
        for (ptrdiff_t c = 0; c < coutp; c++) packed[k * coutp + c] = c < s->cout ? w[c * K + k] : 0.0f;
    }
}

ptrdiff_t upd_conv_small_rows_per_chunk(const upd_conv_shape *s) {
    ptrdiff_t rows = 512 / (s->wo > 0 ? s->wo : 1);
    return rows < 1 ? 1 : rows;
}

ptrdiff_t upd_conv_small_scratch_count(const upd_conv_shape *s) {
    return conv_small_k(s) * round_up(upd_conv_small_rows_per_chunk(s) * s->wo, 16);
}
