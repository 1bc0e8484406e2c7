#!/usr/bin/env python3
"""Makes the models `updraft-bench epochs --model` times against PyTorch: torchvision MobileNetV2 and
ResNet-18 (random init, seed 0, N classes), converted with coremltools (`ct.convert(...,
convert_to="neuralnetwork")`) and made updatable on the last layer (the classifier's inner product)
with coremltools' NeuralNetworkBuilder: SGD (learning rate 0.001, momentum 0.9), categorical
cross-entropy on the softmax output.

    python3 Benchmarks/make_bench_models.py --out DIR [--models mobilenet_v2,resnet18] [--size 224]
            [--classes 10] [--compat]

Input: an image named `image` (RGB, SIZE x SIZE, pixel values scaled by 1/255 as ToTensor does).
Output: `classLabel` and the `probabilities` dictionary (labels 0..N-1).

--compat replaces the layers an older Updraft cannot run with ones it can, keeping the architecture's
shape and cost: every `clip` (ReLU6) becomes an `activation` ReLU, and the `reshapeStatic` before the
classifier (torch.flatten of a [C, 1, 1] tensor) becomes a `flatten` layer. The PyTorch side of the
comparison (Benchmarks/pytorch_baseline.py --arch) makes the same substitution for ReLU6 then, so that
both frameworks run the same network.
"""
import argparse
import os
import sys
import warnings

ARCHS = ("mobilenet_v2", "resnet18")


def torch_model(arch, classes, compat):
    """The torchvision architecture with a softmax on top (what a Core ML classifier outputs)."""
    import torch
    import torchvision
    torch.manual_seed(0)
    net = getattr(torchvision.models, arch)(weights=None, num_classes=classes)
    if compat:
        replace_relu6(net)
    net.eval()
    return torch.nn.Sequential(net, torch.nn.Softmax(dim=1)).eval()


def replace_relu6(module):
    import torch
    for name, child in module.named_children():
        if isinstance(child, torch.nn.ReLU6):
            setattr(module, name, torch.nn.ReLU(inplace=False))
        else:
            replace_relu6(child)


def convert(arch, size, classes, compat):
    import coremltools as ct
    import torch
    model = torch_model(arch, classes, compat)
    example = torch.rand(1, 3, size, size)
    with torch.no_grad():
        traced = torch.jit.trace(model, example)
    labels = [str(i) for i in range(classes)]
    mlmodel = ct.convert(traced, convert_to="neuralnetwork",
                         inputs=[ct.ImageType(name="image", shape=example.shape, scale=1 / 255.0)],
                         classifier_config=ct.ClassifierConfig(labels),
                         minimum_deployment_target=ct.target.iOS14)
    return mlmodel.get_spec()


def make_updatable(spec, compat):
    import coremltools as ct
    from coremltools.models.neural_network import NeuralNetworkBuilder, SgdParams
    nn = spec.neuralNetworkClassifier
    if compat:
        substitute_layers(nn)
    layers = list(nn.layers)
    softmax = next(l for l in reversed(layers) if l.WhichOneof("layer") in ("softmax", "softmaxND"))
    if softmax.WhichOneof("layer") == "softmaxND":
        # Core ML's cross-entropy loss wants a `softmax` layer feeding it; over the channel axis of a
        # rank-2 [1, N] tensor the two compute the same.
        name, inp, out = softmax.name, list(softmax.input), list(softmax.output)
        softmax.ClearField("softmaxND")
        softmax.softmax.SetInParent()
        del softmax.input[:], softmax.output[:]
        softmax.input.extend(inp)
        softmax.output.extend(out)
    last = next(l for l in reversed(layers) if l.WhichOneof("layer") in ("innerProduct", "convolution"))
    builder = NeuralNetworkBuilder(spec=spec)
    builder.make_updatable([last.name])
    builder.set_categorical_cross_entropy_loss(name="lossLayer", input=softmax.output[0])
    builder.set_sgd_optimizer(SgdParams(lr=0.001, batch=64, momentum=0.9))
    builder.set_epochs(10, allowed_set=[1, 2, 3, 4, 5, 10, 20, 50])
    spec.specificationVersion = max(spec.specificationVersion, 4)
    return builder.spec, last.name


def substitute_layers(nn):
    """--compat: clip(0, 6) -> ReLU, reshapeStatic to [C] (or [1, C]) after a [C, 1, 1] tensor -> flatten."""
    for layer in nn.layers:
        kind = layer.WhichOneof("layer")
        if kind == "clip":
            layer.ClearField("clip")
            layer.activation.ReLU.SetInParent()
        elif kind in ("reshapeStatic", "reshape", "flattenTo2D", "squeeze"):
            layer.ClearField(kind)
            layer.flatten.mode = 0  # CHANNEL_FIRST


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for ARCH.mlmodel")
    ap.add_argument("--models", default=",".join(ARCHS))
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--compat", action="store_true", help="ReLU6 -> ReLU and reshapeStatic -> flatten (see above)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    import coremltools as ct
    os.makedirs(args.out, exist_ok=True)
    for arch in args.models.split(","):
        if arch not in ARCHS:
            print(f"unknown model {arch}: choose from {', '.join(ARCHS)}", file=sys.stderr)
            return 2
        spec = convert(arch, args.size, args.classes, args.compat)
        spec, last = make_updatable(spec, args.compat)
        # What `updraft-bench epochs --model ... --compare-pytorch` runs on the PyTorch side.
        meta = spec.description.metadata.userDefined
        meta["updraft.bench.torchvision"] = arch
        meta["updraft.bench.relu6"] = "relu" if args.compat else "relu6"
        path = os.path.join(args.out, f"{arch}.mlmodel")
        tmp = os.path.join(args.out, f".{arch}.tmp.mlmodel")
        ct.utils.save_spec(spec, tmp)
        os.replace(tmp, path)
        kinds = {}
        for layer in spec.neuralNetworkClassifier.layers:
            k = layer.WhichOneof("layer")
            kinds[k] = kinds.get(k, 0) + 1
        print(f"wrote {path}: updatable layer {last}; layers " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
