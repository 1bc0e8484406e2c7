#!/usr/bin/env python3
"""Expected k-NN answers from scikit-learn, the oracle for Updraft's exact search.

Builds k-NN classifiers with coremltools' KNearestNeighborsClassifierBuilder on random samples
(float32, so the distances Updraft computes from the stored values are the ones scikit-learn sees)
and records, for held-out queries, what `sklearn.neighbors.KNeighborsClassifier(algorithm="brute")`
answers with the same k and weighting: the neighbours (indices, Euclidean distances), the class
probabilities (`predict_proba`) and the predicted labels. Random continuous data has no distance
ties, which scikit-learn would break by training order.

    Tests/UpdraftTests/Fixtures/knn/oracle_<weighting>.mlmodel   the model
    Tests/UpdraftTests/Fixtures/knn/oracle_<weighting>.json      queries and scikit-learn's answers
    Tests/UpdraftTests/Fixtures/knn/oracle_<weighting>_data/     inputs.npy + targets.npy of the queries
                                                                 (targets: indices into the model's labels)

Run once (needs coremltools, numpy, scikit-learn) and commit the output:
    python3 Tests/Scripts/make_knn_oracle.py
"""
import json
import os

import numpy as np
import coremltools as ct
from coremltools.models.nearest_neighbors import KNearestNeighborsClassifierBuilder
from sklearn.neighbors import KNeighborsClassifier

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "UpdraftTests", "Fixtures", "knn")
LABELS = ["ant", "bee", "cow", "dog"]


def make(weighting, seed):
    rng = np.random.default_rng(seed)
    d, n, q, k = 8, 60, 25, 5
    centres = rng.normal(scale=0.9, size=(len(LABELS), d))
    y = rng.integers(0, len(LABELS), size=n)
    x = (centres[y] + rng.normal(size=(n, d))).astype(np.float32)
    yq = rng.integers(0, len(LABELS), size=q)
    xq = (centres[yq] + rng.normal(size=(q, d))).astype(np.float32)
    labels = [LABELS[i] for i in y]

    b = KNearestNeighborsClassifierBuilder(input_name="features", output_name="label", number_of_dimensions=d,
                                           default_class_label="none", number_of_neighbors=k,
                                           weighting_scheme="uniform" if weighting == "uniform" else "inverse_distance")
    b.add_samples(x, labels)
    name = "oracle_" + weighting
    ct.utils.save_spec(b.spec, os.path.join(OUT, name + ".mlmodel"))

    sk = KNeighborsClassifier(n_neighbors=k, algorithm="brute", weights=weighting).fit(x.astype(np.float64), labels)
    dist, idx = sk.kneighbors(xq.astype(np.float64))
    proba = sk.predict_proba(xq.astype(np.float64))     # columns in sk.classes_ (sorted) order
    # Updraft's label order: first appearance among the samples, then the default label.
    order = list(dict.fromkeys(labels)) + ["none"]
    cols = [list(sk.classes_).index(l) if l in sk.classes_ else None for l in order]
    proba_updraft = [[float(p[c]) if c is not None else 0.0 for c in cols] for p in proba]
    data = os.path.join(OUT, name + "_data")
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "inputs.npy"), xq)
    np.save(os.path.join(data, "targets.npy"), np.array([order.index(LABELS[i]) for i in yq], dtype=np.int64))
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump({"k": k, "weighting": weighting, "labels": order, "queries": xq.tolist(),
                   "truth": [LABELS[i] for i in yq],
                   "neighbors": idx.tolist(), "distances": dist.tolist(),
                   "probabilities": proba_updraft, "predicted": list(sk.predict(xq.astype(np.float64))),
                   "accuracy": float(np.mean(sk.predict(xq.astype(np.float64)) == np.array([LABELS[i] for i in yq])))},
                  f, indent=1, sort_keys=True)


make("uniform", 11)
make("distance", 12)
