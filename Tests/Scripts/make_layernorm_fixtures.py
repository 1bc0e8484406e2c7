#!/usr/bin/env python3
"""Makes Tests/UpdraftTests/Fixtures/layernorm: a small updatable model built with coremltools'
NeuralNetworkBuilder holding Core ML's layerNormalization layer (NeuralNetworkLayer field 1350,
`add_layer_normalization`), and the values it must give, computed with PyTorch's own
torch.nn.functional.layer_norm (in float64), not from Updraft's code.

The model (layer_fixtures.Frame): input x [2, 3, 4] -> a 1x1 convolution "mix" (updatable, 3 channels,
so the gradient comes back through both layers) -> "lnPlane" normalizing each channel's [3, 4] plane
(normalizedShape [3, 4], eps 1e-5) -> "lnAll" normalizing the whole example (normalizedShape
[3, 3, 4], eps 1e-3) -> flatten -> inner product "fc" (frozen) -> softmax "probs", categorical
cross-entropy, SGD. The JSON holds a batch of inputs, their labels and per example the values of
"mix", "lnPlane", "lnAll" and "probs".

scale_bias.mlmodel holds the two layers coremltools' converter writes around a PyTorch LayerNorm's
mvn: "scaleC" (Core ML's scale layer, field 245: a per-channel scale [C] with a bias [1, H, W]) and
"biasAll" (the bias layer, field 250: a bias [C, H, W]), their values computed with numpy from
NeuralNetwork.proto's y = scale * x + bias, broadcast over C, H, W.

Run once (needs coremltools, numpy and torch) and commit the output:
    python3 Tests/Scripts/make_layernorm_fixtures.py
"""
import numpy as np
import torch

from layer_fixtures import Frame

FRAME = Frame("layernorm", 1350, c=2, h=3, w=4, mixed=3, classes=3, batch=4)
MIXED, H, W = FRAME.mixed, FRAME.h, FRAME.w


def layer_norm(x, shape, gamma, beta, eps):
    """PyTorch's layer norm of one example over its trailing `shape` axes."""
    t = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float64))
    return torch.nn.functional.layer_norm(t(x), list(shape), t(gamma).reshape(shape), t(beta).reshape(shape), eps).numpy()


def layer_norm_model():
    b, mix = FRAME.start("layerNormalization")
    plane, whole = (H, W), (MIXED, H, W)
    g1, b1 = 1 + FRAME.rand(*plane), FRAME.rand(*plane)
    g2, b2 = 1 + FRAME.rand(*whole), FRAME.rand(*whole)
    b.add_layer_normalization("lnPlane", "mix", "lnPlane", normalized_shape=list(plane), gamma=g1, beta=b1, eps=1e-5)
    b.add_layer_normalization("lnAll", "lnPlane", "lnAll", normalized_shape=list(whole), gamma=g2, beta=b2, eps=1e-3)

    def forward(x):
        m = mix(x)
        p = layer_norm(m, plane, g1, b1, 1e-5)
        return {"mix": m, "lnPlane": p, "lnAll": layer_norm(p, whole, g2, b2, 1e-3)}
    return b, forward, "lnAll", whole


def scale_bias_model():
    b, mix = FRAME.start("scale and bias")
    scale, shift, bias = 1 + FRAME.rand(MIXED), FRAME.rand(1, H, W), FRAME.rand(MIXED, H, W)
    b.add_scale("scaleC", W=scale, b=shift, has_bias=True, input_name="mix", output_name="scaleC",
                shape_scale=[MIXED], shape_bias=[1, H, W])
    b.add_bias("biasAll", b=bias, input_name="scaleC", output_name="biasAll", shape_bias=[MIXED, H, W])

    def forward(x):
        m = mix(x)
        s = m * scale.astype(np.float64)[:, None, None] + shift.astype(np.float64)
        return {"mix": m, "scaleC": s, "biasAll": s + bias.astype(np.float64)}
    return b, forward, "biasAll", (MIXED, H, W)


if __name__ == "__main__":
    FRAME.write("layer_norm", layer_norm_model)
    FRAME.write("scale_bias", scale_bias_model)
    print("wrote", FRAME.out)
