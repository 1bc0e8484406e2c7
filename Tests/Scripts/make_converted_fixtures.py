#!/usr/bin/env python3
"""Converted-model fixtures: torchvision architectures as coremltools' converter emits them, made
updatable, with PyTorch's fine-tuning trajectory as golden JSON.

For each architecture (SqueezeNet 1.1, MobileNetV2, MobileNetV3-small, ResNet-18, EfficientNet-B0,
DenseNet-121, AlexNet, GoogLeNet, MNASNet, RegNet, a VGG-style CNN with batch norm, an MLP, an MLP with
LayerNorm) this
builds the torchvision network with random weights from a fixed seed, with its width, depth and input
size cut down so each file stays small (the layer *types* are what matter, not the size), then:

  1. traces it and converts it with `ct.convert(..., convert_to="neuralnetwork")`, the network ending
     in a softmax (the probabilities Core ML's cross-entropy loss takes);
  2. writes the model as converted:          Fixtures/converted/<name>.converted.mlmodel
  3. makes it updatable the way a coremltools user does: the converter's `softmaxND` on the last axis
     becomes the `softmax` layer Core ML's loss requires, then `NeuralNetworkBuilder.make_updatable`
     on the last inner product (or the last two trainable layers where natural),
     `set_categorical_cross_entropy_loss` and `set_sgd_optimizer` / `set_adam_optimizer`:
                                              Fixtures/converted/<name>.mlmodel
  4. fine-tunes the same layers in PyTorch, in eval mode (batch norm frozen, as Core ML's is; dropout
     off), with cross-entropy on the logits (what Core ML's loss on the softmax output computes), for
     STEPS steps on one fixed batch, and writes the batch, the per-step losses, the trained layers'
     weights after training (the batch itself as <name>.inputs.npy: float32, [batch] + the input's
     shape; an image input's values are pixels 0...255), and the Core ML layer types the model contains:
                                              Fixtures/converted/<name>.json

The Swift tests (ConvertedModelTests) train the same steps on the CPU and on OpenCL and compare.
Run once (needs torch, torchvision, coremltools, numpy) and commit the output:

    python3 Tests/Scripts/make_converted_fixtures.py [NAME ...]
"""
import collections
import importlib
import json
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torchvision
import coremltools as ct
from coremltools.models.neural_network import NeuralNetworkBuilder, SgdParams, AdamParams

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "UpdraftTests", "Fixtures", "converted")
CLASSES = 4
BATCH = 4
STEPS = 3
# An image input's Core ML preprocessing: x = pixel / 255 - 0.5 (the PyTorch side applies the same).
IMAGE_SCALE = 1.0 / 255.0
IMAGE_BIAS = -0.5

tvm = torchvision.models


def module(name):
    return importlib.import_module("torchvision.models." + name)


# ---------------------------------------------------------------------------------------------
# The architectures, cut down. Each returns (network producing logits, trained modules).


def squeezenet():
    fire = module("squeezenet").Fire
    net = tvm.SqueezeNet(version="1_1", num_classes=CLASSES)
    # SqueezeNet 1.1's layout (conv, pool, fire x2, pool, fire x2, pool, fire x4) at 1/8 width.
    net.features = nn.Sequential(
        nn.Conv2d(3, 8, kernel_size=3, stride=2), nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
        fire(8, 2, 8, 8), fire(16, 2, 8, 8),
        nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
        fire(16, 4, 16, 16), fire(32, 4, 16, 16),
        nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
        fire(32, 6, 24, 24), fire(48, 6, 24, 24), fire(48, 8, 32, 32), fire(64, 8, 32, 32))
    final = nn.Conv2d(64, CLASSES, kernel_size=1)
    net.classifier = nn.Sequential(nn.Dropout(p=0.5), final, nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1)))
    return net, [final]


