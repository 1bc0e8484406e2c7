#!/usr/bin/env python3
"""Makes Tests/UpdraftTests/Fixtures/resample: small updatable models built with coremltools'
NeuralNetworkBuilder holding the resampling layers, and the values they must give, computed here with
numpy from NeuralNetwork.proto's formulas (written from the proto's text, not from Updraft's code).

Each model: input x [2, 6, 7] -> a 1x1 convolution "mix" (updatable, so the gradient comes back
through every resampling layer after it) -> the layers under test -> flatten -> inner product "fc"
(frozen) -> softmax "probs", categorical cross-entropy, SGD. Each JSON holds a batch of inputs, their
labels, and per example the values of every resampling layer's output and of "probs".

- upsample_fractional: upsample by fractionalScalingFactor (1.5, 2.6) on ALIGN_CORNERS_FALSE, then
  (0.75, 1.4) on ALIGN_CORNERS_TRUE.
- resize_bilinear: resizeBilinear in each SamplingMode in turn, to 9x5 (STRICT_ALIGN_ENDPOINTS_MODE),
  1x11 (ALIGN_ENDPOINTS_MODE: one row, the middle one), 7x8 (UPSAMPLE_MODE), 5x6 (ROI_ALIGN_MODE).
- crop_resize: five cropResize layers on "mix", each with its box from a loadConstant (rank 5
  [1, 1, 4, 1, 1]) or loadConstantND ([1, 1, 5, 1, 1], batch index 0), to 4x5 in every SamplingMode
  and BoxCoordinatesMode, normalized, with a spatial scale, and one box reversed; concatenated.

cropResize samples its box the way SamplingMode samples [0, X - 1]: the proto's formulas with the
interval read as [start, end] (X = end - start + 1), the points kept inside the box, then inside the
image. This is Updraft's reading of the proto where it says nothing of boxes; coremltools' runtime
tests of crop_resize (ALIGN_ENDPOINTS_MODE, plain, normalized and reversed boxes) agree with it, and
ResampleLayerTests checks those values.

Run once (needs coremltools and numpy; no torch) and commit the output:
    python3 Tests/Scripts/make_resample_fixtures.py
"""
import numpy as np

from layer_fixtures import Frame

FRAME = Frame("resample", 2212, c=2, h=6, w=7, mixed=3, classes=3, batch=4)
C, H, W, MIXED = FRAME.c, FRAME.h, FRAME.w, FRAME.mixed
rand, start = FRAME.rand, FRAME.start


# ---- NeuralNetwork.proto's grids, one axis at a time: N output samples of an axis of X inputs ----

def upsample_grid(mode, x, n):
    """UpsampleLayerParams.LinearUpsampleMode, as the proto writes it."""
    if mode == "ALIGN_CORNERS_TRUE":
        spacing = (x - 1) / (n - 1) if n > 1 else 0.0
        grid = np.arange(n) * spacing
    elif mode == "ALIGN_CORNERS_FALSE":
        spacing = x / n
        grid = np.arange(n) * spacing + 0.5 * spacing - 0.5
    else:  # DEFAULT
        spacing = (x - x / n) / (n - 1) if n > 1 else 0.0
        grid = np.arange(n) * spacing
    return np.minimum(x - 1, np.maximum(0, grid))


def sampling_grid(mode, x, n):
    """SamplingMode.Method: numpy.linspace(start, end, N) on [0, X - 1], kept inside it."""
    if mode == "STRICT_ALIGN_ENDPOINTS_MODE":
        grid = np.linspace(0, x - 1, n)
    elif mode == "ALIGN_ENDPOINTS_MODE":
        grid = np.array([(x - 1) / 2]) if n == 1 else np.linspace(0, x - 1, n)
    elif mode == "UPSAMPLE_MODE":
        grid = np.linspace(0, x - x / n, n)
    else:  # ROI_ALIGN_MODE
        spacing = max(1, x - 1) / n
        grid = np.linspace(0.5 * spacing, 0.5 * spacing + (n - 1) * spacing, n)
    return np.minimum(x - 1, np.maximum(0, grid))


def crop_grid(mode, start, end, n, x):
    """SamplingMode on the box [start, end] of an axis of X inputs: [0, X' - 1] read as [start, end]."""
    size = end - start + 1
    if mode == "STRICT_ALIGN_ENDPOINTS_MODE":
        grid = np.linspace(start, end, n)
    elif mode == "ALIGN_ENDPOINTS_MODE":
        grid = np.array([(start + end) / 2]) if n == 1 else np.linspace(start, end, n)
    elif mode == "UPSAMPLE_MODE":
        grid = np.linspace(start, start + size - size / n, n)
    else:  # ROI_ALIGN_MODE
        spacing = max(1, size - 1) / n
        grid = np.linspace(start + 0.5 * spacing, start + 0.5 * spacing + (n - 1) * spacing, n)
    grid = np.minimum(max(start, end), np.maximum(min(start, end), grid))
    return np.minimum(x - 1, np.maximum(0, grid))


def box_window(box, coordinates, normalized, scale, h, w):
    """BoxCoordinatesMode: (h_start, h_end), (w_start, w_end) in pixels."""
    a, b, c, d = box[-4:]
    if coordinates == "CORNERS_HEIGHT_FIRST":
        hs, ws, he, we = a, b, c, d
    elif coordinates == "CORNERS_WIDTH_FIRST":
        ws, hs, we, he = a, b, c, d
    elif coordinates == "CENTER_SIZE_HEIGHT_FIRST":
        hs, he, ws, we = a - c / 2, a + c / 2, b - d / 2, b + d / 2
    else:  # CENTER_SIZE_WIDTH_FIRST
        ws, we, hs, he = a - c / 2, a + c / 2, b - d / 2, b + d / 2
    kh = (h - 1 if normalized else 1) * scale
    kw = (w - 1 if normalized else 1) * scale
    return (hs * kh, he * kh), (ws * kw, we * kw)


