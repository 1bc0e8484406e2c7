#!/usr/bin/env python3
"""The oracle for Updraft's k-NN update: scikit-learn fitted on the model's samples followed by the
appended rows, which is what a model updated by appending must answer like.

Each case is a k-NN made by coremltools' KNearestNeighborsClassifierBuilder, training data to
append (the folder form `updraft train` reads), and held-out queries with the answers of
`sklearn.neighbors.KNeighborsClassifier(algorithm="brute")` fitted on the concatenated samples
(sample indices therefore count the model's samples first, then the appended rows in order):

- update_strings: 30 string-labelled samples (ant, bee, cow), uniform weighting, k = 5 allowed 1...10;
  20 rows to append with labels.txt, among them a label the model lacks (elk); the oracle uses k = 7
  (the update's --neighbors 7).
- update_int64: an empty k-NN with the int64 default label 0, inverse-distance weighting, k = 3;
  40 rows to append with int64 labels in targets.npy (the labels themselves: 4, 9, 16).

    Tests/UpdraftTests/Fixtures/knn/update_<case>.mlmodel   the model before the update
    Tests/UpdraftTests/Fixtures/knn/update_<case>_train/    inputs.npy + labels.txt or targets.npy
    Tests/UpdraftTests/Fixtures/knn/update_<case>.json      k, queries, neighbours, probabilities, predictions

Random continuous float32 data has no distance ties. Run once (needs coremltools, numpy,
scikit-learn) and commit the output:  python3 Tests/Scripts/make_knn_update_oracle.py
"""
import json
import os

import numpy as np
import coremltools as ct
from coremltools.models.nearest_neighbors import KNearestNeighborsClassifierBuilder
from sklearn.neighbors import KNeighborsClassifier

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "UpdraftTests", "Fixtures", "knn")


def oracle(name, builder, initial_x, initial_y, add_x, add_y, default, k, weighting, queries, label_file):
    ct.utils.save_spec(builder.spec, os.path.join(OUT, name + ".mlmodel"))
    data = os.path.join(OUT, name + "_train")
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "inputs.npy"), add_x)
    if label_file:
        with open(os.path.join(data, "labels.txt"), "w") as f:
            f.write("".join(str(l) + "\n" for l in add_y))
    else:
        np.save(os.path.join(data, "targets.npy"), np.array(add_y, dtype=np.int64))
    x = np.concatenate([initial_x, add_x]).astype(np.float64)
    y = list(initial_y) + list(add_y)
    sk = KNeighborsClassifier(n_neighbors=k, algorithm="brute", weights=weighting).fit(x, y)
    dist, idx = sk.kneighbors(queries.astype(np.float64))
    proba = sk.predict_proba(queries.astype(np.float64))
    order = list(dict.fromkeys(y))
    if default not in order:
        order.append(default)
    classes = list(sk.classes_)
    cols = [classes.index(l) if l in classes else None for l in order]
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump({"k": k, "weighting": weighting, "labels": [str(l) for l in order], "queries": queries.tolist(),
                   "appended": len(add_y), "neighbors": idx.tolist(), "distances": dist.tolist(),
                   "probabilities": [[float(p[c]) if c is not None else 0.0 for c in cols] for p in proba],
                   "predicted": [str(l) for l in sk.predict(queries.astype(np.float64))]},
                  f, indent=1, sort_keys=True)


def update_strings():
    rng = np.random.default_rng(21)
    d = 6
    names = ["ant", "bee", "cow", "elk"]
    centres = rng.normal(scale=1.2, size=(len(names), d))
    y0 = rng.integers(0, 3, size=30)
    x0 = (centres[y0] + rng.normal(size=(30, d))).astype(np.float32)
    y1 = rng.integers(0, 4, size=20)
    y1[:3] = 3  # the new label, early on
    x1 = (centres[y1] + rng.normal(size=(20, d))).astype(np.float32)
    q = (centres[rng.integers(0, 4, size=25)] + rng.normal(size=(25, d))).astype(np.float32)
    b = KNearestNeighborsClassifierBuilder(input_name="features", output_name="label", number_of_dimensions=d,
                                           default_class_label="nothing", number_of_neighbors=5, weighting_scheme="uniform")
    b.set_number_of_neighbors_with_bounds(5, allowed_range=(1, 10))
    b.add_samples(x0, [names[i] for i in y0])
    oracle("update_strings", b, x0, [names[i] for i in y0], x1, [names[i] for i in y1], "nothing", 7, "uniform", q, True)


def update_int64():
    rng = np.random.default_rng(22)
    d = 5
    labels = [4, 9, 16]
    centres = rng.normal(scale=1.5, size=(3, d))
    y1 = rng.integers(0, 3, size=40)
    x1 = (centres[y1] + rng.normal(size=(40, d))).astype(np.float32)
    q = (centres[rng.integers(0, 3, size=20)] + rng.normal(size=(20, d))).astype(np.float32)
    b = KNearestNeighborsClassifierBuilder(input_name="x", output_name="digit", number_of_dimensions=d,
                                           default_class_label=0, number_of_neighbors=3, weighting_scheme="inverse_distance")
    oracle("update_int64", b, np.zeros((0, d), np.float32), [], x1, [labels[i] for i in y1], 0, 3, "distance", q, False)


update_strings()
update_int64()
