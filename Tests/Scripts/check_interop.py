#!/usr/bin/env python3
"""Checks that coremltools reads the Core ML models Updraft wrote the way Updraft meant them.

    python3 Tests/Scripts/check_interop.py DIR

Every DIR/NAME.mlmodel must have a sidecar DIR/NAME.json, written by Updraft (`updraft create
... --sidecar`, `updraft reinit ... --sidecar`) from its in-memory view of the model. This script
loads each model with coremltools.utils.load_spec (the protobuf reference implementation) and
compares, for the model and every convolution and inner-product layer: the model's version,
updatable flag, kind, class labels and loss; each layer's type and updatable flag; and its weight
and bias values (count, CRC-32 of the float32 little-endian bytes, first values) and their
isUpdatable flags. For a k-nearest-neighbors classifier (Updraft's `train` appending samples, or
`updraft knn` editing them) it compares the samples (dimension, count, CRC-32, first values), each
sample's label and its type, numberOfNeighbors with its allowed range or set, the weighting, the
index and the default label. Exits 1 listing every mismatch, 0 when all agree.
"""
import contextlib
import glob
import io
import json
import os
import sys
import zlib

import numpy as np

with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
    import coremltools  # noqa: E402  (quiet: it warns about macOS-only parts)


def weight_values(w):
    """float32 values of a WeightParams (float16 widened), or None for other encodings."""
    if w.HasField("quantization") or len(w.rawValue) or len(w.int8RawValue):
        return None
    if len(w.float16Value):
        return np.frombuffer(w.float16Value, dtype="<f2").astype("<f4")
    return np.asarray(w.floatValue, dtype="<f4")


def compare_values(where, expected, w, problems):
    values = weight_values(w)
    if expected is None:
        if values is not None and len(values):
            problems.append(f"{where}: Updraft saw no readable values, coremltools reads {len(values)}")
        return
    if values is None:
        problems.append(f"{where}: coremltools finds no float values (quantized or raw), Updraft expected {expected['count']}")
        return
    if len(values) != expected["count"]:
        problems.append(f"{where}: {len(values)} values, Updraft wrote {expected['count']}")
        return
    crc = zlib.crc32(values.astype("<f4").tobytes()) & 0xFFFFFFFF
    if crc != expected["crc32"]:
        problems.append(f"{where}: CRC-32 {crc:#010x} of the values, Updraft's is {expected['crc32']:#010x}")
    first = [float(np.float32(v)) for v in expected["first"]]
    if [float(v) for v in values[: len(first)]] != first:
        problems.append(f"{where}: first values {values[:len(first)].tolist()}, Updraft's {first}")
    if bool(w.isUpdatable) != bool(expected["isUpdatable"]):
        problems.append(f"{where}: isUpdatable {w.isUpdatable}, Updraft wrote {expected['isUpdatable']}")


def check_knn(knn, expected, problems):
    """A kNearestNeighborsClassifier message against Updraft's sidecar."""
    index = knn.nearestNeighborsIndex
    samples = np.asarray([list(s.vector) for s in index.floatSamples], dtype="<f4")
    if index.numberOfDimensions != expected["dimension"]:
        problems.append(f"numberOfDimensions {index.numberOfDimensions}, Updraft wrote {expected['dimension']}")
    if len(index.floatSamples) != expected["samples"]:
        problems.append(f"{len(index.floatSamples)} samples, Updraft wrote {expected['samples']}")
    elif expected["samples"]:
        crc = zlib.crc32(samples.reshape(-1).tobytes()) & 0xFFFFFFFF
        if crc != expected["crc32"]:
            problems.append(f"samples' CRC-32 {crc:#010x}, Updraft's is {expected['crc32']:#010x}")
        first = [float(np.float32(v)) for v in expected["first"]]
        if [float(v) for v in samples.reshape(-1)[: len(first)]] != first:
            problems.append(f"first sample values {samples.reshape(-1)[:len(first)].tolist()}, Updraft's {first}")
    which = knn.WhichOneof("ClassLabels")
    labels = [str(v) for v in getattr(knn, which).vector] if which else []
    if labels != expected["labels"]:
        problems.append(f"labels {labels[:5]}... ({len(labels)}), Updraft wrote {expected['labels'][:5]}... ({len(expected['labels'])})")
    types = {"stringClassLabels": "string", "int64ClassLabels": "int64", None: None}
    if types[which] != expected.get("labelType"):
        problems.append(f"labels are {which}, Updraft wrote {expected.get('labelType')} labels")
    k = knn.numberOfNeighbors
    if k.defaultValue != expected["k"]:
        problems.append(f"numberOfNeighbors {k.defaultValue}, Updraft wrote {expected['k']}")
    allowed = k.WhichOneof("AllowedValues")
    if allowed == "range" and [k.range.minValue, k.range.maxValue] != expected.get("allowedRange"):
        problems.append(f"numberOfNeighbors range {[k.range.minValue, k.range.maxValue]}, Updraft wrote {expected.get('allowedRange')}")
    if allowed == "set" and sorted(k.set.values) != sorted(expected.get("allowedSet") or []):
        problems.append(f"numberOfNeighbors set {sorted(k.set.values)}, Updraft wrote {expected.get('allowedSet')}")
    if allowed is None and (expected.get("allowedRange") or expected.get("allowedSet")):
        problems.append("numberOfNeighbors has no allowed values, Updraft wrote some")
    if knn.WhichOneof("WeightingScheme") != expected.get("weighting"):
        problems.append(f"weighting {knn.WhichOneof('WeightingScheme')}, Updraft wrote {expected.get('weighting')}")
    if index.WhichOneof("IndexType") != expected.get("index"):
        problems.append(f"index {index.WhichOneof('IndexType')}, Updraft wrote {expected.get('index')}")
    if expected.get("leafSize") is not None and index.singleKdTreeIndex.leafSize != expected["leafSize"]:
        problems.append(f"kd-tree leaf size {index.singleKdTreeIndex.leafSize}, Updraft wrote {expected['leafSize']}")
    default = knn.WhichOneof("DefaultClassLabel")
    value = str(getattr(knn, default)) if default else None
    if value != expected.get("defaultLabel"):
        problems.append(f"default label {value}, Updraft wrote {expected.get('defaultLabel')}")
    return problems


