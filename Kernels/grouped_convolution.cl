// Depthwise and grouped convolutions with few input channels per group, computed directly (the
// implicit-GEMM kernels of convolution.cl would run [Mg, Cg*KH*KW] products far too thin to fill a tile).
//
// x [N, Cin, H, W], w [Cout, Cg, KH, KW], y [N, Cout, Ho, Wo]; Cg = Cin/groups, Mg = Cout/groups; output
// channel co belongs to group co / Mg and reads input channels (co / Mg) * Cg ..< + Cg. Output (oh, ow)
// reads input (oh*SH - PT + kh*DH, ow*SW - PL + kw*DW); outside the input is zero.
//   forward           one work-item per output value: bias, then the Cg*KH*KW taps in order
//   backward data     one work-item per input value, gathering over the group's Mg output channels and
//                     the taps whose window covers it (no scatter, no atomics)
//   backward weights  one work-group per weight, its work-items striding over (n, oh, ow) and summed by
//                     group_sum's fixed tree: deterministic
// The host runs the bias gradient with the GEMM path's reduction, and any activation after forward.
#include "common.h"

#define GCONV_ARGS \
    const int Cin, const int H, const int W, const int Cout, const int Ho, const int Wo, \
    const int KH, const int KW, const int SH, const int SW, const int DH, const int DW, \
    const int PT, const int PL, const int groups

// y[n, yOffset + co, oh, ow] in a tensor of yChannels channels per image (a channel slice of a concat).
__kernel void grouped_conv_forward(__global const float* x, __global const float* w, __global const float* bias,
                                   const int hasBias, __global float* y, const int yOffset, const int yChannels,
                                   const int count, GCONV_ARGS) {
    const int o = GID0;
    if (o >= count) return;
    const int ow = o % Wo, oh = (o / Wo) % Ho, co = (o / (Wo * Ho)) % Cout, n = o / (Wo * Ho * Cout);
    const int Cg = Cin / groups, Mg = Cout / groups, grp = co / Mg;
    const int ih0 = oh * SH - PT, iw0 = ow * SW - PL;
    float acc = hasBias ? bias[co] : 0.0f;
    for (int c = 0; c < Cg; ++c) {
        __global const float* xp = x + (n * Cin + grp * Cg + c) * H * W;
        __global const float* wp = w + (co * Cg + c) * KH * KW;
        for (int kh = 0; kh < KH; ++kh) {
            const int ih = ih0 + kh * DH;
            if ((uint)ih >= (uint)H) continue;
            for (int kw = 0; kw < KW; ++kw) {
                const int iw = iw0 + kw * DW;
                if ((uint)iw < (uint)W) acc += wp[kh * KW + kw] * xp[ih * W + iw];
            }
        }
    }
    y[((n * yChannels + yOffset + co) * Ho + oh) * Wo + ow] = acc;
}

// dx [N, Cin, H, W] from dy and w (count = N*Cin*H*W).
__kernel void grouped_conv_backward_data(__global const float* dy, __global const float* w, __global float* dx,
                                         const int count, GCONV_ARGS) {
    const int o = GID0;
    if (o >= count) return;
    const int iw = o % W, ih = (o / W) % H, c = (o / (W * H)) % Cin, n = o / (W * H * Cin);
    const int Cg = Cin / groups, Mg = Cout / groups, grp = c / Cg, cIn = c - grp * Cg;
    float acc = 0.0f;
    for (int m = 0; m < Mg; ++m) {
        const int co = grp * Mg + m;
        __global const float* dyp = dy + (n * Cout + co) * Ho * Wo;
        __global const float* wp = w + (co * Cg + cIn) * KH * KW;
        for (int kh = 0; kh < KH; ++kh) {
            const int th = ih + PT - kh * DH;             // = oh * SH when that output row exists
            if (th < 0 || th % SH != 0) continue;
            const int oh = th / SH;
            if (oh >= Ho) continue;
            for (int kw = 0; kw < KW; ++kw) {
                const int tw = iw + PL - kw * DW;
                if (tw < 0 || tw % SW != 0) continue;
                const int ow = tw / SW;
                if (ow < Wo) acc += wp[kh * KW + kw] * dyp[oh * Wo + ow];
            }
        }
    }
    dx[o] = acc;
}

// dw [Cout, Cg, KH, KW]: work-group `get_group_id(0)` computes one weight (launch Cout*Cg*KH*KW groups).
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void grouped_conv_backward_weights(__global const float* x, __global const float* dy, __global float* dw,
                                   const int batch, GCONV_ARGS) {
    __local float scratch[WG_SIZE];
    const int widx = get_group_id(0), lid = get_local_id(0);
    const int Cg = Cin / groups, Mg = Cout / groups;
    const int kw = widx % KW, kh = (widx / KW) % KH, c = (widx / (KW * KH)) % Cg, co = widx / (KW * KH * Cg);
    const int grp = co / Mg, P = Ho * Wo, total = batch * P;
    const int dh = kh * DH - PT, dwo = kw * DW - PL;
    float acc = 0.0f;
    for (int j = lid; j < total; j += WG_SIZE) {
        const int n = j / P, q = j - n * P, oh = q / Wo, ow = q - oh * Wo;
        const int ih = oh * SH + dh, iw = ow * SW + dwo;
        if ((uint)ih < (uint)H && (uint)iw < (uint)W)
            acc += dy[(n * Cout + co) * P + q] * x[((n * Cin + grp * Cg + c) * H + ih) * W + iw];
    }
    const float sum = group_sum(acc, scratch);
    if (lid == 0) dw[widx] = sum;
}
