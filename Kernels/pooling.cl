// Max and average pooling, forward and backward, including global pooling.
//
// x [N, C, H, W] -> y [N, C, Ho, Wo]. Window (oh, ow) covers rows oh*strideH - padTop ..< + kernelH and
// columns ow*strideW - padLeft ..< + kernelW; only positions inside the input take part.
//   max:     the first maximum in row-major window order; backward routes the whole gradient to it.
//   average: the in-image sum divided by the in-image count (exclude_padding) or by the part of the
//            window inside the padded extent [-padTop, H + padBottom) x [-padLeft, W + padRight).
// A window with no in-image position yields 0 and passes no gradient.
//
// Backward gathers: one work-item per input element sums over the output windows that cover it, in a
// fixed order, so results are deterministic and no atomics are needed. Max backward recomputes the
// window's first maximum from x (it does not trust y).
#include "common.h"
#include "storage.h"

// The geometry, in the order the host passes it after the buffers.
#define POOL_GEOMETRY_ARGS \
    const int H, const int W, const int Ho, const int Wo, const int kH, const int kW, const int sH, const int sW, \
    const int padTop, const int padLeft, const int padBottom, const int padRight

// The in-image part [lo, hi) of window `o` along one axis (empty when hi <= lo).
inline int window_lo(int o, int stride, int pad) { return max(o * stride - pad, 0); }
inline int window_hi(int o, int stride, int pad, int k, int extent) { return min(o * stride - pad + k, extent); }

// Average divisor of window (oh, ow); 0 only for an empty window.
inline int pool_divisor(int oh, int ow, int H, int W, int kH, int kW, int sH, int sW, int padTop, int padLeft,
                        int padBottom, int padRight, int excludePadding) {
    const int h0 = oh * sH - padTop, w0 = ow * sW - padLeft;
    int rows, cols;
    if (excludePadding) {
        rows = min(h0 + kH, H) - max(h0, 0);
        cols = min(w0 + kW, W) - max(w0, 0);
    } else {
        rows = min(h0 + kH, H + padBottom) - max(h0, -padTop);
        cols = min(w0 + kW, W + padRight) - max(w0, -padLeft);
    }
    return max(rows, 0) * max(cols, 0);
}

// One work-item per output element (count = N*C*Ho*Wo). X_HALF / Y_HALF (storage.h): input and
// output stored as halves, compared and summed in fp32.
__kernel void pool_forward(__global const X_T* x, __global Y_T* y, POOL_GEOMETRY_ARGS,
                           const int isMax, const int excludePadding, const int count) {
    const int o = GID0;
    if (o >= count) return;
    const int ow = o % Wo, oh = (o / Wo) % Ho, plane = o / (Wo * Ho);
    const int xp = plane * H * W;
    const int r0 = window_lo(oh, sH, padTop), r1 = window_hi(oh, sH, padTop, kH, H);
    const int c0 = window_lo(ow, sW, padLeft), c1 = window_hi(ow, sW, padLeft, kW, W);
    if (r1 <= r0 || c1 <= c0) { STORE_Y(y, o, 0.0f); return; }
    if (isMax) {
        float best = LOAD_X(x, xp + r0 * W + c0);
        for (int h = r0; h < r1; ++h)
            for (int w = c0; w < c1; ++w) {
                const float v = LOAD_X(x, xp + h * W + w);
                if (v > best) best = v;  // strictly greater: the first maximum wins
            }
        STORE_Y(y, o, best);
    } else {
        float sum = 0.0f;
        for (int h = r0; h < r1; ++h)
            for (int w = c0; w < c1; ++w) sum += LOAD_X(x, xp + h * W + w);
        STORE_Y(y, o, sum / (float)pool_divisor(oh, ow, H, W, kH, kW, sH, sW, padTop, padLeft, padBottom, padRight,
                                                excludePadding));
    }
}

// Whether (ih, iw) is the first maximum of the window [r0, r1) x [c0, c1) of plane xp.
inline bool is_first_max(__global const float* xp, int W, int ih, int iw, int r0, int r1, int c0, int c1) {
    const float v = xp[ih * W + iw];
    for (int h = r0; h < r1; ++h)
        for (int w = c0; w < c1; ++w) {
            const float e = xp[h * W + w];
            const bool before = h < ih || (h == ih && w < iw);
            if (before ? e >= v : e > v) return false;  // an earlier equal or any larger value wins
        }
    return true;
}