def mobilenet_v2():
    setting = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 2, 2], [6, 64, 1, 2]]
    net = tvm.MobileNetV2(num_classes=CLASSES, width_mult=0.25, inverted_residual_setting=setting)
    conv_norm_act = torchvision.ops.Conv2dNormActivation
    last_in = net.features[-1][0].in_channels
    net.features[-1] = conv_norm_act(last_in, 64, kernel_size=1, norm_layer=nn.BatchNorm2d, activation_layer=nn.ReLU6)
    net.classifier = nn.Sequential(nn.Dropout(p=0.2), nn.Linear(64, CLASSES))
    return net, [net.classifier[1]]


def mobilenet_v3_small():
    m3 = module("mobilenetv3")
    setting, _ = m3._mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.25, reduced_tail=True)
    setting = setting[:5]  # the stride-2 SE block, two plain blocks, and a hardswish SE block
    net = m3.MobileNetV3(setting, last_channel=32, num_classes=CLASSES)
    return net, [net.classifier[0], net.classifier[3]]


def resnet18():
    rn = module("resnet")
    net = tvm.ResNet(rn.BasicBlock, [2, 2, 2, 2], num_classes=CLASSES)
    # ResNet-18's depth (two basic blocks per stage) at 1/16 width.
    widths = [4, 8, 16, 32]
    net.conv1 = nn.Conv2d(3, widths[0], kernel_size=7, stride=2, padding=3, bias=False)
    net.bn1 = nn.BatchNorm2d(widths[0])
    net.inplanes = widths[0]
    net.layer1 = net._make_layer(rn.BasicBlock, widths[0], 2)
    net.layer2 = net._make_layer(rn.BasicBlock, widths[1], 2, stride=2)
    net.layer3 = net._make_layer(rn.BasicBlock, widths[2], 2, stride=2)
    net.layer4 = net._make_layer(rn.BasicBlock, widths[3], 2, stride=2)
    net.fc = nn.Linear(widths[3], CLASSES)
    return net, [net.fc]


def efficientnet_b0():
    ef = module("efficientnet")
    setting, _ = ef._efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.5)
    setting = list(setting)[:4]
    net = ef.EfficientNet(setting, dropout=0.2, num_classes=CLASSES, last_channel=64)
    return net, [net.classifier[1]]


def densenet121():
    # DenseNet-121's four dense blocks and transitions, 2 layers each instead of (6, 12, 24, 16).
    net = tvm.DenseNet(growth_rate=4, block_config=(2, 2, 2, 2), num_init_features=8, bn_size=2,
                       num_classes=CLASSES)
    return net, [net.classifier]


def alexnet():
    net = tvm.AlexNet(num_classes=CLASSES)
    net.features = nn.Sequential(
        nn.Conv2d(3, 8, kernel_size=11, stride=4, padding=2), nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=3, stride=2),
        nn.Conv2d(8, 16, kernel_size=5, padding=2), nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=3, stride=2),
        nn.Conv2d(16, 24, kernel_size=3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(24, 16, kernel_size=3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(16, 16, kernel_size=3, padding=1), nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=3, stride=2))
    net.avgpool = nn.AdaptiveAvgPool2d((1, 1))  # 1x1 already at a 63x63 input, as 6x6 is at 224x224
    net.classifier = nn.Sequential(
        nn.Dropout(p=0.5), nn.Linear(16, 32), nn.ReLU(inplace=True),
        nn.Dropout(p=0.5), nn.Linear(32, 32), nn.ReLU(inplace=True), nn.Linear(32, CLASSES))
    return net, [net.classifier[4], net.classifier[6]]


