// The activation table's functions in OpenCL C (the host's `ActivationKind`, Ops/ActivationTable.swift,
// lists them with their formulas). The ACT_* codes are not written here: every program is built with
// the host's `-D ACT_…=code` defines (`ActivationKind.openCLDefines`). p = (a, b, c, d) as the host's
// `ActivationScalars`; per-channel kinds take a and b of the element's channel.
#ifndef UPDRAFT_ACTIVATION_H
#define UPDRAFT_ACTIVATION_H

#if !defined(ACT_NONE) || !defined(ACT_RELU) || !defined(ACT_THRESHOLD)
#error "build with the activation table's -D defines (ActivationKind.openCLDefines)"
#endif

inline float act_softplus(float x) { return fmax(x, 0.0f) + log1p(exp(-fabs(x))); }

// y = f(x).
inline float act_forward(const int kind, const float x, const float a, const float b, const float c, const float d) {
    switch (kind) {
    case ACT_LINEAR: return a * x + b;
    case ACT_RELU: return x > 0.0f ? x : 0.0f;
    case ACT_LEAKYRELU:
    case ACT_PRELU: return x > 0.0f ? x : a * x;
    case ACT_THRESHOLDEDRELU: return x >= a ? x : 0.0f;
    case ACT_TANH: return tanh(x);
    case ACT_SCALEDTANH: return a * tanh(b * x);
    case ACT_SIGMOID: return 1.0f / (1.0f + exp(-x));
    case ACT_SIGMOIDHARD: return fmin(fmax(a * x + b, 0.0f), 1.0f);
    case ACT_ELU: return x > 0.0f ? x : a * expm1(x);
    case ACT_SOFTSIGN: return x / (1.0f + fabs(x));
    case ACT_SOFTPLUS: return act_softplus(x);
    case ACT_PARAMETRICSOFTPLUS: return a * act_softplus(b * x);
    case ACT_CLIP: return fmin(fmax(x, a), b);
    case ACT_SQRT: return sqrt(c * x + d);
    case ACT_RSQRT: return 1.0f / sqrt(c * x + d + b);
    case ACT_INVERSE: return 1.0f / (c * x + d + b);
    case ACT_POWER: return pow(c * x + d, a);
    case ACT_EXP: return exp(c * x + d);
    case ACT_LOG: return log(c * x + d);
    case ACT_ABS: return fabs(c * x + d);
    case ACT_THRESHOLD: return fmax(c * x + d, a);
    default: return x;  // ACT_NONE
    }
}

// dy/dx from v: y when fromOutput (the host's Activation.backwardReadsOutput), else x.
inline float act_derivative(const int kind, const float v, const int fromOutput,
                            const float a, const float b, const float c, const float d) {
    switch (kind) {
    case ACT_LINEAR: return a;
    case ACT_RELU: return v > 0.0f ? 1.0f : 0.0f;
    case ACT_LEAKYRELU:
    case ACT_PRELU: return v > 0.0f ? 1.0f : a;
    case ACT_THRESHOLDEDRELU: return fromOutput ? (v > 0.0f ? 1.0f : 0.0f) : (v >= a ? 1.0f : 0.0f);
    case ACT_TANH: return 1.0f - v * v;
    case ACT_SCALEDTANH: { if (a == 0.0f) return 0.0f; const float t = v / a; return a * b * (1.0f - t * t); }
    case ACT_SIGMOID: return v * (1.0f - v);
    case ACT_SIGMOIDHARD: return v > 0.0f && v < 1.0f ? a : 0.0f;
    case ACT_ELU: return v > 0.0f ? 1.0f : (fromOutput ? v + a : a * exp(v));
    case ACT_SOFTSIGN: { const float t = 1.0f - fabs(v); return t * t; }
    case ACT_SOFTPLUS: return -expm1(-v);
    case ACT_PARAMETRICSOFTPLUS: return a == 0.0f ? 0.0f : -a * b * expm1(-v / a);
    case ACT_CLIP: return v > a && v < b ? 1.0f : 0.0f;
    case ACT_SQRT: return c / (2.0f * v);
    case ACT_RSQRT: return -0.5f * c * v * v * v;
    case ACT_INVERSE: return -c * v * v;
    case ACT_POWER: return c * a * pow(c * v + d, a - 1.0f);
    case ACT_EXP: return c * v;
    case ACT_LOG: return c / (c * v + d);
    case ACT_ABS: { const float u = c * v + d; return u > 0.0f ? c : (u < 0.0f ? -c : 0.0f); }
    case ACT_THRESHOLD: return v > a ? c : 0.0f;
    default: return 1.0f;
    }
}

// Kernel parameters of an activation or fused epilogue (the host's `activationArguments`): the kind,
// its scalars, and per-channel constants [a_0 … a_{C-1}, b_0 … b_{C-1}] when actChannels > 0.
#define ACT_PARAMS const int actKind, const float actA, const float actB, const float actC, const float actD, \
                   __global const float* actTable, const int actChannels

// f(v) for an element of channel ch, with the ACT_PARAMS in scope.
#define ACT_APPLY(v, ch) (actChannels > 0 \
    ? act_forward(actKind, (v), actTable[(ch)], actTable[actChannels + (ch)], actC, actD) \
    : act_forward(actKind, (v), actA, actB, actC, actD))

#endif
