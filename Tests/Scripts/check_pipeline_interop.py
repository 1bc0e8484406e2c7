#!/usr/bin/env python3
"""Pipelines written by Updraft, read back by coremltools as Updraft meant them (`make interop`).

    python3 Tests/Scripts/check_pipeline_interop.py PATH/TO/updraft

1. `updraft create knn` on a SqueezeNet that `updraft create squeezenet` made: coremltools reads a
   pipelineClassifier of two models; the extractor's layers are the SqueezeNet's own layers (names,
   types and weights equal, as coremltools reads both files) up to the layer the classifier head
   reads, frozen; the k-NN is empty, of that layer's width, with the k, weighting and index asked for.
2. `updraft train` on the fixture pipeline whose last model is a network, and on its flat twin (the
   same layers built by coremltools as one network): coremltools reads the trained pipeline; its
   first model is the fixture's, unchanged; its classifier's weights equal the trained twin's.
3. `updraft train` on the fixture pipeline of a PyTorch CNN converted by coremltools and an empty k-NN
   (make_knn_torch_fixtures.py), from its 12 images: coremltools reads the pipeline; its k-NN holds
   PyTorch's embedding of each image (within 1e-4) with the image's folder as label; the CNN is unchanged.
Exit status 1 on any disagreement, with every problem listed.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import coremltools as ct

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "UpdraftTests", "Fixtures", "pipeline")


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def layer_weights(layer):
    kind = layer.WhichOneof("layer")
    params = getattr(layer, kind)
    if kind in ("convolution", "innerProduct"):
        return kind, np.array(params.weights.floatValue), np.array(params.bias.floatValue)
    return kind, None, None


def check_created_knn(updraft, folder, problems):
    source = os.path.join(folder, "squeezenet.mlmodel")
    out = os.path.join(folder, "knn.mlmodel")
    run([updraft, "create", "squeezenet", "--classes", "4", "--seed", "2", "--input-size", "64", "--out", source])
    run([updraft, "create", "knn", "--feature-extractor", source, "--neighbors", "5", "--weighting", "distance",
         "--index", "kdtree", "--leaf-size", "12", "--out", out])
    net = ct.utils.load_spec(source).neuralNetworkClassifier
    spec = ct.utils.load_spec(out)
    if spec.WhichOneof("Type") != "pipelineClassifier":
        problems.append(f"create knn: a {spec.WhichOneof('Type')}, not a pipelineClassifier")
        return
    models = spec.pipelineClassifier.pipeline.models
    if len(models) != 2 or list(spec.pipelineClassifier.pipeline.names) != ["embedding", "knn"]:
        problems.append(f"create knn: {len(models)} models named {list(spec.pipelineClassifier.pipeline.names)}")
        return
    extractor, knn = models[0], models[1]
    layers = extractor.neuralNetwork.layers
    head = [l for l in net.layers if l.WhichOneof("layer") == "innerProduct"][-1]
    width = head.innerProduct.inputChannels
    kept = [l.name for l in net.layers[:len(layers)]]
    if [l.name for l in layers] != kept or head.name in kept:
        problems.append(f"create knn: extractor layers {[l.name for l in layers][-3:]} are not the network's up to its head")
    for mine, theirs in zip(layers, net.layers):
        a, b = layer_weights(mine), layer_weights(theirs)
        if a[0] != b[0] or (a[1] is not None and (not np.array_equal(a[1], b[1]) or not np.array_equal(a[2], b[2]))):
            problems.append(f"create knn: layer {mine.name} differs from the network's")
        if mine.isUpdatable:
            problems.append(f"create knn: extractor layer {mine.name} is updatable")
    if list(extractor.neuralNetwork.preprocessing) != list(net.preprocessing):
        problems.append("create knn: the extractor's image preprocessing is not the network's")
    k = knn.kNearestNeighborsClassifier
    if knn.WhichOneof("Type") != "kNearestNeighborsClassifier" or not knn.isUpdatable:
        problems.append(f"create knn: the last model is a {knn.WhichOneof('Type')}, updatable {knn.isUpdatable}")
        return
    got = (k.nearestNeighborsIndex.numberOfDimensions, len(k.nearestNeighborsIndex.floatSamples), k.numberOfNeighbors.defaultValue,
           k.WhichOneof("WeightingScheme"), k.nearestNeighborsIndex.WhichOneof("IndexType"),
           k.nearestNeighborsIndex.singleKdTreeIndex.leafSize, k.stringClassLabels.vector[:] if k.HasField("stringClassLabels") else None)
    want = (width, 0, 5, "inverseDistanceWeighting", "singleKdTreeIndex", 12, [])
    if got != want:
        problems.append(f"create knn: k-NN (dimension, samples, k, weighting, index, leaf, labels) = {got}, expected {want}")


def check_trained_pipeline(updraft, folder, problems):
    data = os.path.join(FIXTURES, "data")
    out = {}
    for name in ("network_last", "network_last_flat"):
        out[name] = os.path.join(folder, name + ".mlmodel")
        run([updraft, "train", os.path.join(FIXTURES, name + ".mlmodel"), "--train", data, "--seed", "4",
             "--compute-units", "cpuOnly", "--out", out[name]])
    original = ct.utils.load_spec(os.path.join(FIXTURES, "network_last.mlmodel")).pipelineClassifier.pipeline
    trained = ct.utils.load_spec(out["network_last"]).pipelineClassifier.pipeline
    twin = ct.utils.load_spec(out["network_last_flat"]).neuralNetworkClassifier
    if trained.models[0] != original.models[0]:
        problems.append("trained pipeline: its frozen first model changed")
    fc = [l for l in trained.models[1].neuralNetworkClassifier.layers if l.name == "fc"][0]
    fc_twin = [l for l in twin.layers if l.name == "fc"][0]
    fc_before = [l for l in original.models[1].neuralNetworkClassifier.layers if l.name == "fc"][0]
    w, w_twin, w0 = (np.array(l.innerProduct.weights.floatValue) for l in (fc, fc_twin, fc_before))
    if not np.array_equal(w, w_twin):
        problems.append(f"trained pipeline: fc weights differ from the flat twin's by {np.abs(w - w_twin).max()}")
    if np.array_equal(w, w0):
        problems.append("trained pipeline: fc did not change")


def check_personalised_torch_pipeline(updraft, folder, problems):
    knn_fixtures = os.path.join(HERE, "..", "UpdraftTests", "Fixtures", "knn")
    out = os.path.join(folder, "torch_personalised.mlmodel")
    run([updraft, "train", os.path.join(knn_fixtures, "torch_pipeline.mlmodel"), "--train", os.path.join(knn_fixtures, "torch_train"),
         "--compute-units", "cpuOnly", "--out", out])
    with open(os.path.join(knn_fixtures, "torch_pipeline.json")) as f:
        made = json.load(f)
    before = ct.utils.load_spec(os.path.join(knn_fixtures, "torch_pipeline.mlmodel")).pipelineClassifier.pipeline
    after = ct.utils.load_spec(out).pipelineClassifier.pipeline
    if after.models[0] != before.models[0]:
        problems.append("personalised pipeline: the converted CNN changed")
    knn = after.models[1].kNearestNeighborsClassifier
    samples = np.array([list(v.vector) for v in knn.nearestNeighborsIndex.floatSamples], dtype=np.float32)
    expected = np.array(made["trainEmbeddings"], dtype=np.float32)
    if samples.shape != expected.shape or np.abs(samples - expected).max() > 1e-4:
        problems.append(f"personalised pipeline: samples {samples.shape} are not PyTorch's embeddings {expected.shape}")
    labels = list(knn.stringClassLabels.vector)
    if labels != made["trainLabels"]:
        problems.append(f"personalised pipeline: labels {labels[:4]}..., expected {made['trainLabels'][:4]}...")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    updraft = sys.argv[1]
    problems = []
    with tempfile.TemporaryDirectory() as folder:
        for check in (check_created_knn, check_trained_pipeline, check_personalised_torch_pipeline):
            try:
                check(updraft, folder, problems)
            except Exception as e:  # a file coremltools cannot parse is a failure, not a crash
                problems.append(f"{check.__name__}: {type(e).__name__}: {e}")
    for p in problems:
        print(f"FAIL {p}")
    print(f"check_pipeline_interop: {'ok' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
