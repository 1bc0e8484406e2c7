#!/usr/bin/env python3
"""Converted PyTorch models for the layout layers (reshapeStatic, multi-array inputs of rank 2 and 4).

Converts two tiny PyTorch classifiers the way a user would,
`ct.convert(torch.jit.trace(net, x), convert_to="neuralnetwork", inputs=[ct.TensorType(shape=...)])`,
makes the last inner product updatable with coremltools' NeuralNetworkBuilder (make_updatable,
set_categorical_cross_entropy_loss, set_sgd_optimizer), trains the same network in PyTorch for a few
steps, and writes both in the format of make_golden.py:

    Tests/UpdraftTests/Fixtures/golden/<name>.mlmodel   the converted, updatable model before training
    Tests/UpdraftTests/Fixtures/golden/<name>.json      inputs, labels, per-step losses, final weights

- flatten_cnn: input [1, 3, 8, 8] -> conv -> relu -> max pool -> torch.flatten (reshapeStatic
  [1, 64]) -> linear -> softmax.
- mlp: input [1, 10] (a rank-2 multi-array, how converted MLPs come out) -> linear -> relu -> linear -> softmax.
- layout_cnn: input [1, 3, 5, 5] -> conv -> relu -> channel shuffle (unflatten, transpose(1, 2), flatten:
  reshapeStatic, transpose, reshapeStatic) -> cat with its H/W transpose along W (transpose, concatND) ->
  softmax over H (softmaxND axis 2) -> flatten -> linear -> softmax; the conv and the linear layer train,
  so gradients cross every layout op.

The converter writes the final softmax as softmaxND; Core ML's cross-entropy loss needs a softmax
layer, so the script turns it into one (the same values: a softmax over the last axis of [1, K]).

Run once (needs torch, coremltools, numpy) and commit the output:  python3 Tests/Scripts/make_layout_fixtures.py
"""
import json
import os

import numpy as np
import torch
import coremltools as ct
from coremltools.models.neural_network import NeuralNetworkBuilder, SgdParams

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "UpdraftTests", "Fixtures", "golden")
CLASSES = 3
EXAMPLES = 8
BATCH = 4
EPOCHS = 2
LR, MOMENTUM = 0.1, 0.9


class FlattenCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(64, CLASSES)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)  # [N, 4, 4, 4]
        return self.fc(torch.flatten(x, 1))                                # logits [N, 3]


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(10, 8)
        self.fc = torch.nn.Linear(8, CLASSES)

    def forward(self, x):
        return self.fc(torch.relu(self.hidden(x)))


class LayoutCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 5 * 10, CLASSES)

    def forward(self, x):
        x = torch.relu(self.conv(x))                            # [N, 4, 5, 5]
        x = x.unflatten(1, (2, 2)).transpose(1, 2).flatten(1, 2)  # channel shuffle, groups of 2
        x = torch.cat([x, x.permute(0, 1, 3, 2)], dim=3)        # [N, 4, 5, 10]
        x = torch.softmax(x, dim=2)
        return self.fc(torch.flatten(x, 1))


class WithSoftmax(torch.nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return torch.softmax(self.net(x), 1)


def convert(net, shape, trainable):
    traced = torch.jit.trace(WithSoftmax(net).eval(), torch.rand(*shape))
    mlmodel = ct.convert(traced, convert_to="neuralnetwork", inputs=[ct.TensorType(name="input", shape=shape)])
    spec = mlmodel.get_spec()
    layers = spec.neuralNetwork.layers
    assert layers[-1].WhichOneof("layer") == "softmaxND", [l.WhichOneof("layer") for l in layers]
    layers[-1].softmax.SetInParent()  # a softmax over the last axis of [1, K], as Core ML's loss requires
    kinds = {"fc": "innerProduct", "conv": "convolution"}
    names = {t: [l.name for l in layers if l.WhichOneof("layer") == kinds[t]][-1] for t in trainable}
    builder = NeuralNetworkBuilder(spec=spec)
    builder.make_updatable([names[t] for t in trainable])
    builder.set_categorical_cross_entropy_loss(name="loss", input=layers[-1].output[0])
    builder.set_sgd_optimizer(SgdParams(lr=LR, batch=BATCH, momentum=MOMENTUM))
    builder.set_epochs(EPOCHS)
    builder.nn_spec.updateParams.shuffle.defaultValue = False
    return builder.spec, names, [l.WhichOneof("layer") for l in layers]


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, make, shape, seed, trainable in (("flatten_cnn", FlattenCNN, (1, 3, 8, 8), 11, ["fc"]),
                                               ("mlp", MLP, (1, 10), 12, ["fc"]),
                                               ("layout_cnn", LayoutCNN, (1, 3, 5, 5), 13, ["conv", "fc"])):
        torch.manual_seed(seed)
        net = make()
        spec, names, types = convert(net, shape, trainable)
        rng = np.random.default_rng(seed)
        x = rng.uniform(-1, 1, size=(EXAMPLES,) + shape[1:]).astype(np.float32)
        labels = rng.integers(0, CLASSES, size=EXAMPLES)
        for p in net.parameters():
            p.requires_grad_(False)
        params = [p for t in trainable for p in (getattr(net, t).weight, getattr(net, t).bias)]
        for p in params:
            p.requires_grad_(True)
        opt = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)
        losses = []
        for epoch in range(EPOCHS):
            for start in range(0, EXAMPLES, BATCH):
                xb = torch.from_numpy(x[start:start + BATCH])
                yb = torch.from_numpy(labels[start:start + BATCH]).long()
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(net(xb), yb)
                loss.backward()
                opt.step()
                losses.append(float(loss.detach()))
        final = {names[t]: {"weights": getattr(net, t).weight.detach().numpy().ravel().tolist(),
                            "bias": getattr(net, t).bias.detach().numpy().ravel().tolist()} for t in trainable}
        ct.utils.save_spec(spec, os.path.join(OUT, name + ".mlmodel"))
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump({"about": "PyTorch %s, coremltools %s, made by Tests/Scripts/make_layout_fixtures.py"
                       % (torch.__version__, ct.__version__),
                       "layers": types, "optimizer": "sgd", "batch": BATCH, "epochs": EPOCHS, "shape": list(shape),
                       "inputs": x.ravel().tolist(), "labels": labels.tolist(), "losses": losses,
                       "final": final}, f)
        print(name, types, "losses", ["%.6f" % l for l in losses])


if __name__ == "__main__":
    main()
