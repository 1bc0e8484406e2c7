#!/usr/bin/env python3
"""Golden training trajectories from PyTorch, for Updraft's training tests.

Builds a small updatable Core ML classifier with coremltools (conv -> relu -> two branches (1x1 and
3x3 conv + relu) -> concat -> ceil-mode max pool -> global average pool -> flatten -> inner product ->
softmax; the two branch convolutions and the inner product are updatable, so gradients must flow
through concat and pooling, which Core ML itself cannot do), trains the same network in PyTorch for a
few steps, and writes both next to each other:

    Tests/UpdraftTests/Fixtures/golden/<name>.mlmodel   the model before training
    Tests/UpdraftTests/Fixtures/golden/<name>.json      inputs, labels, per-step losses, final weights

Run once (needs torch, coremltools, numpy) and commit the output:  python3 Tests/Scripts/make_golden.py
(or name the runs to make: python3 Tests/Scripts/make_golden.py adamw). The adamw run trains with
torch.optim.AdamW (weight decay 0.1); its model names Adam, since a Core ML model cannot hold AdamW, and
Updraft trains it with UpdateConfiguration.optimizer = .adamW.
"""
import json
import os
import sys

import numpy as np
import torch
import coremltools as ct
from coremltools.models import datatypes
from coremltools.models.neural_network import NeuralNetworkBuilder, SgdParams, AdamParams

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "UpdraftTests", "Fixtures", "golden")
C, H, W = 3, 9, 9
CLASSES = 4
EXAMPLES = 8
BATCH = 4
EPOCHS = 2


def make_weights(rng):
    def u(*shape, fan_in):
        bound = 1.0 / np.sqrt(fan_in)
        return rng.uniform(-bound, bound, size=shape).astype(np.float32)
    return {
        "conv1": (u(4, 3, 3, 3, fan_in=27), u(4, fan_in=27)),
        "conv2a": (u(3, 4, 1, 1, fan_in=4), u(3, fan_in=4)),
        "conv2b": (u(3, 4, 3, 3, fan_in=36), u(3, fan_in=36)),
        "fc": (u(CLASSES, 6, fan_in=6), u(CLASSES, fan_in=6)),
    }


def torch_net(weights):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 3, stride=2, padding=1)
            self.conv2a = nn.Conv2d(4, 3, 1)
            self.conv2b = nn.Conv2d(4, 3, 3, padding=1)
            self.pool = nn.MaxPool2d(2, 2, ceil_mode=True)
            self.fc = nn.Linear(6, CLASSES)

        def forward(self, x):
            x = torch.relu(self.conv1(x))                                  # [N, 4, 5, 5]
            x = torch.cat([torch.relu(self.conv2a(x)), torch.relu(self.conv2b(x))], 1)  # [N, 6, 5, 5]
            x = self.pool(x)                                               # [N, 6, 3, 3]
            x = x.mean(dim=(2, 3))                                         # [N, 6]
            return self.fc(x)                                              # logits [N, 4]

    net = Net()
    with torch.no_grad():
        for name, (w, b) in weights.items():
            getattr(net, name).weight.copy_(torch.from_numpy(w))
            getattr(net, name).bias.copy_(torch.from_numpy(b))
    net.conv1.weight.requires_grad_(False)
    net.conv1.bias.requires_grad_(False)
    return net


