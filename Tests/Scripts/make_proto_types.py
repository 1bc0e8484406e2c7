#!/usr/bin/env python3
"""The oneof cases of coremltools' own protos that name a kind of thing, for CoreMLTypesTests:

    Tests/UpdraftTests/Fixtures/coreml_proto_types.json
      {"coremltools": version,
       "NeuralNetworkLayer.layer": {name: field number, ...},
       "ActivationParams.NonlinearityType": {...},
       "Model.Type": {...}}

Updraft writes each of these numbers and names once (Sources/UpdraftModel/CoreML/Spec/CoreMLTypes.swift);
the test checks that table case by case against what coremltools' compiled descriptors say.

Run once (needs coremltools) and commit the output:  python3 Tests/Scripts/make_proto_types.py
"""
import json
import os

import coremltools
from coremltools.proto import Model_pb2, NeuralNetwork_pb2


def oneof(message, name):
    return {f.name: f.number for f in message.DESCRIPTOR.oneofs_by_name[name].fields}


out = {
    "coremltools": coremltools.__version__,
    "NeuralNetworkLayer.layer": oneof(NeuralNetwork_pb2.NeuralNetworkLayer, "layer"),
    "ActivationParams.NonlinearityType": oneof(NeuralNetwork_pb2.ActivationParams, "NonlinearityType"),
    "Model.Type": oneof(Model_pb2.Model, "Type"),
}
path = os.path.join(os.path.dirname(__file__), "..", "UpdraftTests", "Fixtures", "coreml_proto_types.json")
with open(path, "w") as f:
    json.dump(out, f, indent=1, sort_keys=True)
    f.write("\n")
print("wrote", os.path.normpath(path), {k: len(v) for k, v in out.items() if isinstance(v, dict)})
