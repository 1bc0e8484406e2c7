#!/usr/bin/env python3
"""Makes Tests/UpdraftTests/Fixtures/ndlayout: two small updatable models built with coremltools'
NeuralNetworkBuilder around the N-D layout layers constantPad (1155) and concatND with interleave,
with the expected forward outputs and two epochs of SGD computed in numpy (float64), in the golden
format of make_golden.py plus "outputs" (the untrained model's probabilities for every example).
coremltools cannot run predictions on Linux, so numpy is the reference; its semantics are the
proto's:

- constantPad: padAmounts holds a (before, after) pair per axis, pair i for axis i (with fewer
  pairs than axes, the last axes); with padToGivenOutputSizeMode the non-zero amount of a pair is
  that axis's output size, padded on its side (never smaller than the input).
- concatND interleave: the inputs (all of one shape) alternate along the axis,
  output[..., K * c + k, ...] = input_k[..., c, ...].

constant_pad: x [1, 3, 4, 5] -> convolution 1x1 (3 -> 2, trained) -> constantPad value 0.5,
  padAmounts [0,0, 1,0, 0,2, 1,1] -> [1, 3, 6, 7] -> constantPad value -0.25, padToGivenOutputSizeMode,
  padAmounts [0,0, 0,0, 8,0, 0,9] -> [1, 3, 8, 9] -> reshapeStatic [1, 216] -> innerProduct 4 (trained)
  -> softmax.
concat_interleave: x [1, 2, 3, 4] -> convolution 1x1 (2 -> 3, trained) = a; b = tanh(a);
  c = convolution 1x1 of x (frozen); concatND axis -2 interleave (a, b, c) -> [1, 3, 9, 4] ->
  reshapeStatic [1, 108] -> innerProduct 4 (trained) -> softmax.
The trained convolution sits before the layout layer, so its gradient crosses it.
Run once (needs coremltools and numpy) and commit the output:  python3 Tests/Scripts/make_ndlayout_fixtures.py
"""
import json
import os

import numpy as np
import coremltools as ct
from coremltools.models import datatypes
from coremltools.models.neural_network import NeuralNetworkBuilder, SgdParams

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "UpdraftTests", "Fixtures", "ndlayout")
CLASSES, EXAMPLES, BATCH, EPOCHS = 4, 8, 4, 2
LR, MOMENTUM = 0.1, 0.9


def f32(a):
    return np.asarray(a, dtype=np.float32)


def conv1x1(x, w, b):
    """x [N, C_in, H, W], w [C_out, C_in], b [C_out] -> [N, C_out, H, W]."""
    return np.einsum("oc,nchw->nohw", w, x) + b[None, :, None, None]


def conv1x1_grads(x, dy):
    return np.einsum("nohw,nchw->oc", dy, x), dy.sum(axis=(0, 2, 3))


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def pad_amounts(shape, amounts, to_size):
    """Per-axis (before, after) of a constantPad on a tensor of `shape` (batch 1 included)."""
    pairs = len(amounts) // 2
    first = len(shape) - pairs
    out = [(0, 0)] * len(shape)
    for p in range(pairs):
        a, (before, after) = first + p, amounts[2 * p:2 * p + 2]
        if to_size:
            assert before == 0 or after == 0
            before, after = max(0, before - shape[a]), max(0, after - shape[a])
        out[a] = (before, after)
    return out


def interior(pads, shape):
    return tuple(slice(b, b + d) for (b, _), d in zip(pads, shape))


