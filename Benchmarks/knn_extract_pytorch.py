#!/usr/bin/env python3
"""PyTorch's side of `updraft-bench knn --append`: torchvision's SqueezeNet 1.1 computing the
embedding a k-NN stores (features, then conv10 + ReLU + global average pool: the 1000-wide vector
`updraft create knn` cuts at), forward only, on synthetic 227x227 images in batches of --batch.

    python3 Benchmarks/knn_extract_pytorch.py --images N --batch 64 --threads T [--device cpu|cuda]

Prints one JSON object: {"images_per_second": ..., "device": ..., "torch": version} or {"error": ...}.
"""
import argparse
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    try:
        import torch
        import torchvision
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        return 0
    torch.set_num_threads(a.threads)
    model = torchvision.models.squeezenet1_1(weights=None).eval().to(a.device)
    embed = torch.nn.Sequential(model.features, model.classifier[1], model.classifier[2], model.classifier[3], torch.nn.Flatten())
    x = torch.rand(a.batch, 3, 227, 227, device=a.device) * 255
    with torch.no_grad():
        embed(x)  # warm-up
        if a.device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        done = 0
        while done < a.images:
            embed(x)
            done += a.batch
        if a.device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    print(json.dumps({"images_per_second": done / seconds, "device": a.device, "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
