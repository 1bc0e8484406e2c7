#!/usr/bin/env python3
"""Writes the small .npy files the NpyDataset tests read, with NumPy itself, so the parser is checked
against real numpy.save output (headers, padding, versions), not only against the tests' own writer.

Usage: python3 Tests/Scripts/make_npy_fixtures.py   (writes Tests/UpdraftTests/Fixtures/npy/)
"""
import os

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "..", "UpdraftTests", "Fixtures", "npy")
os.makedirs(out, exist_ok=True)


def save(name, array, version=None):
    path = os.path.join(out, name)
    if version is None:
        np.save(path, array)
    else:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, array, version=version)


save("inputs_f4.npy", (np.arange(24, dtype=np.float32) / 4).reshape(3, 2, 4))
save("targets_i8.npy", np.array([2, 0, 1], dtype=np.int64))
save("targets_u1_column.npy", np.array([[1], [1], [0]], dtype=np.uint8))
save("targets_f4_values.npy", np.array([[0.5, -1], [2, 3.25], [-4, 1e-3]], dtype=np.float32))
save("inputs_f8_v2.npy", np.array([[1.5, -2.25, 3], [4, 5, 1e10]], dtype=np.float64), version=(2, 0))
save("big_endian.npy", np.array([1, 2, 3], dtype=">f4"))
save("fortran_order.npy", np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
save("structured.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))
print("wrote", sorted(os.listdir(out)))
