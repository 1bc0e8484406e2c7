#!/usr/bin/env python3
"""A checkpoint model Updraft wrote mid-run (the run then killed with SIGKILL), read by coremltools
as Updraft meant it (`make interop`).

    python3 Tests/Scripts/check_checkpoint_interop.py ORIGINAL.mlmodel CHECKPOINT.mlmodel

coremltools must parse the checkpoint; it must be the original model (same layers, types, names,
updatable flags, update parameters) with finite weights, and its updatable layers trained (changed
from the original) while its frozen layers are the original's, value for value.
Exit status 1 on any disagreement, with every problem listed.
"""
import sys

import numpy as np
import coremltools as ct


def weights(layer):
    kind = layer.WhichOneof("layer")
    p = getattr(layer, kind)
    if kind in ("convolution", "innerProduct"):
        return np.array(p.weights.floatValue, dtype=np.float32), np.array(p.bias.floatValue, dtype=np.float32)
    return None


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    problems = []
    try:
        original = ct.utils.load_spec(sys.argv[1])
        checkpoint = ct.utils.load_spec(sys.argv[2])
    except Exception as e:  # a file coremltools cannot parse is a failure, not a crash
        print(f"FAIL coremltools cannot read it: {type(e).__name__}: {e}")
        return 1
    a, b = original.neuralNetworkClassifier, checkpoint.neuralNetworkClassifier
    if [(l.name, l.WhichOneof("layer"), l.isUpdatable) for l in a.layers] != [(l.name, l.WhichOneof("layer"), l.isUpdatable) for l in b.layers]:
        problems.append("the checkpoint's layers are not the original's")
    if a.updateParams != b.updateParams or checkpoint.isUpdatable != original.isUpdatable:
        problems.append("the checkpoint's update parameters differ from the original's")
    trained = 0
    for la, lb in zip(a.layers, b.layers):
        wa, wb = weights(la), weights(lb)
        if wa is None:
            continue
        if not all(np.isfinite(x).all() for x in wb):
            problems.append(f"layer {lb.name} holds non-finite weights")
        same = all(np.array_equal(x, y) for x, y in zip(wa, wb))
        if lb.isUpdatable:
            trained += 0 if same else 1
        elif not same:
            problems.append(f"frozen layer {lb.name} changed")
    if trained == 0:
        problems.append("no updatable layer changed: the checkpoint holds no training")
    for p in problems:
        print(f"FAIL {p}")
    print(f"check_checkpoint_interop: {'ok' if not problems else f'{len(problems)} problems'} ({trained} trained layers)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
