#!/usr/bin/env python3
"""Makes Tests/UpdraftTests/Fixtures/spatial: a small PyTorch model with squeeze-and-excitation and the
spatial layers, converted by coremltools (convert_to="neuralnetwork"), made updatable with coremltools'
NeuralNetworkBuilder, and PyTorch's own two SGD steps on a fixed batch as golden JSON.

The converter turns it into: convolution, global pooling (mean over H, W), multiply broadcasting
[1, C, 1, 1] over [1, C, H, W], loadConstantND + add (broadcast), reduceSum and reduceMean over the
channels, subtractBroadcastable / divideBroadcastable, add with one input (alpha), reflection padding,
bilinear upsample (align_corners=False), instance normalization (batchnorm computeMeanVar +
instanceNormalization) on a residual branch, softmax. The stem and head convolutions train, so the gradient comes back
through every layer. Run with torch and coremltools installed:
    python3 Tests/Scripts/make_spatial_fixtures.py
"""
import json
import os
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import coremltools as ct
from coremltools.models.neural_network import NeuralNetworkBuilder, SgdParams

warnings.filterwarnings("ignore")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "UpdraftTests", "Fixtures", "spatial")
LR, STEPS, BATCH, CLASSES, CHANNELS = 0.5, 2, 4, 4, 6


class SpatialSE(nn.Module):
    def __init__(self):
        super().__init__()
        c = CHANNELS
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.fc1 = nn.Conv2d(c, 3, 1)
        self.fc2 = nn.Conv2d(3, c, 1)
        self.register_buffer("shift", torch.randn(1, c, 1, 1) * 0.5)
        self.pad = nn.ReflectionPad2d((1, 0, 2, 1))  # left, right, top, bottom
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.norm = nn.InstanceNorm2d(c, affine=True)
        self.head = nn.Conv2d(c, CLASSES, 1)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.2, 0.2)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        x = self.up(self.pad(x))
        x = x + self.norm(x)
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(x.mean((2, 3), keepdim=True)))))
        x = x * s                                       # squeeze-and-excitation
        x = x + self.shift                              # a constant, broadcast
        x = x * torch.sigmoid(x.sum(dim=1, keepdim=True))
        x = x - x.mean(dim=1, keepdim=True)
        x = x / (2 + torch.relu(x.amax(dim=(2, 3), keepdim=True)))
        return torch.softmax(self.head(x).mean((2, 3), keepdim=True), dim=1)


def main():
    torch.manual_seed(1405)
    model = SpatialSE().eval()
    inputs = torch.rand(BATCH, 3, 8, 8) * 2 - 1
    labels = torch.tensor([0, 1, 2, 3])

    traced = torch.jit.trace(model, inputs[:1])
    ml = ct.convert(traced, inputs=[ct.TensorType(name="x", shape=(1, 3, 8, 8))], convert_to="neuralnetwork")
    spec = ml.get_spec()
    layers = spec.neuralNetwork.layers
    convs = [l.name for l in layers if l.WhichOneof("layer") == "convolution"]
    stem, head = convs[0], convs[-1]
    probabilities = spec.description.output[0].name
    builder = NeuralNetworkBuilder(spec=spec)
    builder.make_updatable([stem, head])
    builder.set_categorical_cross_entropy_loss(name="lossLayer", input=probabilities)
    builder.set_sgd_optimizer(SgdParams(lr=LR, batch=BATCH, momentum=0.0))
    builder.set_epochs(STEPS)
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "spatial_se.mlmodel")
    ct.utils.save_spec(builder.spec, path)

    # PyTorch's trajectory: cross-entropy of the probabilities (mean over the batch), plain SGD.
    train = SpatialSE()
    train.load_state_dict(model.state_dict())
    train.train()
    params = [train.stem.weight, train.stem.bias, train.head.weight, train.head.bias]
    for p in train.parameters():
        p.requires_grad_(any(p is q for q in params))
    optimizer = torch.optim.SGD(params, lr=LR, momentum=0.0)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        probs = train(inputs).reshape(BATCH, CLASSES)
        loss = F.nll_loss(torch.log(probs), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    golden = {
        "model": "spatial_se.mlmodel",
        "torch": torch.__version__, "coremltools": ct.__version__,
        "layers": [[l.name, l.WhichOneof("layer")] for l in layers],
        "stem": stem, "head": head, "learningRate": LR, "batch": BATCH,
        "inputs": inputs.reshape(-1).tolist(), "labels": labels.tolist(), "losses": losses,
        "stemWeights": train.stem.weight.detach().reshape(-1).tolist(),
        "stemBias": train.stem.bias.detach().tolist(),
        "headWeights": train.head.weight.detach().reshape(-1).tolist(),
        "headBias": train.head.bias.detach().tolist(),
    }
    with open(os.path.join(OUT, "spatial_se.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(layers)} layers, losses {losses}")
    for l in layers:
        print(" ", l.name, l.WhichOneof("layer"))


if __name__ == "__main__":
    main()
