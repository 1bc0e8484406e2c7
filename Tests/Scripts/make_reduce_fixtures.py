#!/usr/bin/env python3
"""Makes Tests/UpdraftTests/Fixtures/reduce: small updatable models built with coremltools'
NeuralNetworkBuilder holding the reduce layers, and the values they must give, computed here with numpy
from NeuralNetwork.proto's definitions (written from the proto's text, not from Updraft's code).

Each model (layer_fixtures.Frame): input x [2, 4, 5] -> a 1x1 convolution "mix" (updatable, 2 -> 3
channels) and its sigmoid "pos" (positive, for the logs) -> the layers under test, each flattened ->
concat "all" -> flatten -> inner product "fc" (frozen) -> softmax "probs", categorical cross-entropy,
SGD. Each JSON holds a batch of inputs, their labels, and per example the values of every reduce
layer's output, of "all" and of "probs".

- reduce_nd: reduceL1, reduceL2, reduceMin, reduceProd, reduceLogSum, reduceSumSquare, reduceLogSumExp
  over one axis, two axes, all axes (reduceAll), keepDims true and false.
- reduce_old: the rank-5 reduce layer (ReduceLayerParams) in the modes PROD, LOGSUM (epsilon 1e-6 added
  to the sum inside the log), SUMSQUARE, L1, L2, MIN over W, HW, C, CHW and H.
- reduce_arg: argMax (axis -1, kept), argMin (axis -3, removed) and the reduce layer's ARGMAX over C:
  the position of the first extremum along the axis, as a float. No gradient: training it is refused.

Run once (needs coremltools and numpy; no torch) and commit the output:
    python3 Tests/Scripts/make_reduce_fixtures.py
"""
import numpy as np

from layer_fixtures import Frame

FRAME = Frame("reduce", 2222, c=2, h=4, w=5, mixed=3, classes=3, batch=4)


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
    """The builder with x -> mix -> pos (sigmoid), and numpy's mix and pos."""
    b, mix = FRAME.start(name)
    b.add_activation("pos", "SIGMOID", "mix", "pos")

    def blobs(x):
        m = mix(x)
        return {"mix": m, "pos": 1 / (1 + np.exp(-m))}
    return b, blobs


def finish(b, names, forward):
    """Each layer's output flattened and concatenated as "all": (builder, forward with "all", "all", its shape)."""
    for name in names:
        b.add_flatten(name + "Flat", mode=0, input_name=name, output_name=name + "Flat")
    b.add_elementwise("all", [name + "Flat" for name in names], "all", "CONCAT")

    def with_all(x):
        values = forward(x)
        values["all"] = np.concatenate([values[n].reshape(-1) for n in names])
        return values
    count = sum(int(np.prod(v.shape)) for k, v in forward(np.zeros((FRAME.c, FRAME.h, FRAME.w))).items() if k in names)
    return b, with_all, "all", (count,)


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
    return finish(b, [l[0] for l in layers], forward)


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
    return finish(b, [l[0] for l in layers], forward)


def reduce_arg():
    b, mix = start("reduce_arg")
    b.add_argmax("aMax", "mix", "aMax", axis=-1, keepdims=True)
    b.add_argmin("aMin", "mix", "aMin", axis=-3, keepdims=False)
    b.add_reduce("oArgMax", "mix", "oArgMax", axis="C", mode="argmax")

    def forward(x):
        m = mix(x)["mix"]
        return {"aMax": first_extremum(m, 2, True), "aMin": first_extremum(m, 0, False).squeeze(axis=0),
                "oArgMax": first_extremum(m, 0, True)}
    return finish(b, ["aMax", "aMin", "oArgMax"], forward)


if __name__ == "__main__":
    FRAME.write("reduce_nd", reduce_nd)
    FRAME.write("reduce_old", reduce_old)
    FRAME.write("reduce_arg", reduce_arg)
