#!/usr/bin/env python3
"""Writes scikit-learn's 8x8 handwritten digits as PNG class folders for Updraft's demo and tests.

    Tests/Data/digits/train/<digit>/NNNN.png
    Tests/Data/digits/validation/<digit>/NNNN.png

NNNN is the image's index in sklearn.datasets.load_digits() (1797 images, 10 classes). Pixel values
0..16 are scaled to 0..255 (round(v * 255 / 16)) and written as 8-bit grayscale PNGs. Each class is
split 80/20 by a seeded hash of the index, so the split is the same on every machine and with every
NumPy version: the round(0.2 * n) images of a class with the smallest SHA-256("<seed>:<index>") go to
validation. The PNG writer below is deterministic (fixed zlib level, no timestamps), so running the
script again reproduces the committed files byte for byte.

Usage: python3 Tests/Scripts/make_digits.py [--out Tests/Data/digits] [--seed 0]
"""
import argparse
import hashlib
import os
import shutil
import struct
import sys
import zlib

from sklearn.datasets import load_digits

VALIDATION_FRACTION = 0.2


def png_gray8(width, height, rows):
    """The bytes of an 8-bit grayscale PNG; rows is a list of `height` bytes objects of `width` bytes."""
    def chunk(kind, payload):
        body = kind + payload
        return struct.pack(">I", len(payload)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit, gray, deflate, filter 0, no interlace
    raw = b"".join(b"\x00" + bytes(row) for row in rows)           # filter type 0 (None) on every row
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b""))


def split(labels, seed):
    """Maps each index to "train" or "validation", per class, by a seeded hash."""
    order = {}
    for index, label in enumerate(labels):
        order.setdefault(int(label), []).append(index)
    assignment = {}
    for label, indices in order.items():
        ranked = sorted(indices, key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())
        n_validation = int(round(VALIDATION_FRACTION * len(indices)))
        for rank, index in enumerate(ranked):
            assignment[index] = "validation" if rank < n_validation else "train"
    return assignment


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--out", default=os.path.join(here, "..", "Data", "digits"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    digits = load_digits()
    images, labels = digits.images, digits.target
    assignment = split(labels, args.seed)

    out = os.path.normpath(args.out)
    for part in ("train", "validation"):
        shutil.rmtree(os.path.join(out, part), ignore_errors=True)
    counts = {}
    for index, (image, label) in enumerate(zip(images, labels)):
        part = assignment[index]
        folder = os.path.join(out, part, str(int(label)))
        os.makedirs(folder, exist_ok=True)
        rows = [[int(round(float(v) * 255.0 / 16.0)) for v in row] for row in image]
        with open(os.path.join(folder, f"{index:04d}.png"), "wb") as f:
            f.write(png_gray8(8, 8, rows))
        counts[(part, int(label))] = counts.get((part, int(label)), 0) + 1

    for part in ("train", "validation"):
        per_class = [counts.get((part, d), 0) for d in range(10)]
        print(f"{part}: {sum(per_class)} images, per digit {per_class}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
