// Padding layers (PaddingLayerParams): x [N, C, H, W] -> y [N, C, H + top + bottom, W + left + right].
// Modes: 0 constant (`value` in the border), 1 reflection (mirrored about the edge, which is not
// repeated; amounts below the axis size), 2 replication (the edge repeated).
// Forward: one work-item per output element. Backward: one work-item per input element, which sums
// the output positions that read it (no atomics, one write per element).
#include "common.h"

// The input index that padded position o (shifted by the leading amount) reads along an axis of
// `size`, or -1 for the constant border.
inline int pad_source(const int o, const int size, const int mode) {
    if (o >= 0 && o < size) return o;
    if (mode == 0) return -1;
    if (mode == 2) return o < 0 ? 0 : size - 1;
    return o < 0 ? -o : 2 * (size - 1) - o;
}

// The padded positions that read input index i along an axis, as up to 3 ranges [lo[k], hi[k]).
inline int pad_readers(const int i, const int size, const int before, const int after, const int mode,
                       int* lo, int* hi) {
    const int o = i + before;
    if (mode == 2) {
        lo[0] = i == 0 ? 0 : o;
        hi[0] = i == size - 1 ? size + before + after : o + 1;
        return 1;
    }
    int n = 1;
    lo[0] = o; hi[0] = o + 1;
    if (mode == 1) {
        if (i >= 1 && i <= before) { lo[n] = before - i; hi[n] = before - i + 1; ++n; }
        const int r = 2 * (size - 1) - i;  // the mirror image past the far edge
        if (i <= size - 2 && r < size + after) { lo[n] = r + before; hi[n] = r + before + 1; ++n; }
    }
    return n;
}

__kernel void padding_forward(__global const float* x, __global float* y, const int H, const int W,
                              const int Ho, const int Wo, const int top, const int left, const int mode,
                              const float value, const int count) {
    const int i = GID0;
    if (i >= count) return;
    const int ow = i % Wo, t = i / Wo, oh = t % Ho, plane = t / Ho;
    const int h = pad_source(oh - top, H, mode), w = pad_source(ow - left, W, mode);
    y[i] = (h < 0 || w < 0) ? value : x[(plane * H + h) * W + w];
}

__kernel void padding_backward(__global const float* dy, __global float* dx, const int H, const int W,
                               const int Ho, const int Wo, const int top, const int bottom, const int left,
                               const int right, const int mode, const int count) {
    const int i = GID0;
    if (i >= count) return;
    const int w = i % W, t = i / W, h = t % H, plane = t / H;
    int hl[3], hh[3], wl[3], wh[3];
    const int nh = pad_readers(h, H, top, bottom, mode, hl, hh);
    const int nw = pad_readers(w, W, left, right, mode, wl, wh);
    __global const float* d = dy + plane * Ho * Wo;
    float sum = 0.0f;
    for (int a = 0; a < nh; ++a)
        for (int oh = hl[a]; oh < hh[a]; ++oh)
            for (int b = 0; b < nw; ++b)
                for (int ow = wl[b]; ow < wh[b]; ++ow) sum += d[oh * Wo + ow];
    dx[i] = sum;
}
