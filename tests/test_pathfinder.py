"""Pathfinder-style generator: balance, determinism, drawn marks and paddles, and a connectivity oracle."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import deque

import numpy as np
import pytest

from common.data import pathfinder

UP = 4  # test-only resolution: the true paths are re-rendered solid at 4x


def solid_canvas(paths, size: int) -> np.ndarray:
    """Solid centre lines of all paths at UP x resolution (points every 0.1 hi-res px)."""
    canvas = np.zeros((size * UP, size * UP), dtype=bool)
    for path in paths:
        for a, b in zip(path[:-1], path[1:]):
            n = int(np.ceil(np.linalg.norm(b - a) * UP / 0.1)) + 1
            pts = np.rint(np.linspace(a, b, n) * UP).astype(int)
            canvas[pts[:, 1], pts[:, 0]] = True
    return canvas


def flood(canvas: np.ndarray, start) -> np.ndarray:
    """8-connected flood fill from pixel `start` (x, y)."""
    seen = np.zeros_like(canvas)
    x0, y0 = start
    assert canvas[y0, x0]
    seen[y0, x0] = True
    todo = deque([(x0, y0)])
    h, w = canvas.shape
    while todo:
        x, y = todo.popleft()
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                u, v = x + dx, y + dy
                if 0 <= u < w and 0 <= v < h and canvas[v, u] and not seen[v, u]:
                    seen[v, u] = True
                    todo.append((u, v))
    return seen


@pytest.fixture(scope="module")
def data():
    return pathfinder.generate_pathfinder(40, seed=3, size=32, path_length=9)


def test_shapes_balance_and_range(data):
    images = data["images"]
    assert images.shape == (40, 32, 32) and images.dtype == np.uint8
    assert data["sequences"].shape == (40, 1024) and (data["sequences"][5] == images[5].ravel()).all()
    assert (data["labels"] == np.tile([1, 0], 20)).all()
    assert images.min() == 0 and images.max() == 255


def test_determinism():
    a = pathfinder.generate_pathfinder(6, seed=11, size=32, path_length=6)
    b = pathfinder.generate_pathfinder(6, seed=11, size=32, path_length=6)
    c = pathfinder.generate_pathfinder(6, seed=12, size=32, path_length=6)
    assert (a["images"] == b["images"]).all() and (a["labels"] == b["labels"]).all()
    assert not (a["images"] == c["images"]).all()


def test_endpoints_and_paddles_drawn(data):
    for img, ends, paths, centres in zip(data["images"], data["endpoints"], data["paths"],
                                         data["paddle_centres"]):
        for x, y in np.rint(ends).astype(int):
            assert img[y, x] == 255
        for path, cs in zip(paths, centres):
            assert np.allclose(cs, (path[:-1] + path[1:]) / 2)
            for x, y in np.rint(cs).astype(int):
                assert img[y, x] > 0  # ink at every paddle centre
            assert ((path >= 0) & (path <= 31)).all()


def test_metadata_ends_match_label(data):
    for label, ends, ids, paths in zip(data["labels"], data["endpoints"], data["endpoint_paths"],
                                       data["paths"]):
        assert (ids[0] == ids[1]) == bool(label)
        assert np.allclose(ends[0], paths[ids[0]][0]) and np.allclose(ends[1], paths[ids[1]][-1])
        assert len(paths) == 2 + 20 // 3 and len(paths[0]) == len(paths[1]) == 10


def test_connectivity_oracle(data):
    """Flood fill over every path drawn solid: mark A reaches mark B iff the label is 1."""
    for label, ends, paths in zip(data["labels"], data["endpoints"], data["paths"]):
        canvas = solid_canvas(paths, 32)
        a, b = np.rint(ends * UP).astype(int)
        reached = flood(canvas, a)
        assert bool(reached[b[1], b[0]]) == bool(label)


def test_difficulty_changes_ink():
    ink = {}
    for nd in (0, 8):
        d = pathfinder.generate_pathfinder(20, seed=5, size=32, path_length=6, n_distractors=nd)
        ink[nd] = (d["images"] > 0).mean()
        assert all(len(p) == 2 + nd for p in d["paths"])
    assert ink[8] > 1.3 * ink[0]
    short = pathfinder.generate_pathfinder(20, seed=5, size=32, path_length=4, n_distractors=0)
    long = pathfinder.generate_pathfinder(20, seed=5, size=32, path_length=12, n_distractors=0)
    assert (long["images"] > 0).mean() > 1.5 * (short["images"] > 0).mean()


@pytest.mark.parametrize("size", [64, 128])
def test_larger_canvases(size):
    d = pathfinder.generate_pathfinder(2, seed=0, size=size, path_length=9)
    assert d["images"].shape == (2, size, size)
    for label, ends, paths in zip(d["labels"], d["endpoints"], d["paths"]):
        reached = flood(solid_canvas(paths, size), np.rint(ends[0] * UP).astype(int))
        bx, by = np.rint(ends[1] * UP).astype(int)
        assert bool(reached[by, bx]) == bool(label)


def test_bad_size():
    with pytest.raises(ValueError):
        pathfinder.generate_pathfinder(2, seed=0, size=48)


def dense_render(size, paddles, markers, thickness, marker_radius):
    """Every pixel against every paddle and marker (no windows): the distance-based ink rule."""
    img = np.zeros((size, size))
    for y in range(size):
        for x in range(size):
            p = np.array([x, y], dtype=float)
            d = np.inf
            for a, b in paddles:
                t = np.clip(np.dot(p - a, b - a) / max(np.dot(b - a, b - a), 1e-12), 0, 1)
                d = min(d, np.linalg.norm(p - (a + t * (b - a))))
            dm = min(np.linalg.norm(p - m) for m in markers)
            img[y, x] = max(np.clip(thickness / 2 + 0.5 - d, 0, 1), np.clip(marker_radius + 0.5 - dm, 0, 1))
    return np.round(img * 255).astype(np.uint8)


@pytest.mark.parametrize("size", [32, 64])
def test_windowed_render_matches_dense_render(size):
    rng = np.random.default_rng(size)
    geo = pathfinder.geometry(size)
    a = rng.uniform(0, size - 1, size=(12, 2))
    heading = rng.uniform(0, 2 * np.pi, size=12)
    b = a + geo["paddle_len"] * np.stack([np.cos(heading), np.sin(heading)], 1)
    paddles, markers = np.stack([a, b], 1), rng.uniform(0, size - 1, size=(2, 2))
    ours = pathfinder._render(size, paddles, markers, geo["thickness"], geo["marker_radius"])
    expected = dense_render(size, paddles, markers, geo["thickness"], geo["marker_radius"])
    assert np.abs(ours.astype(int) - expected).max() <= 1  # float summation order may differ
    assert (ours == expected).mean() > 0.99 and ours.max() == 255


def test_chunked_growth(monkeypatch):
    """Images grow in lockstep chunks; with chunks of 3, eight images still satisfy the oracle."""
    monkeypatch.setattr(pathfinder, "LOCKSTEP_CHUNK", 3)
    d = pathfinder.generate_pathfinder(8, seed=1, size=32, path_length=9)
    assert (d["labels"] == np.tile([1, 0], 4)).all() and len(d["paths"]) == 8
    for label, ends, paths in zip(d["labels"], d["endpoints"], d["paths"]):
        reached = flood(solid_canvas(paths, 32), np.rint(ends[0] * UP).astype(int))
        bx, by = np.rint(ends[1] * UP).astype(int)
        assert bool(reached[by, bx]) == bool(label)


def test_unit_circle_matches_float_trigonometry():
    k = np.arange(pathfinder.HEADINGS)
    angle = 2 * np.pi * k / pathfinder.HEADINGS
    expected = np.stack([np.cos(angle), np.sin(angle)], 1)
    assert np.abs(pathfinder.unit_circle() - expected).max() < 1e-14


def test_same_bytes_on_every_simd_path():
    """numpy picks its float kernels by CPU, and sin/cos/arctan2 differ in the last bit between its
    AVX-512 and baseline paths; that made `data/lra` differ between machines. Generate at this
    machine's best path and with every dispatched feature off (numpy's baseline)."""
    from numpy._core._multiarray_umath import __cpu_dispatch__

    code = ("import hashlib; from common.data.pathfinder import generate_pathfinder; "
            "d = generate_pathfinder(256, seed=0, size=32, path_length=14); "
            "print(hashlib.md5(d['images'].tobytes()).hexdigest())")
    digests = []
    for disabled in ("", " ".join(__cpu_dispatch__)):
        env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": disabled}
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        digests.append(run.stdout.strip())
    assert digests[0] == digests[1]