def googlenet():
    g = module("googlenet")
    net = tvm.GoogLeNet(num_classes=CLASSES, aux_logits=False, init_weights=True)
    conv = g.BasicConv2d
    net.conv1 = conv(3, 8, kernel_size=7, stride=2, padding=3)
    net.conv2 = conv(8, 8, kernel_size=1)
    net.conv3 = conv(8, 16, kernel_size=3, padding=1)
    net.inception3a = g.Inception(16, 4, 4, 8, 2, 4, 4)    # -> 20
    net.inception3b = g.Inception(20, 8, 4, 8, 2, 4, 4)    # -> 24
    net.inception4a = g.Inception(24, 8, 4, 8, 2, 4, 4)    # -> 24
    for name in ("inception4b", "inception4c", "inception4d", "inception4e", "maxpool4",
                 "inception5a", "inception5b"):
        setattr(net, name, nn.Identity())
    net.fc = nn.Linear(24, CLASSES)
    return net, [net.fc]


def mnasnet():
    net = tvm.MNASNet(alpha=0.25, num_classes=CLASSES)
    # Stem, separable conv and the first three inverted-residual stacks; a narrower last conv.
    layers = list(net.layers.children())
    last_in = layers[10][-1].layers[-1].num_features  # the third stack's output channels
    net.layers = nn.Sequential(*layers[:11], nn.Conv2d(last_in, 64, 1, bias=False), nn.BatchNorm2d(64),
                               nn.ReLU(inplace=True))
    net.classifier = nn.Sequential(nn.Dropout(p=0.2, inplace=True), nn.Linear(64, CLASSES))
    return net, [net.classifier[1]]


def regnet():
    rg = module("regnet")
    params = rg.BlockParams.from_init_params(depth=4, w_0=8, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25)
    net = rg.RegNet(params, num_classes=CLASSES, stem_width=8)  # RegNetY-style: grouped convs and SE
    return net, [net.fc]


def vgg_bn():
    vgg = module("vgg")
    net = tvm.VGG(vgg.make_layers([8, "M", 16, "M", 32, 32, "M"], batch_norm=True), num_classes=CLASSES)
    net.avgpool = nn.AdaptiveAvgPool2d((4, 4))
    net.classifier = nn.Sequential(
        nn.Linear(32 * 4 * 4, 32), nn.ReLU(True), nn.Dropout(),
        nn.Linear(32, 32), nn.ReLU(True), nn.Dropout(), nn.Linear(32, CLASSES))
    return net, [net.classifier[3], net.classifier[6]]


def mlp():
    net = torchvision.ops.MLP(48, [32, 16, CLASSES], activation_layer=nn.ReLU, dropout=0.1)
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    return net, linears[-2:]


def layernorm_mlp():
    """An MLP with PyTorch's LayerNorm (random gamma and beta), which the converter writes as
    reshapeStatic, mvn, scale, reshapeStatic; the gradient of the first trained layer passes through one."""
    net = nn.Sequential(nn.Linear(48, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, 16), nn.LayerNorm(16), nn.ReLU(),
                        nn.Linear(16, CLASSES))
    with torch.no_grad():
        for norm in (net[1], net[4]):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    return net, [net[3], net[6]]


# name -> (builder, input shape, input kind, optimizer, seed)
CASES = collections.OrderedDict([
    ("squeezenet1_1", (squeezenet, (3, 32, 32), "image", "sgd", 101)),
    ("mobilenet_v2", (mobilenet_v2, (3, 32, 32), "tensor", "sgd", 102)),
    ("mobilenet_v3_small", (mobilenet_v3_small, (3, 32, 32), "tensor", "sgd", 103)),
    ("resnet18", (resnet18, (3, 32, 32), "image", "adam", 104)),
    ("efficientnet_b0", (efficientnet_b0, (3, 32, 32), "tensor", "sgd", 105)),
    ("densenet121", (densenet121, (3, 32, 32), "tensor", "sgd", 106)),
    ("alexnet", (alexnet, (3, 63, 63), "tensor", "sgd", 107)),
    ("googlenet", (googlenet, (3, 32, 32), "tensor", "sgd", 108)),
    ("mnasnet", (mnasnet, (3, 32, 32), "tensor", "sgd", 109)),
    ("regnet", (regnet, (3, 32, 32), "tensor", "sgd", 110)),
    ("vgg_bn", (vgg_bn, (3, 32, 32), "tensor", "sgd", 111)),
    ("mlp", (mlp, (48,), "tensor", "adam", 112)),
    ("layernorm_mlp", (layernorm_mlp, (48,), "tensor", "sgd", 113)),
])
SGD = dict(lr=0.05, momentum=0.9)
ADAM = dict(lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8)


