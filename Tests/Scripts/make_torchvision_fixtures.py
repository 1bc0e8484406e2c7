#!/usr/bin/env python3
"""Makes Tests/UpdraftTests/Fixtures/torchvision: small images and what torchvision's transforms make
of them, so the Swift tests can check Updraft's preprocessing against torchvision within one grey level.

Each case is an input PNG, a transform (recorded in manifest.json with its parameters) and the expected
output PNG (8-bit RGB, as torchvision's PIL backend returns it before ToTensor). Run with torch,
torchvision and Pillow installed:  python3 Tests/Scripts/make_torchvision_fixtures.py
"""
import json
import os

import numpy as np
import torchvision
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image

OUT = os.path.join(os.path.dirname(__file__), "..", "UpdraftTests", "Fixtures", "torchvision")


def make_inputs():
    rng = np.random.default_rng(1405)
    # Noise (the hardest case for a resampler), a smooth photo-like gradient, and a gray image.
    noise = rng.integers(0, 256, size=(29, 41, 3), dtype=np.uint8)
    y, x = np.mgrid[0:48, 0:35]
    smooth = np.stack([(x * 7) % 256, (y * 5 + x * 2) % 256, (255 - y * 3) % 256], axis=-1).astype(np.uint8)
    gray = rng.integers(0, 256, size=(23, 31), dtype=np.uint8)
    return {"noise.png": Image.fromarray(noise, "RGB"), "smooth.png": Image.fromarray(smooth, "RGB"),
            "gray.png": Image.fromarray(gray, "L")}


def main():
    os.makedirs(OUT, exist_ok=True)
    inputs = make_inputs()
    for name, image in inputs.items():
        image.save(os.path.join(OUT, name))
    BILINEAR, BOX = T.InterpolationMode.BILINEAR, T.InterpolationMode.BOX
    cases = []

    def add(case, source, output):
        out_name = f"expected_{len(cases):02d}.png"
        output.convert("RGB").save(os.path.join(OUT, out_name))
        case.update({"input": source, "expected": out_name})
        cases.append(case)

    for source, pil in inputs.items():
        img = pil.convert("RGB")  # what torchvision's ImageFolder loader does
        # Stretch: Resize((h, w)), downscale and upscale, triangle (bilinear) and area (box).
        for (h, w) in [(12, 16), (9, 7), (61, 50)]:
            add({"transform": "stretch", "width": w, "height": h, "filter": "triangle"}, source,
                T.Resize((h, w), interpolation=BILINEAR)(img))
        add({"transform": "stretch", "width": 10, "height": 8, "filter": "area"}, source,
            T.Resize((8, 10), interpolation=BOX)(img))
        # Shorter side then center crop: Resize(n) + CenterCrop((h, w)).
        for (n, h, w) in [(20, 16, 16), (19, 15, 12), (13, 13, 13)]:
            add({"transform": "centerCrop", "shorterSide": n, "width": w, "height": h, "filter": "triangle"}, source,
                T.CenterCrop((h, w))(T.Resize(n, interpolation=BILINEAR)(img)))
        # A resized crop with fixed parameters (RandomResizedCrop's output for one draw).
        for (top, left, ch, cw) in [(3, 5, 17, 21), (0, 0, 9, 6)]:
            add({"transform": "resizedCrop", "top": top, "left": left, "cropHeight": ch, "cropWidth": cw,
                 "width": 14, "height": 11, "filter": "triangle"}, source,
                F.resized_crop(img, top, left, ch, cw, [11, 14], interpolation=BILINEAR))
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump({"torchvision": torchvision.__version__, "cases": cases}, f, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
