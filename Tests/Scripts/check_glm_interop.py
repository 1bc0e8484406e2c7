#!/usr/bin/env python3
"""GLM classifiers trained by Updraft, read back by coremltools (`make interop`).

    python3 Tests/Scripts/check_glm_interop.py PATH/TO/updraft

For each model in Fixtures/glm (what coremltools' scikit-learn converter wrote for a logistic
regression, make_glm_fixtures.py): `updraft train` from inputs.npy + targets.npy with one example a
step, in order, at the fixture's learning rate; coremltools reads a glmClassifier whose weights and
offsets are scikit-learn's SGDClassifier(log_loss) trajectory from the same start (within 1e-5; the
inputs go through float32), and whose description, labels, encoding and transform are the converter's.
Exit status 1 on any disagreement, with every problem listed.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import coremltools as ct

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "UpdraftTests", "Fixtures", "glm")


def check(binary, case, work, problems):
    data = os.path.join(work, case["model"] + "-data")
    os.makedirs(data)
    np.save(os.path.join(data, "inputs.npy"), np.array(case["train"]["vectors"], dtype=np.float32))
    np.save(os.path.join(data, "targets.npy"), np.array(case["train"]["classes"], dtype=np.int64))
    source, out, u = os.path.join(FIXTURES, case["model"]), os.path.join(work, case["model"]), case["update"]
    subprocess.run([binary, "train", source, "--train", data, "--epochs", str(u["epochs"]), "--learning-rate", str(u["learningRate"]),
                    "--batch-size", str(u["miniBatchSize"]), "--no-shuffle", "--out", out], check=True, stdout=subprocess.DEVNULL)
    before, after = ct.utils.load_spec(source), ct.utils.load_spec(out)
    name = case["model"]
    if after.WhichOneof("Type") != "glmClassifier":
        problems.append(f"{name}: coremltools reads a {after.WhichOneof('Type')}")
        return
    g, g0 = after.glmClassifier, before.glmClassifier
    weights = np.array([list(w.value) for w in g.weights])
    if weights.shape != np.array(u["weights"]).shape or not np.allclose(weights, u["weights"], atol=1e-5):
        problems.append(f"{name}: weights {weights.tolist()} are not scikit-learn's {u['weights']}")
    if not np.allclose(list(g.offset), u["offsets"], atol=1e-5):
        problems.append(f"{name}: offsets {list(g.offset)} are not scikit-learn's {u['offsets']}")
    for field in ["postEvaluationTransform", "classEncoding", "stringClassLabels"]:
        if getattr(g, field) != getattr(g0, field):
            problems.append(f"{name}: {field} changed from {getattr(g0, field)} to {getattr(g, field)}")
    if after.description != before.description or after.isUpdatable:
        problems.append(f"{name}: the description or isUpdatable changed")


def main():
    binary = sys.argv[1]
    with open(os.path.join(FIXTURES, "glm.json")) as f:
        cases = json.load(f)["cases"]
    problems = []
    with tempfile.TemporaryDirectory() as work:
        for case in cases:
            check(binary, case, work, problems)
    for p in problems:
        print("check_glm_interop:", p)
    if problems:
        sys.exit(1)
    print(f"check_glm_interop: {len(cases)} GLM classifiers trained by Updraft read back by coremltools as scikit-learn's SGD trajectory")


if __name__ == "__main__":
    main()
