#!/usr/bin/env python3
"""Pipelines made with coremltools' own builders, for running and training them (PipelineTests).

    Tests/UpdraftTests/Fixtures/pipeline/<name>.mlmodel  the model as coremltools saves it
    Tests/UpdraftTests/Fixtures/pipeline/data/           inputs.npy (16 x 6 float32), targets.npy (16 int64 class indices)

- network_last: a PipelineClassifier of a frozen embedding network ("embedding": inner product 6 -> 5
  and ReLU) and an updatable classifier network ("classifier": inner product 5 -> 3 and softmax,
  cross-entropy, SGD lr 0.1, batch 4, 3 epochs).
- network_last_flat: the same layers, weights and update parameters as ONE neural network classifier,
  built independently: training it must give the pipeline's classifier the same weights.

Run once (needs coremltools, numpy) and commit the output:  python3 Tests/Scripts/make_pipeline_fixtures.py
"""
import os

import numpy as np
import coremltools as ct
from coremltools.models import datatypes
from coremltools.models.neural_network import NeuralNetworkBuilder, SgdParams
from coremltools.models.pipeline import PipelineClassifier

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "UpdraftTests", "Fixtures", "pipeline")
rng = np.random.default_rng(11)
LABELS = ["a", "b", "c"]
W_EMBED = rng.normal(size=(5, 6)).astype(np.float32)
B_EMBED = rng.normal(size=5).astype(np.float32) * 0.1
W_FC = rng.normal(size=(3, 5)).astype(np.float32) * 0.5
B_FC = np.zeros(3, np.float32)


def add_embedding(b, prefix_out):
    b.add_inner_product("embed", W=W_EMBED, b=B_EMBED, input_channels=6, output_channels=5, has_bias=True,
                        input_name="input", output_name=prefix_out)
    b.add_activation("embed_relu", "RELU", input_name=prefix_out, output_name="embedding")


def add_classifier(b, input_name):
    b.add_inner_product("fc", W=W_FC, b=B_FC, input_channels=5, output_channels=3, has_bias=True,
                        input_name=input_name, output_name="logits")
    b.add_softmax("prob", input_name="logits", output_name="probs")
    b.set_class_labels(LABELS, predicted_feature_name="label", prediction_blob="probs")
    b.make_updatable(["fc"])
    b.set_categorical_cross_entropy_loss(name="loss", input="probs")
    b.set_sgd_optimizer(SgdParams(lr=0.1, batch=4))
    b.set_epochs(3)


def network_last():
    emb = NeuralNetworkBuilder([("input", datatypes.Array(6))], [("embedding", datatypes.Array(5))])
    add_embedding(emb, "embed_out")
    emb.spec.specificationVersion = 4
    cls = NeuralNetworkBuilder([("embedding", datatypes.Array(5))], [("probs", None)], mode="classifier")
    add_classifier(cls, "embedding")
    cls.spec.specificationVersion = 4
    p = PipelineClassifier([("input", datatypes.Array(6))], LABELS,
                           training_features=[("input", datatypes.Array(6)), ("label", datatypes.String())])
    p.add_model(emb.spec)
    p.add_model(cls.spec)
    p.spec.pipelineClassifier.pipeline.names.extend(["embedding", "classifier"])
    p.spec.isUpdatable = True
    p.spec.specificationVersion = 4
    ct.utils.save_spec(p.spec, os.path.join(OUT, "network_last.mlmodel"))


def network_last_flat():
    b = NeuralNetworkBuilder([("input", datatypes.Array(6))], [("probs", None)], mode="classifier")
    add_embedding(b, "embed_out")
    add_classifier(b, "embedding")
    b.spec.specificationVersion = 4
    ct.utils.save_spec(b.spec, os.path.join(OUT, "network_last_flat.mlmodel"))


def data():
    os.makedirs(os.path.join(OUT, "data"), exist_ok=True)
    x = rng.normal(size=(16, 6)).astype(np.float32)
    y = rng.integers(0, 3, size=16).astype(np.int64)
    np.save(os.path.join(OUT, "data", "inputs.npy"), x)
    np.save(os.path.join(OUT, "data", "targets.npy"), y)


os.makedirs(OUT, exist_ok=True)
network_last()
network_last_flat()
data()