class ConstantPadNet:
    name = "constant_pad"
    shape = (1, 3, 4, 5)
    pad1 = dict(value=0.5, amounts=[0, 0, 1, 0, 0, 2, 1, 1], to_size=False)
    pad2 = dict(value=-0.25, amounts=[0, 0, 0, 0, 8, 0, 0, 9], to_size=True)

    def __init__(self, rng):
        self.p1 = pad_amounts((1, 2, 4, 5), self.pad1["amounts"], False)
        self.mid = tuple(d + b + a for d, (b, a) in zip((1, 2, 4, 5), self.p1))
        self.p2 = pad_amounts(self.mid, self.pad2["amounts"], True)
        self.out = tuple(d + b + a for d, (b, a) in zip(self.mid, self.p2))
        self.features = int(np.prod(self.out))
        self.params = {
            "conv": [f32(rng.uniform(-0.5, 0.5, (2, 3))), f32(rng.uniform(-0.1, 0.1, 2))],
            "fc": [f32(rng.uniform(-0.2, 0.2, (CLASSES, self.features))), f32(rng.uniform(-0.1, 0.1, CLASSES))],
        }

    def forward(self, p, x):
        y = conv1x1(x, *p["conv"])
        z = np.pad(y, self.p1, constant_values=self.pad1["value"])
        u = np.pad(z, self.p2, constant_values=self.pad2["value"])
        flat = u.reshape(len(x), -1)
        return softmax(flat @ p["fc"][0].T + p["fc"][1]), (y, flat)

    def grads(self, p, x, dlogits, saved):
        _, flat = saved
        g = {"fc": [dlogits.T @ flat, dlogits.sum(axis=0)]}
        du = (dlogits @ p["fc"][0]).reshape((len(x),) + self.out[1:])
        dz = du[(slice(None),) + interior(self.p2, self.mid)[1:]]
        dy = dz[(slice(None),) + interior(self.p1, (1, 2, 4, 5))[1:]]
        g["conv"] = list(conv1x1_grads(x, dy))
        return g

    def build(self, p):
        b = NeuralNetworkBuilder([("x", datatypes.Array(*self.shape))], [("probs", datatypes.Array(1, CLASSES))],
                                 disable_rank5_shape_mapping=True)
        w, bias = p["conv"]
        b.add_convolution("conv", kernel_channels=3, output_channels=2, height=1, width=1, stride_height=1, stride_width=1,
                          border_mode="valid", groups=1, W=w.T.reshape(1, 1, 3, 2), b=bias, has_bias=True,
                          input_name="x", output_name="conv_out")
        b.add_constant_pad("pad", ["conv_out"], "pad_out", value=self.pad1["value"], pad_amounts=self.pad1["amounts"])
        b.add_constant_pad("pad_to_size", ["pad_out"], "pad_to_size_out", value=self.pad2["value"],
                           pad_to_given_output_size_mode=True, pad_amounts=self.pad2["amounts"])
        b.add_reshape_static("flat", "pad_to_size_out", "flat_out", (1, self.features))
        b.add_inner_product("fc", W=p["fc"][0], b=p["fc"][1], input_channels=self.features, output_channels=CLASSES,
                            has_bias=True, input_name="flat_out", output_name="logits")
        b.add_softmax("probs", "logits", "probs")
        return b


class ConcatInterleaveNet:
    name = "concat_interleave"
    shape = (1, 2, 3, 4)
    parts = 3

    def __init__(self, rng):
        self.out = (1, 3, 3 * self.parts, 4)
        self.features = int(np.prod(self.out))
        self.params = {
            "conv": [f32(rng.uniform(-0.7, 0.7, (3, 2))), f32(rng.uniform(-0.1, 0.1, 3))],
            "fc": [f32(rng.uniform(-0.2, 0.2, (CLASSES, self.features))), f32(rng.uniform(-0.1, 0.1, CLASSES))],
        }
        self.frozen = [f32(rng.uniform(-0.7, 0.7, (3, 2))), f32(rng.uniform(-0.1, 0.1, 3))]

    def forward(self, p, x):
        a = conv1x1(x, *p["conv"])
        b = np.tanh(a)
        c = conv1x1(x, *self.frozen)
        # interleave along H: out[:, :, 3h + k, :] = input_k[:, :, h, :]
        cat = np.stack([a, b, c], axis=3).reshape((len(x),) + self.out[1:])
        flat = cat.reshape(len(x), -1)
        return softmax(flat @ p["fc"][0].T + p["fc"][1]), (b, flat)

    def grads(self, p, x, dlogits, saved):
        b, flat = saved
        g = {"fc": [dlogits.T @ flat, dlogits.sum(axis=0)]}
        dcat = (dlogits @ p["fc"][0]).reshape(len(x), 3, 3, self.parts, 4)
        da = dcat[:, :, :, 0, :] + dcat[:, :, :, 1, :] * (1 - b * b)
        g["conv"] = list(conv1x1_grads(x, da))
        return g

    def build(self, p):
        b = NeuralNetworkBuilder([("x", datatypes.Array(*self.shape))], [("probs", datatypes.Array(1, CLASSES))],
                                 disable_rank5_shape_mapping=True)
        for name, (w, bias), out in (("conv", p["conv"], "a"), ("conv_frozen", self.frozen, "c")):
            b.add_convolution(name, kernel_channels=2, output_channels=3, height=1, width=1, stride_height=1, stride_width=1,
                              border_mode="valid", groups=1, W=w.T.reshape(1, 1, 2, 3), b=bias, has_bias=True,
                              input_name="x", output_name=out)
        b.add_activation("tanh", "TANH", "a", "b")
        b.add_concat_nd("interleave", ["a", "b", "c"], "cat", axis=-2, interleave=True)
        b.add_reshape_static("flat", "cat", "flat_out", (1, self.features))
        b.add_inner_product("fc", W=p["fc"][0], b=p["fc"][1], input_channels=self.features, output_channels=CLASSES,
                            has_bias=True, input_name="flat_out", output_name="logits")
        b.add_softmax("probs", "logits", "probs")
        return b


