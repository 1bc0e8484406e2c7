#!/usr/bin/env python3
"""Fixtures for Core ML's mvn layer (MeanVarianceNormalizeLayerParams), which coremltools' converters emit
for a layer norm: a small classifier built with coremltools' NeuralNetworkBuilder (add_mvn between an
updatable convolution and the head), and PyTorch's own SGD steps on the same network, where mvn per
channel with the variance normalized is F.instance_norm without scale and shift, as golden JSON (the
format of make_golden.py). Also two models with the mvn forms Updraft refuses by name (across the
channels, and without normalizing the variance).

    Tests/UpdraftTests/Fixtures/golden/mvn_cnn.mlmodel, mvn_cnn.json
    Tests/UpdraftTests/Fixtures/golden/mvn_across_channels.mlmodel, mvn_mean_only.mlmodel

Run once (needs torch, coremltools, numpy) and commit the output:  python3 Tests/Scripts/make_mvn_fixtures.py
"""
import json
import os

import numpy as np
import torch
import coremltools as ct
from coremltools.models import datatypes
from coremltools.models.neural_network import NeuralNetworkBuilder, SgdParams

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "UpdraftTests", "Fixtures", "golden")
C, H, W, FEATURES, CLASSES, EXAMPLES, BATCH, EPOCHS, EPS, LR = 3, 6, 6, 4, 3, 8, 4, 2, 1e-5, 0.1


def coreml_model(conv_w, conv_b, fc_w, fc_b):
    builder = NeuralNetworkBuilder([("input", datatypes.Array(C, H, W))], [("probs", None)], mode="classifier")
    builder.add_convolution(name="conv", kernel_channels=C, output_channels=FEATURES, height=3, width=3,
                            stride_height=1, stride_width=1, border_mode="same", groups=1,
                            W=conv_w.transpose(2, 3, 1, 0), b=conv_b, has_bias=True, input_name="input", output_name="conv_out")
    builder.add_mvn("mvn", "conv_out", "mvn_out", across_channels=False, normalize_variance=True, epsilon=EPS)
    builder.add_activation("relu", "RELU", "mvn_out", "relu_out")
    builder.add_pooling("gap", 1, 1, 1, 1, "AVERAGE", "VALID", "relu_out", "gap_out", is_global=True)
    builder.add_flatten("flatten", 0, "gap_out", "flat")
    builder.add_inner_product("fc", W=fc_w, b=fc_b, input_channels=FEATURES, output_channels=CLASSES, has_bias=True,
                              input_name="flat", output_name="logits")
    builder.add_softmax("softmax", "logits", "probs")
    builder.set_class_labels([str(i) for i in range(CLASSES)], predicted_feature_name="label", prediction_blob="probs")
    builder.make_updatable(["conv", "fc"])
    builder.set_categorical_cross_entropy_loss(name="loss", input="probs")
    builder.set_sgd_optimizer(SgdParams(lr=LR, batch=BATCH, momentum=0.9))
    builder.set_epochs(EPOCHS)
    builder.nn_spec.updateParams.shuffle.defaultValue = False
    builder.spec.specificationVersion = 4
    return builder.spec


def refused_model(across_channels, normalize_variance):
    builder = NeuralNetworkBuilder([("input", datatypes.Array(C, H, W))], [("output", None)])
    builder.add_mvn("mvn", "input", "output", across_channels=across_channels, normalize_variance=normalize_variance,
                    epsilon=EPS)
    return builder.spec


def main():
    rng = np.random.default_rng(21)
    bound = 1 / np.sqrt(C * 9)
    conv_w = rng.uniform(-bound, bound, size=(FEATURES, C, 3, 3)).astype(np.float32)
    conv_b = rng.uniform(-bound, bound, size=FEATURES).astype(np.float32)
    fc_w = rng.uniform(-0.5, 0.5, size=(CLASSES, FEATURES)).astype(np.float32)
    fc_b = rng.uniform(-0.5, 0.5, size=CLASSES).astype(np.float32)
    x = rng.uniform(0, 1, size=(EXAMPLES, C, H, W)).astype(np.float32)
    labels = rng.integers(0, CLASSES, size=EXAMPLES)

    conv = torch.nn.Conv2d(C, FEATURES, 3, padding=1)
    fc = torch.nn.Linear(FEATURES, CLASSES)
    with torch.no_grad():
        conv.weight.copy_(torch.from_numpy(conv_w)); conv.bias.copy_(torch.from_numpy(conv_b))
        fc.weight.copy_(torch.from_numpy(fc_w)); fc.bias.copy_(torch.from_numpy(fc_b))
    params = list(conv.parameters()) + list(fc.parameters())
    opt = torch.optim.SGD(params, lr=LR, momentum=0.9)
    losses = []
    for _ in range(EPOCHS):
        for start in range(0, EXAMPLES, BATCH):
            xb = torch.from_numpy(x[start:start + BATCH])
            yb = torch.from_numpy(labels[start:start + BATCH]).long()
            opt.zero_grad()
            h = torch.nn.functional.instance_norm(conv(xb), eps=EPS)  # mvn: per image and channel
            loss = torch.nn.functional.cross_entropy(fc(torch.relu(h).mean(dim=(2, 3))), yb)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    final = {name: {"weights": layer.weight.detach().numpy().ravel().tolist(), "bias": layer.bias.detach().numpy().ravel().tolist()}
             for name, layer in (("conv", conv), ("fc", fc))}
    os.makedirs(OUT, exist_ok=True)
    ct.utils.save_spec(coreml_model(conv_w, conv_b, fc_w, fc_b), os.path.join(OUT, "mvn_cnn.mlmodel"))
    with open(os.path.join(OUT, "mvn_cnn.json"), "w") as f:
        json.dump({"about": "PyTorch %s (instance_norm for mvn), made by Tests/Scripts/make_mvn_fixtures.py" % torch.__version__,
                   "optimizer": "sgd", "batch": BATCH, "epochs": EPOCHS, "shape": [C, H, W], "inputs": x.ravel().tolist(),
                   "labels": labels.tolist(), "losses": losses, "final": final}, f)
    ct.utils.save_spec(refused_model(True, True), os.path.join(OUT, "mvn_across_channels.mlmodel"))
    ct.utils.save_spec(refused_model(False, False), os.path.join(OUT, "mvn_mean_only.mlmodel"))
    print("mvn_cnn losses", ["%.6f" % l for l in losses])


if __name__ == "__main__":
    main()
