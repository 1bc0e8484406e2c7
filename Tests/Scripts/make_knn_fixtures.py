#!/usr/bin/env python3
"""k-nearest-neighbors classifiers and pipelines made with coremltools' own builders, for the
model-kind tests (reading, writing back byte for byte, validation, inspect).

    Tests/UpdraftTests/Fixtures/knn/<name>.mlmodel   the model as coremltools saves it
    Tests/UpdraftTests/Fixtures/knn/<name>.json      what the builder was given (samples, labels, k, ...)

- knn_strings_linear: string labels, uniform weighting, linear index, k = 3 allowed 1...10, 4-D.
- knn_int64_kdtree: int64 labels, inverse-distance weighting, kd-tree (leaf size 5), k = 3 allowed {1, 3, 5}, 3-D.
- knn_empty: no samples yet, a default label (an empty k-NN is a valid start).
- pipeline_embedding_knn: a PipelineClassifier of a frozen inner-product embedding (6 -> 4) and an
  updatable k-NN on its output (the background article's recommendation), updatable.

Run once (needs coremltools, numpy) and commit the output:  python3 Tests/Scripts/make_knn_fixtures.py
"""
import json
import os

import numpy as np
import coremltools as ct
from coremltools.models import datatypes
from coremltools.models.nearest_neighbors import KNearestNeighborsClassifierBuilder
from coremltools.models.neural_network import NeuralNetworkBuilder
from coremltools.models.pipeline import PipelineClassifier

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "UpdraftTests", "Fixtures", "knn")
rng = np.random.default_rng(7)


def save(name, spec, info):
    os.makedirs(OUT, exist_ok=True)
    ct.utils.save_spec(spec, os.path.join(OUT, name + ".mlmodel"))
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)


def knn_strings_linear():
    points = rng.normal(size=(6, 4)).astype(np.float32)
    labels = ["cat", "dog", "cat", "bird", "dog", "cat"]
    b = KNearestNeighborsClassifierBuilder(input_name="features", output_name="label", number_of_dimensions=4,
                                           default_class_label="unknown", number_of_neighbors=3,
                                           weighting_scheme="uniform", index_type="linear")
    b.set_number_of_neighbors_with_bounds(3, allowed_range=(1, 10))
    b.add_samples(points, labels)
    save("knn_strings_linear", b.spec, {"dimension": 4, "samples": points.tolist(), "labels": labels, "default": "unknown",
                                        "k": 3, "allowed": {"range": [1, 10]}, "weighting": "uniform", "index": "linear"})


def knn_int64_kdtree():
    points = rng.normal(size=(5, 3)).astype(np.float32)
    labels = [7, 3, 7, 11, 3]
    b = KNearestNeighborsClassifierBuilder(input_name="x", output_name="digit", number_of_dimensions=3,
                                           default_class_label=0, number_of_neighbors=3,
                                           weighting_scheme="inverse_distance", index_type="kd_tree", leaf_size=5)
    b.set_number_of_neighbors_with_bounds(3, allowed_set={1, 3, 5})
    b.add_samples(points, labels)
    save("knn_int64_kdtree", b.spec, {"dimension": 3, "samples": points.tolist(), "labels": labels, "default": 0,
                                      "k": 3, "allowed": {"set": [1, 3, 5]}, "weighting": "inverseDistance",
                                      "index": "kdTree", "leafSize": 5})


def knn_empty():
    b = KNearestNeighborsClassifierBuilder(input_name="features", output_name="label", number_of_dimensions=8,
                                           default_class_label="nobody", number_of_neighbors=1)
    save("knn_empty", b.spec, {"dimension": 8, "samples": [], "labels": [], "default": "nobody", "k": 1,
                               "weighting": "uniform", "index": "linear"})


def pipeline_embedding_knn():
    # A frozen embedding network: image-free, a 6-vector in, a 4-vector out.
    nn = NeuralNetworkBuilder([("input", datatypes.Array(6))], [("embedding", datatypes.Array(4))])
    w = rng.normal(size=(4, 6)).astype(np.float32)
    nn.add_inner_product("embed", W=w, b=np.zeros(4, np.float32), input_channels=6, output_channels=4,
                         has_bias=True, input_name="input", output_name="embedding")
    nn.spec.specificationVersion = 4
    points = rng.normal(size=(4, 4)).astype(np.float32)
    labels = ["left", "right", "left", "right"]
    knn = KNearestNeighborsClassifierBuilder(input_name="embedding", output_name="label", number_of_dimensions=4,
                                             default_class_label="left", number_of_neighbors=1)
    knn.add_samples(points, labels)
    p = PipelineClassifier([("input", datatypes.Array(6))], ["left", "right"], output_features=[("label", datatypes.String())],
                           training_features=[("input", datatypes.Array(6)), ("label", datatypes.String())])
    p.add_model(nn.spec)
    p.add_model(knn.spec)
    p.spec.pipelineClassifier.pipeline.names.extend(["embedding", "knn"])
    p.make_updatable()
    p.spec.specificationVersion = 4
    save("pipeline_embedding_knn", p.spec, {"names": ["embedding", "knn"], "types": ["neuralNetwork", "kNearestNeighborsClassifier"],
                                            "samples": points.tolist(), "labels": labels, "embeddingWeights": w.tolist()})


knn_strings_linear()
knn_int64_kdtree()
knn_empty()
pipeline_embedding_knn()