def make(net_type, seed):
    rng = np.random.default_rng(seed)
    net = net_type(rng)
    x = f32(rng.uniform(-1, 1, (EXAMPLES,) + net.shape[1:]))
    labels = rng.integers(0, CLASSES, EXAMPLES)

    builder = net.build(net.params)
    builder.make_updatable(["conv", "fc"])
    builder.set_categorical_cross_entropy_loss(name="loss", input="probs")
    builder.set_sgd_optimizer(SgdParams(lr=LR, batch=BATCH, momentum=MOMENTUM))
    builder.set_epochs(EPOCHS)
    builder.nn_spec.updateParams.shuffle.defaultValue = False
    types = [l.WhichOneof("layer") for l in builder.spec.neuralNetwork.layers]

    # numpy in float64 from the float32 values the model stores
    p = {k: [v.astype(np.float64) for v in vs] for k, vs in net.params.items()}
    xd = x.astype(np.float64)
    outputs, _ = net.forward(p, xd)
    velocity = {k: [np.zeros_like(v) for v in vs] for k, vs in p.items()}
    losses = []
    for _ in range(EPOCHS):
        for start in range(0, EXAMPLES, BATCH):
            xb, yb = xd[start:start + BATCH], labels[start:start + BATCH]
            probs, saved = net.forward(p, xb)
            losses.append(float(-np.log(probs[np.arange(len(yb)), yb]).mean()))
            dlogits = probs.copy()
            dlogits[np.arange(len(yb)), yb] -= 1
            dlogits /= len(yb)
            g = net.grads(p, xb, dlogits, saved)
            for k in p:
                for i in range(2):
                    velocity[k][i] = MOMENTUM * velocity[k][i] + g[k][i]
                    p[k][i] = p[k][i] - LR * velocity[k][i]

    os.makedirs(OUT, exist_ok=True)
    ct.utils.save_spec(builder.spec, os.path.join(OUT, net.name + ".mlmodel"))
    final = {k: {"weights": v[0].ravel().tolist(), "bias": v[1].ravel().tolist()} for k, v in p.items()}
    with open(os.path.join(OUT, net.name + ".json"), "w") as f:
        json.dump({"about": "numpy %s, coremltools %s, made by Tests/Scripts/make_ndlayout_fixtures.py" % (np.__version__, ct.__version__),
                   "layers": types, "optimizer": "sgd", "batch": BATCH, "epochs": EPOCHS, "shape": list(net.shape),
                   "inputs": x.ravel().tolist(), "labels": labels.tolist(), "outputs": outputs.ravel().tolist(),
                   "losses": losses, "final": final}, f)
    print(net.name, types, "losses", ["%.6f" % l for l in losses])


def main():
    make(ConstantPadNet, 21)
    make(ConcatInterleaveNet, 22)


if __name__ == "__main__":
    main()
