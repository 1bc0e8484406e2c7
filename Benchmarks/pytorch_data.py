#!/usr/bin/env python3
"""The torchvision side of `updraft-bench data --compare-pytorch`.

Reads a class-folder tree with torchvision's ImageFolder and a DataLoader (as many workers as asked,
batches of --batch) with the transforms Resize(shorter), CenterCrop(size), ToTensor() — torchvision's
evaluation recipe — and prints one JSON object: {"images", "workers", "first_batch_ms", "total_ms",
"images_per_second"}. Times run from building the ImageFolder (listing) to the last batch.
"""
import argparse
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True)
    ap.add_argument("--workers", type=int, default=0, help="DataLoader workers (0: as many as cores)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=227)
    ap.add_argument("--shorter", type=int, default=259)
    args = ap.parse_args()
    try:
        import torch
        import torchvision
        import torchvision.transforms as T
    except ImportError as error:
        print(json.dumps({"error": f"torch/torchvision not installed: {error}"}))
        return 3
    import os
    workers = args.workers or os.cpu_count()
    torch.set_num_threads(1)
    transform = T.Compose([T.Resize(args.shorter), T.CenterCrop(args.size), T.ToTensor()])
    start = time.perf_counter()
    dataset = torchvision.datasets.ImageFolder(args.data, transform=transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=False, num_workers=workers)
    first = None
    count = 0
    for x, y in loader:
        assert x.shape[1:] == (3, args.size, args.size)
        count += x.shape[0]
        if first is None:
            first = time.perf_counter() - start
    total = time.perf_counter() - start
    print(json.dumps({"images": count, "workers": workers, "first_batch_ms": first * 1e3, "total_ms": total * 1e3,
                      "images_per_second": count / total, "torchvision": torchvision.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