def check(model_path, sidecar_path):
    problems = []
    with open(sidecar_path) as f:
        expected = json.load(f)
    spec = coremltools.utils.load_spec(model_path)
    kind = spec.WhichOneof("Type")
    if kind != expected["kind"]:
        return [f"model type {kind}, Updraft wrote {expected['kind']}"]
    nn = getattr(spec, kind)
    if spec.specificationVersion != expected["specificationVersion"]:
        problems.append(f"specificationVersion {spec.specificationVersion}, Updraft wrote {expected['specificationVersion']}")
    if spec.isUpdatable != expected["isUpdatable"]:
        problems.append(f"isUpdatable {spec.isUpdatable}, Updraft wrote {expected['isUpdatable']}")
    if kind == "kNearestNeighborsClassifier":
        return check_knn(nn, expected["kNearestNeighbors"], problems)
    if expected.get("classLabels") is not None:
        which = nn.WhichOneof("ClassLabels")
        labels = [str(v) for v in getattr(nn, which).vector] if which else []
        if labels != expected["classLabels"]:
            problems.append(f"class labels {labels[:5]}..., Updraft wrote {expected['classLabels'][:5]}...")
    losses = [l.name for l in nn.updateParams.lossLayers]
    if expected.get("loss") is not None and losses[:1] != [expected["loss"]]:
        problems.append(f"loss layers {losses}, Updraft wrote {expected['loss']}")

    layers = {l.name: l for l in nn.layers}
    weighted = [l.name for l in nn.layers if l.WhichOneof("layer") in ("convolution", "innerProduct")]
    described = [l["name"] for l in expected["layers"]]
    if sorted(weighted) != sorted(described):
        problems.append(f"weighted layers {weighted}, Updraft described {described}")
    for e in expected["layers"]:
        layer = layers.get(e["name"])
        if layer is None:
            problems.append(f"layer {e['name']}: missing")
            continue
        kind = layer.WhichOneof("layer")
        if kind != e["type"]:
            problems.append(f"layer {e['name']}: type {kind}, Updraft wrote {e['type']}")
            continue
        if layer.isUpdatable != e["isUpdatable"]:
            problems.append(f"layer {e['name']}: isUpdatable {layer.isUpdatable}, Updraft wrote {e['isUpdatable']}")
        params = getattr(layer, kind)
        weights, bias = (params.weights, params.bias)
        compare_values(f"layer {e['name']} weights", e.get("weights"), weights, problems)
        if e.get("bias") is not None or params.hasBias:
            compare_values(f"layer {e['name']} bias", e.get("bias"), bias, problems)
    return problems


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = sys.argv[1]
    models = sorted(glob.glob(os.path.join(folder, "*.mlmodel")))
    if not models:
        print(f"check_interop: no .mlmodel files in {folder}", file=sys.stderr)
        return 1
    failed = 0
    for path in models:
        sidecar = os.path.splitext(path)[0] + ".json"
        name = os.path.basename(path)
        if not os.path.exists(sidecar):
            print(f"FAIL {name}: no sidecar {os.path.basename(sidecar)}")
            failed += 1
            continue
        try:
            problems = check(path, sidecar)
        except Exception as e:  # a file coremltools cannot parse is a failure, not a crash
            problems = [f"coremltools cannot read it: {type(e).__name__}: {e}"]
        if problems:
            failed += 1
            print(f"FAIL {name}")
            for p in problems:
                print(f"  {p}")
        else:
            print(f"ok   {name}")
    print(f"check_interop: {len(models) - failed} of {len(models)} models agree with Updraft's sidecars")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
