#!/usr/bin/env python3
"""The PyTorch side of `updraft-bench epochs --compare-pytorch`.

With --arch mobilenet_v2|resnet18 (what `updraft-bench epochs --model M.mlmodel` passes for a model made
by Benchmarks/make_bench_models.py): that torchvision model at --size x --size, N classes, only its last
layer trained (everything before it frozen and in eval mode); --relu6 relu swaps ReLU6 for ReLU as
make_bench_models.py --compat does. Otherwise:

Fine-tunes conv10 + fullyconnected0 of SqueezeNet 1.1 (torchvision layout, 227x227 RGB, N classes,
SGD momentum 0.9, categorical cross-entropy) on synthetic images, everything before conv10 frozen, and
prints one JSON object: {"framework": "pytorch", "runs": [{"device", "threads", "images_per_second",
"first_epoch_ms", "steady_epoch_ms", ...}]}. Runs on the CPU with the given thread count and, when
CUDA is present, on the GPU in FP32 (TF32 off), like the figures in shared/reference/anchors.md.
"""
import argparse
import json
import sys
import time


def build_model(torch, classes):
    nn = torch.nn

    class Fire(nn.Module):
        def __init__(self, cin, squeeze, e1, e3):
            super().__init__()
            self.squeeze = nn.Conv2d(cin, squeeze, 1)
            self.expand1x1 = nn.Conv2d(squeeze, e1, 1)
            self.expand3x3 = nn.Conv2d(squeeze, e3, 3, padding=1)

        def forward(self, x):
            x = torch.relu(self.squeeze(x))
            return torch.cat([torch.relu(self.expand1x1(x)), torch.relu(self.expand3x3(x))], 1)

    features = nn.Sequential(
        nn.Conv2d(3, 64, 3, stride=2), nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(64, 16, 64, 64), Fire(128, 16, 64, 64),
        nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(128, 32, 128, 128), Fire(256, 32, 128, 128),
        nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256), Fire(512, 64, 256, 256),
    )
    conv10 = nn.Conv2d(512, 1000, 1)
    fc = nn.Linear(1000, classes)
    model = nn.Sequential(features, conv10, nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(), fc)
    for p in features.parameters():
        p.requires_grad_(False)
    return model


def build_torchvision(torch, arch, classes, relu6):
    """A torchvision classifier with only its last layer trained; returns (model, frozen part)."""
    import torchvision
    model = getattr(torchvision.models, arch)(weights=None, num_classes=classes)
    if relu6 == "relu":
        swap_relu6(torch, model)
    for p in model.parameters():
        p.requires_grad_(False)
    last = model.classifier[-1] if arch.startswith("mobilenet") else model.fc
    for p in last.parameters():
        p.requires_grad_(True)
    model.eval()  # frozen batch norms and dropout: inference behaviour, as a converted Core ML model
    return model, model


def swap_relu6(torch, module):
    for name, child in module.named_children():
        if isinstance(child, torch.nn.ReLU6):
            setattr(module, name, torch.nn.ReLU(inplace=True))
        else:
            swap_relu6(torch, child)


def file_loader(torch, data, batch, workers, size=227):
    """ImageFolder + DataLoader over image files, stretched to size x size as `updraft train` does."""
    import torchvision
    import torchvision.transforms as T
    dataset = torchvision.datasets.ImageFolder(data, transform=T.Compose([T.Resize((size, size)), T.ToTensor()]))
    return torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers,
                                       persistent_workers=workers > 0, generator=torch.Generator().manual_seed(1))


def run(torch, device, images, batch, classes, epochs, threads, data=None, workers=0, arch=None, size=227,
        relu6="relu6"):
    torch.manual_seed(0)
    if arch:
        model, frozen = build_torchvision(torch, arch, classes, relu6)
        model = model.to(device)
    else:
        model = build_model(torch, classes).to(device)
        frozen = model[0]
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(trainable, lr=0.001, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    frozen.eval()  # frozen prefix: inference behaviour

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    times = []
    if data is not None:
        # The clock starts before the files are listed: the first epoch includes everything a user waits for.
        t0 = time.perf_counter()
        loader = file_loader(torch, data, batch, workers, size)
        images = len(loader.dataset)
        for _ in range(epochs):
            for x, y in loader:
                step(x.to(device, non_blocking=True), y.to(device, non_blocking=True))
            sync()
            times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
    else:
        g = torch.Generator(device="cpu").manual_seed(1)
        x_all = torch.rand(images, 3, size, size, generator=g).to(device)
        y_all = torch.randint(0, classes, (images,), generator=g).to(device)
        for _ in range(epochs):
            sync()
            t0 = time.perf_counter()
            for start in range(0, images, batch):
                idx = torch.arange(start, start + batch, device=device) % images  # wrap-round fill, as Core ML
                step(x_all[idx], y_all[idx])
            sync()
            times.append(time.perf_counter() - t0)
    batches = (images + batch - 1) // batch
    steady = min(times[1:]) if len(times) > 1 else times[0]
    return {
        "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
        "kind": device.type,
        "threads": threads if device.type == "cpu" else None,
        "images": images,
        "batch": batch,
        "data": data,
        "workers": workers if data is not None else None,
        "first_epoch_ms": times[0] * 1e3,
        "steady_epoch_ms": steady * 1e3,
        # From files the last batch is short (a DataLoader does not wrap round): count the images.
        "images_per_second": (images if data is not None else batches * batch) / steady,
        "model": arch or "squeezenet1_1",
        "size": size,
        "torch": torch.__version__,
        "tf32": False,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--images", type=int, default=128)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=2, help="first epoch plus steady-state epochs")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores)")
    ap.add_argument("--devices", default="cpu,cuda", help="comma-separated: cpu, cuda")
    ap.add_argument("--data", default=None, help="train from this ImageFolder tree (a DataLoader) instead of synthetic tensors")
    ap.add_argument("--workers", type=int, default=0, help="DataLoader workers with --data (0: as many as cores)")
    ap.add_argument("--arch", default=None, choices=["mobilenet_v2", "resnet18"],
                    help="a torchvision model, only its last layer trained (default: SqueezeNet 1.1, conv10 + fc)")
    ap.add_argument("--size", type=int, default=227, help="input height and width")
    ap.add_argument("--relu6", default="relu6", choices=["relu6", "relu"], help="relu: ReLU6 replaced by ReLU")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print(json.dumps({"framework": "pytorch", "error": "PyTorch is not installed (pip install torch)"}))
        return 3
    import os
    threads = args.threads or os.cpu_count()
    torch.set_num_threads(threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    runs = []
    workers = args.workers or os.cpu_count()
    for name in args.devices.split(","):
        if name == "cpu":
            runs.append(run(torch, torch.device("cpu"), args.images, args.batch, args.classes, args.epochs, threads,
                            args.data, workers, args.arch, args.size, args.relu6))
        elif name == "cuda" and torch.cuda.is_available():
            runs.append(run(torch, torch.device("cuda"), args.images, args.batch, args.classes, max(2, args.epochs), threads,
                            args.data, workers, args.arch, args.size, args.relu6))
    print(json.dumps({"framework": "pytorch", "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