def coreml_model(weights, optimizer):
    builder = NeuralNetworkBuilder([("input", datatypes.Array(C, H, W))], [("probs", None)], mode="classifier")
    def conv(name, inp, out, stride, pad):
        w, b = weights[name]
        builder.add_convolution(name=name, kernel_channels=w.shape[1], output_channels=w.shape[0],
                                height=w.shape[2], width=w.shape[3], stride_height=stride, stride_width=stride,
                                border_mode="valid", groups=1, W=w.transpose(2, 3, 1, 0), b=b, has_bias=True,
                                input_name=inp, output_name=out, padding_top=pad, padding_bottom=pad,
                                padding_left=pad, padding_right=pad)
    conv("conv1", "input", "conv1_out", 2, 1)
    builder.add_activation("relu1", "RELU", "conv1_out", "relu1_out")
    conv("conv2a", "relu1_out", "conv2a_out", 1, 0)
    builder.add_activation("relu2a", "RELU", "conv2a_out", "relu2a_out")
    conv("conv2b", "relu1_out", "conv2b_out", 1, 1)
    builder.add_activation("relu2b", "RELU", "conv2b_out", "relu2b_out")
    builder.add_elementwise("concat", ["relu2a_out", "relu2b_out"], "concat_out", mode="CONCAT")
    builder.add_pooling("pool", 2, 2, 2, 2, "MAX", "INCLUDE_LAST_PIXEL", "concat_out", "pool_out")
    builder.add_pooling("gap", 1, 1, 1, 1, "AVERAGE", "VALID", "pool_out", "gap_out", is_global=True)
    builder.add_flatten("flatten", 0, "gap_out", "flat")
    w, b = weights["fc"]
    builder.add_inner_product("fc", W=w, b=b, input_channels=6, output_channels=CLASSES, has_bias=True,
                              input_name="flat", output_name="logits")
    builder.add_softmax("softmax", "logits", "probs")
    builder.set_class_labels([str(i) for i in range(CLASSES)], predicted_feature_name="label",
                             prediction_blob="probs")
    builder.make_updatable(["conv2a", "conv2b", "fc"])
    builder.set_categorical_cross_entropy_loss(name="loss", input="probs")
    if optimizer == "sgd":
        builder.set_sgd_optimizer(SgdParams(lr=0.1, batch=BATCH, momentum=0.9))
    else:
        builder.set_adam_optimizer(AdamParams(lr=0.01, batch=BATCH, beta1=0.9, beta2=0.999, eps=1e-8))
    builder.set_epochs(EPOCHS)
    builder.nn_spec.updateParams.shuffle.defaultValue = False
    builder.spec.specificationVersion = 4
    return builder.spec


def main():
    os.makedirs(OUT, exist_ok=True)
    for optimizer in sys.argv[1:] or ("sgd", "adam", "adamw"):
        rng = np.random.default_rng({"sgd": 7, "adam": 8, "adamw": 9}[optimizer])
        weights = make_weights(rng)
        x = rng.uniform(0, 1, size=(EXAMPLES, C, H, W)).astype(np.float32)
        labels = rng.integers(0, CLASSES, size=EXAMPLES)
        net = torch_net(weights)
        params = [p for p in net.parameters() if p.requires_grad]
        opt = {"sgd": lambda: torch.optim.SGD(params, lr=0.1, momentum=0.9),
               "adam": lambda: torch.optim.Adam(params, lr=0.01, betas=(0.9, 0.999), eps=1e-8),
               "adamw": lambda: torch.optim.AdamW(params, lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)}[optimizer]()
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
        final = {name: {"weights": getattr(net, name).weight.detach().numpy().ravel().tolist(),
                        "bias": getattr(net, name).bias.detach().numpy().ravel().tolist()}
                 for name in ("conv2a", "conv2b", "fc")}
        name = f"branches_{optimizer}"
        ct.utils.save_spec(coreml_model(weights, "adam" if optimizer == "adamw" else optimizer), os.path.join(OUT, name + ".mlmodel"))
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump({"about": "PyTorch %s, made by Tests/Scripts/make_golden.py" % torch.__version__,
                       "optimizer": optimizer, "batch": BATCH, "epochs": EPOCHS, "shape": [C, H, W],
                       "inputs": x.ravel().tolist(), "labels": labels.tolist(), "losses": losses,
                       "final": final, "weightDecay": 0.1 if optimizer == "adamw" else 0}, f)
        print(name, "losses", ["%.6f" % l for l in losses])


if __name__ == "__main__":
    main()
