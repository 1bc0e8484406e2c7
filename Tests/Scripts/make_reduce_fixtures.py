#!/usr/bin/env python3
"""Makes Tests/UpdraftTests/Fixtures/reduce: small updatable models built with coremltools'
NeuralNetworkBuilder holding the reduce layers, and the values they must give, computed here with numpy
from NeuralNetwork.proto's definitions (written from the proto's text, not from Updraft's code).

Each model: input x [2, 4, 5] -> a 1x1 convolution "mix" (updatable, 2 -> 3 channels) and its sigmoid
"pos" (positive, for the logs) -> the layers under test, each flattened -> concat "all" -> inner product
"fc" (frozen) -> softmax "probs", categorical cross-entropy, SGD. Each JSON holds a batch of inputs,
their labels, and per example the values of every reduce layer's output and of "probs".

- reduce_nd: reduceL1, reduceL2, reduceMin, reduceProd, reduceLogSum, reduceSumSquare, reduceLogSumExp
  over one axis, two axes, all axes (reduceAll), keepDims true and false.
- reduce_old: the rank-5 reduce layer (ReduceLayerParams) in the modes PROD, LOGSUM (epsilon 1e-6 added
  to the sum inside the log), SUMSQUARE, L1, L2, MIN over W, HW, C, CHW and H.
- reduce_arg: argMax (axis -1, kept), argMin (axis -3, removed) and the reduce layer's ARGMAX over C:
  the position of the first extremum along the axis, as a float. No gradient: training it is refused.

Run once (needs coremltools and numpy; no torch) and commit the output:
    python3 Tests/Scripts/make_reduce_fixtures.py
"""
import contextlib
import io
import json
import os

import numpy as np

with contextlib.redirect_stderr(io.StringIO()):  # coremltools warns about missing macOS-only parts
    import coremltools
    from coremltools.models import datatypes
    from coremltools.models.neural_network import NeuralNetworkBuilder, SgdParams

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "UpdraftTests", "Fixtures", "reduce")
C, H, W, MIXED, CLASSES, BATCH = 2, 4, 5, 3, 3, 4
rng = np.random.RandomState(2222)


def rand(*shape, scale=0.5):
    return rng.uniform(-scale, scale, size=shape).astype(np.float32)


# ---- NeuralNetwork.proto's reductions on numpy arrays of the example's shape [C, H, W] ----

def log_sum_exp(x, axes):
    m = x.max(axis=axes, keepdims=True)
    return m + np.log(np.exp(x - m).sum(axis=axes, keepdims=True))


REDUCTIONS = {
    "L1": lambda x, a: np.abs(x).sum(axis=a, keepdims=True),
    "L2": lambda x, a: np.sqrt((x * x).sum(axis=a, keepdims=True)),
    "MIN": lambda x, a: x.min(axis=a, keepdims=True),
    "PROD": lambda x, a: x.prod(axis=a, keepdims=True),
    "LOGSUM": lambda x, a: np.log(x.sum(axis=a, keepdims=True)),
    "SUMSQUARE": lambda x, a: (x * x).sum(axis=a, keepdims=True),
    "LOGSUMEXP": log_sum_exp,
}
OLD_AXES = {"CHW": (0, 1, 2), "HW": (1, 2), "C": (0,), "H": (1,), "W": (2,)}


def first_extremum(x, axis, largest):
    """The position of the first maximum (or minimum) along `axis`, kept as size 1 (numpy's argmax: the first)."""
    return np.expand_dims((x.argmax if largest else x.argmin)(axis=axis), axis).astype(np.float64)


# ---- the models ----

def start(name):
    """The builder with x -> mix (1x1 convolution) -> pos (sigmoid), and numpy's mix and pos."""
    b = NeuralNetworkBuilder([("x", datatypes.Array(C, H, W))], [("probs", datatypes.Array(CLASSES))])
    b.spec.description.metadata.shortDescription = f"Updraft fixture: {name}"
    w, bias = rand(1, 1, C, MIXED, scale=1.0), rand(MIXED)
    b.add_convolution("mix", kernel_channels=C, output_channels=MIXED, height=1, width=1, stride_height=1,
                      stride_width=1, border_mode="valid", groups=1, W=w, b=bias, has_bias=True,
                      input_name="x", output_name="mix")
    b.add_activation("pos", "SIGMOID", "mix", "pos")

    def mix(x):
        m = np.einsum("co,chw->ohw", w[0, 0].astype(np.float64), x) + bias[:, None, None]
        return {"mix": m, "pos": 1 / (1 + np.exp(-m))}
    return b, mix


def finish(b, layers, forward):
    """Each layer's output flattened, concatenated as "all"; returns the flattened length."""
    for name, _ in layers:
        b.add_flatten(name + "Flat", mode=0, input_name=name, output_name=name + "Flat")
    b.add_elementwise("all", [name + "Flat" for name, _ in layers], "all", "CONCAT")
    return forward