// One work-item per input element (count = N*C*H*W): dx from dy over the windows covering it.
__kernel void pool_backward(__global const float* x, __global const float* dy, __global float* dx,
                            POOL_GEOMETRY_ARGS, const int isMax, const int excludePadding, const int count) {
    const int i = GID0;
    if (i >= count) return;
    const int iw = i % W, ih = (i / W) % H, plane = i / (W * H);
    __global const float* xp = x + plane * H * W;
    __global const float* dyp = dy + plane * Ho * Wo;
    // Windows oh with oh*sH - padTop <= ih < oh*sH - padTop + kH, clipped to [0, Ho); same for ow.
    const int hLow = ih + padTop - kH + 1, wLow = iw + padLeft - kW + 1;
    const int oh0 = hLow <= 0 ? 0 : div_up(hLow, sH), oh1 = min(Ho - 1, (ih + padTop) / sH);
    const int ow0 = wLow <= 0 ? 0 : div_up(wLow, sW), ow1 = min(Wo - 1, (iw + padLeft) / sW);
    float sum = 0.0f;
    for (int oh = oh0; oh <= oh1; ++oh) {
        const int r0 = window_lo(oh, sH, padTop), r1 = window_hi(oh, sH, padTop, kH, H);
        for (int ow = ow0; ow <= ow1; ++ow) {
            if (isMax) {
                const int c0 = window_lo(ow, sW, padLeft), c1 = window_hi(ow, sW, padLeft, kW, W);
                if (is_first_max(xp, W, ih, iw, r0, r1, c0, c1)) sum += dyp[oh * Wo + ow];
            } else {
                const int d = pool_divisor(oh, ow, H, W, kH, kW, sH, sW, padTop, padLeft, padBottom, padRight,
                                           excludePadding);
                sum += dyp[oh * Wo + ow] / (float)d;  // d >= 1: the window holds (ih, iw)
            }
        }
    }
    dx[i] = sum;
}

// Global pooling (a window covering the whole plane, no padding, 1x1 output) of planes of `planeSize`
// elements. The max kernels run one work-group per (n, c) plane, reduced in a fixed tree order
// (barriers only in uniform control flow: one kernel per kind).

// The first arg-max of plane xp, computed by the whole work-group (every work-item gets it).
inline int plane_first_argmax(__global const float* xp, const int planeSize, __local float* values,
                              __local int* indices) {
    float best = 0.0f;
    int bestIndex = -1;
    for (int j = (int)get_local_id(0); j < planeSize; j += WG_SIZE)
        if (bestIndex < 0 || xp[j] > best) { best = xp[j]; bestIndex = j; }
    return group_first_argmax(best, bestIndex, values, indices);
}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void global_max_pool_forward(__global const float* x, __global float* y, const int planeSize) {
    __local float values[WG_SIZE];
    __local int indices[WG_SIZE];
    const int plane = (int)get_group_id(0);
    __global const float* xp = x + plane * planeSize;
    const int winner = plane_first_argmax(xp, planeSize, values, indices);
    if (get_local_id(0) == 0) y[plane] = winner < 0 ? 0.0f : xp[winner];
}

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void global_average_pool_forward(__global const float* x, __global float* y, const int planeSize) {
    __local float scratch[WG_SIZE];
    const int plane = (int)get_group_id(0);
    __global const float* xp = x + plane * planeSize;
    float sum = 0.0f;
    for (int j = (int)get_local_id(0); j < planeSize; j += WG_SIZE) sum += xp[j];
    const float total = group_sum(sum, scratch);
    if (get_local_id(0) == 0) y[plane] = total / (float)planeSize;
}

// One work-group per plane writes the whole plane of dx: dy at the first arg-max, 0 elsewhere.
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void global_max_pool_backward(__global const float* x, __global const float* dy, __global float* dx,
                              const int planeSize) {
    __local float values[WG_SIZE];
    __local int indices[WG_SIZE];
    const int plane = (int)get_group_id(0);
    const int winner = plane_first_argmax(x + plane * planeSize, planeSize, values, indices);
    const float g = dy[plane];
    __global float* dxp = dx + plane * planeSize;
    for (int j = (int)get_local_id(0); j < planeSize; j += WG_SIZE) dxp[j] = j == winner ? g : 0.0f;
}

// One work-item per input element (count = planes * planeSize): dx = dy / planeSize.
__kernel void global_average_pool_backward(__global const float* dy, __global float* dx, const int planeSize,
                                           const int count) {
    const int i = GID0;
    if (i < count) dx[i] = dy[i / planeSize] / (float)planeSize;
}
