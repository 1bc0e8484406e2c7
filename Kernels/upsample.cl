// Upsample layers (UpsampleLayerParams) with integer factors: x [N, C, H, W] -> y [N, C, sH*H, sW*W].
// mode 0: nearest, y[oh, ow] = x[oh / sH, ow / sW]. mode 1: bilinear on the grid
// g(o) = clamp(o * a + b, 0, in - 1) per axis (the host computes a, b for the LinearUpsampleMode),
// reading floor(g) and floor(g) + 1 (clamped) with weights 1 - f and f.
// Forward: one work-item per output element. Backward: one work-item per input element, summing the
// outputs whose taps reach it (a window of outputs around it, each weighed as the forward did).
#include "common.h"

// The taps of output position o along an axis: i0, i1 and the weight f of i1.
inline void upsample_taps(const int o, const int in, const int scale, const int mode, const float a, const float b,
                          int* i0, int* i1, float* f) {
    if (mode == 0) { *i0 = o / scale; *i1 = *i0; *f = 0.0f; return; }
    const float g = fmin((float)(in - 1), fmax(0.0f, (float)o * a + b));
    const int lo = min((int)floor(g), in - 1);
    *i0 = lo; *i1 = min(lo + 1, in - 1); *f = g - (float)lo;
}

// The weight with which output o reads input i along an axis.
inline float upsample_weight(const int o, const int i, const int in, const int scale, const int mode,
                             const float a, const float b) {
    int i0, i1; float f;
    upsample_taps(o, in, scale, mode, a, b, &i0, &i1, &f);
    return (i0 == i ? 1.0f - f : 0.0f) + (i1 == i ? f : 0.0f);
}

// The outputs [*lo, *hi] that may read input i along an axis.
inline void upsample_readers(const int i, const int in, const int out, const int scale, const int mode,
                             const float a, const float b, int* lo, int* hi) {
    if (mode == 0) { *lo = i * scale; *hi = i * scale + scale - 1; return; }
    if (a <= 0.0f) { *lo = 0; *hi = out - 1; return; }
    *lo = i == 0 ? 0 : max(0, (int)floor(((float)(i - 1) - b) / a) - 1);
    *hi = i == in - 1 ? out - 1 : min(out - 1, (int)ceil(((float)(i + 1) - b) / a) + 1);
}

__kernel void upsample_forward(__global const float* x, __global float* y, const int H, const int W,
                               const int Ho, const int Wo, const int sH, const int sW, const int mode,
                               const float aH, const float bH, const float aW, const float bW, const int count) {
    const int i = GID0;
    if (i >= count) return;
    const int ow = i % Wo, t = i / Wo, oh = t % Ho, plane = t / Ho;
    int h0, h1, w0, w1; float fh, fw;
    upsample_taps(oh, H, sH, mode, aH, bH, &h0, &h1, &fh);
    upsample_taps(ow, W, sW, mode, aW, bW, &w0, &w1, &fw);
    __global const float* p = x + plane * H * W;
    const float top = p[h0 * W + w0] + fw * (p[h0 * W + w1] - p[h0 * W + w0]);
    const float bottom = p[h1 * W + w0] + fw * (p[h1 * W + w1] - p[h1 * W + w0]);
    y[i] = top + fh * (bottom - top);
}

__kernel void upsample_backward(__global const float* dy, __global float* dx, const int H, const int W,
                                const int Ho, const int Wo, const int sH, const int sW, const int mode,
                                const float aH, const float bH, const float aW, const float bW, const int count) {
    const int i = GID0;
    if (i >= count) return;
    const int w = i % W, t = i / W, h = t % H, plane = t / H;
    int ohLo, ohHi, owLo, owHi;
    upsample_readers(h, H, Ho, sH, mode, aH, bH, &ohLo, &ohHi);
    upsample_readers(w, W, Wo, sW, mode, aW, bW, &owLo, &owHi);
    __global const float* d = dy + plane * Ho * Wo;
    float sum = 0.0f;
    for (int oh = ohLo; oh <= ohHi; ++oh) {
        const float wh = upsample_weight(oh, h, H, sH, mode, aH, bH);
        if (wh == 0.0f) continue;
        float row = 0.0f;
        for (int ow = owLo; ow <= owHi; ++ow) row += upsample_weight(ow, w, W, sW, mode, aW, bW) * d[oh * Wo + ow];
        sum += wh * row;
    }
    dx[i] = sum;
}