def reduce_nd():
    b, mix = start("reduce_nd")
    layers = [  # name, builder method, input, axes, keepdims, reduce_all, numpy mode
        ("rL1", b.add_reduce_l1, "mix", [-1], True, False, "L1"),
        ("rL2", b.add_reduce_l2, "mix", [-2, -1], True, False, "L2"),
        ("rMin", b.add_reduce_min, "mix", [-3], False, False, "MIN"),
        ("rProd", b.add_reduce_prod, "mix", [-1], True, False, "PROD"),
        ("rLogSum", b.add_reduce_logsum, "pos", [-2, -1], True, False, "LOGSUM"),
        ("rSumSquare", b.add_reduce_sumsquare, "mix", [-3, -1], True, False, "SUMSQUARE"),
        ("rLogSumExp", b.add_reduce_logsumexp, "mix", None, True, True, "LOGSUMEXP"),
    ]
    for name, add, source, axes, keep, everything, _ in layers:
        add(name, source, name, axes=axes, keepdims=keep, reduce_all=everything)

    def forward(x):
        blobs, out = mix(x), {}
        for name, _, source, axes, keep, everything, mode in layers:
            a = (0, 1, 2) if everything else tuple(ax % 3 for ax in axes)
            y = REDUCTIONS[mode](blobs[source], a)
            out[name] = y if keep else y.squeeze(axis=a)
        return out
    return b, finish(b, [(l[0], None) for l in layers], forward), [l[0] for l in layers]


def reduce_old():
    b, mix = start("reduce_old")
    layers = [  # name, input, axis, mode (coremltools' spelling, numpy's)
        ("oProd", "mix", "W", "prod", "PROD"),
        ("oLogSum", "pos", "HW", "logsum", "LOGSUM"),
        ("oSumSquare", "mix", "C", "sumsquare", "SUMSQUARE"),
        ("oL1", "mix", "CHW", "L1", "L1"),
        ("oL2", "mix", "H", "L2", "L2"),
        ("oMin", "mix", "HW", "min", "MIN"),
    ]
    epsilon = 1e-6
    for name, source, axis, mode, _ in layers:
        b.add_reduce(name, source, name, axis=axis, mode=mode, epsilon=epsilon)

    def forward(x):
        blobs, out = mix(x), {}
        for name, source, axis, _, mode in layers:
            a = OLD_AXES[axis]
            if mode == "LOGSUM":  # the epsilon is added to the sum inside the log
                out[name] = np.log(blobs[source].sum(axis=a, keepdims=True) + float(np.float32(epsilon)))
            else:
                out[name] = REDUCTIONS[mode](blobs[source], a)
        return out
    return b, finish(b, [(l[0], None) for l in layers], forward), [l[0] for l in layers]


def reduce_arg():
    b, mix = start("reduce_arg")
    b.add_argmax("aMax", "mix", "aMax", axis=-1, keepdims=True)
    b.add_argmin("aMin", "mix", "aMin", axis=-3, keepdims=False)
    b.add_reduce("oArgMax", "mix", "oArgMax", axis="C", mode="argmax")

    def forward(x):
        m = mix(x)["mix"]
        return {"aMax": first_extremum(m, 2, True), "aMin": first_extremum(m, 0, False).squeeze(axis=0),
                "oArgMax": first_extremum(m, 0, True)}
    names = ["aMax", "aMin", "oArgMax"]
    return b, finish(b, [(n, None) for n in names], forward), names


def write(name, make):
    b, forward, layers = make()
    probe = forward(np.zeros((C, H, W)))
    count = sum(int(np.prod(probe[n].shape)) for n in layers)
    fc_w, fc_b = rand(CLASSES, count, scale=0.2), rand(CLASSES)
    b.add_inner_product("fc", W=fc_w, b=fc_b, input_channels=count, output_channels=CLASSES, has_bias=True,
                        input_name="all", output_name="logits")
    b.add_softmax("softmax", "logits", "probs")
    b.make_updatable(["mix"])
    with contextlib.redirect_stdout(io.StringIO()):
        b.set_categorical_cross_entropy_loss(name="loss", input="probs")
    b.set_sgd_optimizer(SgdParams(lr=0.5, batch=BATCH))
    b.set_epochs(3)
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name + ".mlmodel")
    coremltools.utils.save_spec(b.spec, path)
    inputs = rand(BATCH, C, H, W, scale=1.0)
    labels = [i % CLASSES for i in range(BATCH)]
    blobs = {}
    for x in inputs:
        values = forward(x.astype(np.float64))
        flat = np.concatenate([values[n].reshape(-1) for n in layers])
        logits = fc_w.astype(np.float64) @ flat + fc_b
        e = np.exp(logits - logits.max())
        values["probs"] = e / e.sum()
        for k, v in values.items():
            entry = blobs.setdefault(k, {"shape": list(v.shape), "values": []})
            entry["values"] += [float(f"{t:.9g}") for t in v.reshape(-1)]
    golden = {"model": name + ".mlmodel", "coremltools": coremltools.__version__,
              "layers": [[l.name, l.WhichOneof("layer")] for l in b.spec.neuralNetwork.layers],
              "reduceLayers": layers,
              "inputShape": [C, H, W], "inputs": [float(t) for t in inputs.reshape(-1)], "labels": labels,
              "blobs": blobs}
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes): " + ", ".join(f"{k} {v['shape']}" for k, v in blobs.items()))


if __name__ == "__main__":
    write("reduce_nd", reduce_nd)
    write("reduce_old", reduce_old)
    write("reduce_arg", reduce_arg)