class WithSoftmax(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return torch.softmax(self.net(x), dim=1)


def randomize_batch_norm(net, gen):
    """Random running statistics and affine parameters, so frozen batch norm is not the identity."""
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) * 0.5 + 0.75)
                m.weight.copy_(torch.rand(m.num_features, generator=gen) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(m.num_features, generator=gen) * 0.1)


def convert(name, net, shape, kind):
    example = torch.rand((1,) + shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(WithSoftmax(net).eval(), example)
    if kind == "image":
        inputs = [ct.ImageType(name="image", shape=(1,) + shape, scale=IMAGE_SCALE,
                               bias=[IMAGE_BIAS] * 3, color_layout=ct.colorlayout.RGB)]
    else:
        inputs = [ct.TensorType(name="input", shape=(1,) + shape)]
    model = ct.convert(traced, convert_to="neuralnetwork", inputs=inputs,
                       outputs=[ct.TensorType(name="probs")])
    return model.get_spec()


def layer_types(spec):
    counts = collections.Counter()
    for layer in spec.neuralNetwork.layers:
        kind = layer.WhichOneof("layer")
        if kind == "activation":
            kind += "." + layer.activation.WhichOneof("NonlinearityType")
        elif kind == "unary":
            kind += "." + ct.proto.NeuralNetwork_pb2.UnaryFunctionLayerParams.Operation.Name(layer.unary.type)
        elif kind == "reduce":
            kind += "." + ct.proto.NeuralNetwork_pb2.ReduceLayerParams.ReduceOperation.Name(layer.reduce.mode)
        elif kind == "pooling":
            p = layer.pooling
            kind += "." + ct.proto.NeuralNetwork_pb2.PoolingLayerParams.PoolingType.Name(p.type)
            if p.globalPooling:
                kind += ".global"
            elif p.WhichOneof("PoolingPaddingType") == "includeLastPixel":
                kind += ".includeLastPixel"
        counts[kind] += 1
    return dict(sorted(counts.items()))


def find_layer(spec, torch_module):
    """The Core ML layer holding the torch module's weights (the converter renames layers)."""
    w = torch_module.weight.detach().numpy().ravel()
    for layer in spec.neuralNetwork.layers:
        kind = layer.WhichOneof("layer")
        if kind not in ("innerProduct", "convolution"):
            continue
        values = np.array(getattr(layer, kind).weights.floatValue, dtype=np.float32)
        if values.size == w.size and np.array_equal(values, w):
            return layer.name
    raise SystemExit("no Core ML layer holds the weights of %r" % torch_module)


def softmax_for_loss(spec):
    """Core ML's cross-entropy takes a `softmax` layer's output; the converter writes `softmaxND`
    (axis -1 of the [1, classes] logits). On [1, C] the two are the same function."""
    for layer in spec.neuralNetwork.layers:
        if layer.WhichOneof("layer") == "softmaxND" and "probs" in layer.output:
            assert layer.softmaxND.axis in (-1, 1), layer.softmaxND.axis
            layer.softmax.SetInParent()
            return
    raise SystemExit("no softmaxND writes 'probs'")


def make_updatable(spec, trained, optimizer):
    builder = NeuralNetworkBuilder(spec=spec)
    softmax_for_loss(builder.spec)
    builder.make_updatable(trained)
    builder.set_categorical_cross_entropy_loss(name="loss", input="probs")
    if optimizer == "sgd":
        builder.set_sgd_optimizer(SgdParams(lr=SGD["lr"], batch=BATCH, momentum=SGD["momentum"]))
    else:
        builder.set_adam_optimizer(AdamParams(lr=ADAM["lr"], batch=BATCH, beta1=ADAM["beta1"],
                                              beta2=ADAM["beta2"], eps=ADAM["eps"]))
    builder.set_epochs(STEPS)
    builder.nn_spec.updateParams.shuffle.defaultValue = False
    return builder.spec


def fine_tune(net, modules, x, labels, optimizer):
    net.eval()  # frozen batch norm (running statistics), no dropout: what Core ML does
    for p in net.parameters():
        p.requires_grad_(False)
    params = []
    for m in modules:
        for p in (m.weight, m.bias):
            p.requires_grad_(True)
            params.append(p)
    opt = (torch.optim.SGD(params, lr=SGD["lr"], momentum=SGD["momentum"]) if optimizer == "sgd" else
           torch.optim.Adam(params, lr=ADAM["lr"], betas=(ADAM["beta1"], ADAM["beta2"]), eps=ADAM["eps"]))
    xb, yb = torch.from_numpy(x), torch.from_numpy(labels).long()
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(xb), yb)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def make(name):
    build, shape, kind, optimizer, seed = CASES[name]
    torch.manual_seed(seed)
    net, trained_modules = build()
    gen = torch.Generator().manual_seed(seed)
    randomize_batch_norm(net, gen)
    net.eval()
    spec = convert(name, net, shape, kind)
    trained = [find_layer(spec, m) for m in trained_modules]
    types = layer_types(spec)
    ct.utils.save_spec(spec, os.path.join(OUT, name + ".converted.mlmodel"))
    updatable = make_updatable(spec, trained, optimizer)
    ct.utils.save_spec(updatable, os.path.join(OUT, name + ".mlmodel"))

    rng = np.random.default_rng(seed)
    if kind == "image":
        pixels = rng.integers(0, 256, size=(BATCH,) + shape).astype(np.float32)
        x = (pixels * np.float32(IMAGE_SCALE) + np.float32(IMAGE_BIAS)).astype(np.float32)
        inputs = pixels
    else:
        x = rng.uniform(-1, 1, size=(BATCH,) + shape).astype(np.float32)
        inputs = x
    labels = rng.integers(0, CLASSES, size=BATCH)
    losses = fine_tune(net, trained_modules, x, labels, optimizer)
    final = {layer: {"weights": m.weight.detach().numpy().ravel().tolist(),
                     "bias": m.bias.detach().numpy().ravel().tolist()}
             for layer, m in zip(trained, trained_modules)}
    golden = {
        "about": "PyTorch %s, torchvision %s, coremltools %s; made by Tests/Scripts/make_converted_fixtures.py"
                 % (torch.__version__.split("+")[0], torchvision.__version__.split("+")[0], ct.__version__),
        "architecture": name, "input": kind, "shape": list(shape), "optimizer": optimizer,
        "hyperparameters": SGD if optimizer == "sgd" else ADAM,
        "batch": BATCH, "steps": STEPS, "trained": trained, "layerTypes": types,
        "inputsFile": name + ".inputs.npy", "labels": labels.tolist(), "losses": losses, "final": final,
    }
    np.save(os.path.join(OUT, name + ".inputs.npy"), inputs.astype(np.float32))
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(golden, f)
    sizes = [os.path.getsize(os.path.join(OUT, name + s)) // 1024 for s in (".mlmodel", ".converted.mlmodel", ".json")]
    print("%-20s %4d KiB (+%d KiB converted, %d KiB json)  trained %s  losses %s" % (
        name, sizes[0], sizes[1], sizes[2], trained, ["%.5f" % l for l in losses]))
    print("    ", types)


def main():
    os.makedirs(OUT, exist_ok=True)
    names = sys.argv[1:] or list(CASES)
    for name in names:
        make(name)


if __name__ == "__main__":
    main()