def interpolation_matrix(grid, x):
    """M [N, X]: output o reads floor(g) with 1 - f and the next input (clamped) with f."""
    m = np.zeros((len(grid), x))
    for o, g in enumerate(grid):
        i0 = int(np.floor(g))
        i1 = min(i0 + 1, x - 1)
        f = g - i0
        m[o, i0] += 1 - f
        m[o, i1] += f
    return m


def bilinear(planes, grid_h, grid_w):
    """planes [C, H, W] sampled at rows grid_h and columns grid_w."""
    mh = interpolation_matrix(grid_h, planes.shape[1])
    mw = interpolation_matrix(grid_w, planes.shape[2])
    return np.einsum("oh,chw,pw->cop", mh, planes, mw)


def fractional_size(x, scale):
    """floor(X * factor), the factor as Core ML stores it (float32)."""
    return int(np.floor(x * float(np.float32(scale))))


# ---- the models ----

def upsample_fractional():
    b, mix = start("upsample_fractional")
    b.add_upsample("upHalf", 1.5, 2.6, "mix", "upHalf", mode="BILINEAR", linear_upsample_mode="ALIGN_CORNERS_FALSE")
    b.add_upsample("upCorners", 0.75, 1.4, "upHalf", "upCorners", mode="BILINEAR",
                   linear_upsample_mode="ALIGN_CORNERS_TRUE")
    h1, w1 = fractional_size(H, 1.5), fractional_size(W, 2.6)
    h2, w2 = fractional_size(h1, 0.75), fractional_size(w1, 1.4)

    def forward(x):
        m = mix(x)
        half = bilinear(m, upsample_grid("ALIGN_CORNERS_FALSE", H, h1), upsample_grid("ALIGN_CORNERS_FALSE", W, w1))
        corners = bilinear(half, upsample_grid("ALIGN_CORNERS_TRUE", h1, h2), upsample_grid("ALIGN_CORNERS_TRUE", w1, w2))
        return {"upHalf": half, "upCorners": corners}
    return b, forward, "upCorners", (MIXED, h2, w2)


def resize_bilinear():
    b, mix = start("resize_bilinear")
    steps = [("rStrict", "STRICT_ALIGN_ENDPOINTS_MODE", 9, 5), ("rAlign", "ALIGN_ENDPOINTS_MODE", 1, 11),
             ("rUpsample", "UPSAMPLE_MODE", 7, 8), ("rRoi", "ROI_ALIGN_MODE", 5, 6)]
    previous = "mix"
    for name, mode, h, w in steps:
        b.add_resize_bilinear(name, previous, name, target_height=h, target_width=w, mode=mode)
        previous = name

    def forward(x):
        values, top = {}, mix(x)
        for name, mode, h, w in steps:
            top = bilinear(top, sampling_grid(mode, top.shape[1], h), sampling_grid(mode, top.shape[2], w))
            values[name] = top
        return values
    return b, forward, "rRoi", (MIXED, 5, 6)


def crop_resize():
    b, mix = start("crop_resize")
    crops = [  # name, box values, SamplingMode, BoxCoordinatesMode, normalized, spatial scale
        ("cStrict", [1, 1.5, 4, 5], "STRICT_ALIGN_ENDPOINTS_MODE", "CORNERS_HEIGHT_FIRST", False, 1.0),
        ("cAlign", [0, 0.1, 0.2, 0.9, 0.7], "ALIGN_ENDPOINTS_MODE", "CORNERS_WIDTH_FIRST", True, 1.0),
        ("cUpsample", [5, 6, 6, 8], "UPSAMPLE_MODE", "CENTER_SIZE_HEIGHT_FIRST", False, 0.5),
        ("cRoi", [3, 2.5, 5, 3], "ROI_ALIGN_MODE", "CENTER_SIZE_WIDTH_FIRST", False, 1.0),
        ("cReversed", [4, 5.5, 0.5, 1], "ALIGN_ENDPOINTS_MODE", "CORNERS_HEIGHT_FIRST", False, 1.0),
    ]
    th, tw = 4, 5
    for name, box, mode, coordinates, normalized, scale in crops:
        values = np.array(box, dtype=np.float32)
        if len(box) == 5:
            b.add_load_constant_nd(name + "Box", name + "Box", constant_value=values.reshape(1, 1, 5, 1, 1), shape=[1, 1, 5, 1, 1])
        else:
            b.add_load_constant(name + "Box", name + "Box", constant_value=values, shape=[4, 1, 1])
        b.add_crop_resize(name, ["mix", name + "Box"], name, target_height=th, target_width=tw, mode=mode,
                          normalized_roi=normalized, box_indices_mode=coordinates, spatial_scale=scale)
    b.add_elementwise("crops", [c[0] for c in crops], "crops", "CONCAT")

    def forward(x):
        m, values = mix(x), {}
        for name, box, mode, coordinates, normalized, scale in crops:
            (hs, he), (ws, we) = box_window(np.array(box, dtype=np.float32).astype(np.float64), coordinates, normalized,
                                            float(np.float32(scale)), H, W)
            values[name] = bilinear(m, crop_grid(mode, hs, he, th, H), crop_grid(mode, ws, we, tw, W))
        values["crops"] = np.concatenate([values[c[0]] for c in crops])
        return values
    return b, forward, "crops", (MIXED * len(crops), th, tw)


if __name__ == "__main__":
    FRAME.write("upsample_fractional", upsample_fractional)
    FRAME.write("resize_bilinear", resize_bilinear)
    FRAME.write("crop_resize", crop_resize)
