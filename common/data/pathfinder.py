"""Pathfinder-style images, generated locally with our own code.

This is NOT the original Pathfinder image release used by Long Range Arena (drewlinsley/pathfinder,
``lra_release.gz``); it is an independent generator written from the published description, so
numbers on it are not comparable one to one with published Pathfinder results.

An image is an N x N grayscale canvas (N in {32, 64, 128}) holding dashed, smoothly curving paths
made of short straight strokes ("paddles"), and two marked end points (filled discs). The label is
1 when both marks sit on the two ends of the same path, 0 when they sit on two different paths.

Construction
------------
- Every image holds two full-length paths (ids 0 and 1) and ``n_distractors`` shorter paths
  (ids 2, 3, ...). Positive: both ends of path 0 are marked. Negative: the start of path 0 and
  the end of path 1 are marked. Both classes therefore carry the same amount of ink on average.
- A path is a polyline of ``path_length`` steps of length ``step``; the heading turns by a uniform
  angle in ``[-max_turn_deg, max_turn_deg]`` per step. Each step is drawn as one paddle of length
  ``paddle_len`` centred on the step's midpoint, so paddles are separated by gaps (dashes).
- Paths keep about ``clearance`` pixels (centre line to centre line; checked on points every
  0.5 * N / 32 px against a 128 x 128 grid, so at least clearance - 0.75 * N / 32 px) from
  every other path and stay ``margin`` pixels inside the canvas, so a negative can never be
  connected through a crossing. A path may cross itself.
- Labels alternate 1, 0, 1, 0, ... (classes balanced exactly).
- Difficulty: ``path_length`` (paddles per path; LRA's splits use contour lengths 6, 9, 14, see
  ``DIFFICULTY``) and ``n_distractors``. As in the published recipe, distractors default to
  ``path_length // 3`` paddles and ``20 // distractor_length`` of them.
- Geometry scales with N: at N = 32 a paddle is 2 px long and 1 px thick, a step is 3 px, the
  marker radius is 1.5 px, the clearance 2 px, the margin 1 px; everything is multiplied by N / 32.
- Ink is 255 on a 0 background with a one-pixel linear anti-aliased edge; marks are 255 discs.
  Images are uint8; ``sequences`` is the row-major flattening (vocabulary 256, length N * N).
- Coordinates are (x, y) = (column, row) in pixels, pixel centres at integers.
- Deterministic from ``seed``.

Not reproduced from the original: its exact paddle rendering, contrast jitter, the
``continuity``/``paddle_margin`` parameterisation, and its PNG + text metadata file layout.
"""

from __future__ import annotations

import math

import numpy as np

DIFFICULTY = {"easy": 6, "intermediate": 9, "hard": 14}  # paddles per path (curv_baseline / _9 / _14)
SIZES = (32, 64, 128)
INK = 255


def geometry(size: int) -> dict:
    """Pixel sizes for an N x N canvas (values for N = 32 scaled by N / 32)."""
    f = size / 32
    return {"paddle_len": 2.0 * f, "step": 3.0 * f, "thickness": 1.0 * f, "marker_radius": 1.5 * f,
            "clearance": 2.0 * f, "margin": 1.0 * f}


# ---------------------------------------------------------------------------------------------
# Path growth
# ---------------------------------------------------------------------------------------------


def _segment_points(p0: np.ndarray, p1: np.ndarray, n: int) -> np.ndarray:
    """n + 1 evenly spaced points from p0 to p1 for each row: p0, p1 [k, 2] -> [k, n + 1, 2]."""
    t = np.linspace(0.0, 1.0, n + 1)[None, :, None]
    return p0[:, None, :] + t * (p1 - p0)[:, None, :]


class _Forbidden:
    """Boolean 128 x 128 grid over the canvas marking points closer than `clearance` to a placed path."""

    CELLS = 128

    def __init__(self, size: int, clearance: float):
        self.GRID = self.CELLS / size  # cells per pixel: 4 at N = 32, 1 at N = 128
        self.n = self.CELLS
        self.mask = np.zeros((self.n, self.n), dtype=bool)
        r = clearance * self.GRID
        k = int(math.ceil(r))
        dy, dx = np.mgrid[-k:k + 1, -k:k + 1]
        keep = dx ** 2 + dy ** 2 < r ** 2
        self.offsets = np.stack([dx[keep], dy[keep]], 1)

    def _cells(self, points: np.ndarray) -> np.ndarray:
        # callers pass points inside the canvas, so the cells are in range
        return np.rint(points * self.GRID).astype(np.int64)

    def add(self, points: np.ndarray) -> None:
        cells = (self._cells(points)[:, None, :] + self.offsets[None]).reshape(-1, 2)
        cells = cells[((cells >= 0) & (cells < self.n)).all(1)]
        self.mask[cells[:, 1], cells[:, 0]] = True

    def hits(self, points: np.ndarray) -> np.ndarray:
        """True where a point (any shape [..., 2]) lies in the forbidden zone."""
        cells = self._cells(points)
        return self.mask[cells[..., 1], cells[..., 0]]


def _grow_path(rng, n_steps, size, geo, forbidden, max_turn, n_candidates=12, attempts=20,
               backtracks=20):
    """Polyline [n_steps + 1, 2] that stays out of `forbidden` (other paths), or None.

    Grows step by step from a random start (initial heading aimed within 90 degrees of the canvas
    centre); when no candidate heading fits, the last 3 steps are undone and regrown, at most
    `backtracks` times per start."""
    step, margin = geo["step"], geo["margin"]
    n_sub = max(1, math.ceil(step / (0.5 * size / 32)))
    t = np.linspace(0.0, 1.0, n_sub + 1)[:, None]
    lo, hi = margin, size - 1 - margin
    centre = np.full(2, (size - 1) / 2)
    for _ in range(attempts):
        start = rng.uniform(lo, hi, size=2)
        if forbidden.hits(start):
            continue
        to_centre = math.atan2(*(centre - start)[::-1])
        points, headings = [start], [to_centre + rng.uniform(-np.pi / 2, np.pi / 2)]
        budget = backtracks
        while len(points) <= n_steps:
            cand = headings[-1] + rng.uniform(-max_turn, max_turn, size=n_candidates)
            ends = points[-1] + step * np.stack([np.cos(cand), np.sin(cand)], 1)
            good = np.flatnonzero(((ends >= lo) & (ends <= hi)).all(1))
            if len(good):
                samples = points[-1] + t * (ends[good, None, :] - points[-1])  # [k, n_sub + 1, 2]
                good = good[~forbidden.hits(samples).any(1)]
            if len(good):
                points.append(ends[good[0]])
                headings.append(cand[good[0]])
                continue
            if budget == 0:
                break
            budget -= 1
            keep = max(1, len(points) - 3)
            del points[keep:], headings[keep:]
        if len(points) == n_steps + 1:
            return np.asarray(points)
    return None


def path_samples(path: np.ndarray, spacing: float = 0.5) -> np.ndarray:
    """Points along the whole polyline at most `spacing` apart (used for clearance checks)."""
    seg = np.linalg.norm(path[1] - path[0])
    n_sub = max(1, math.ceil(seg / spacing))
    return _segment_points(path[:-1], path[1:], n_sub).reshape(-1, 2)


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------


def _render(size: int, paddles: np.ndarray, markers: np.ndarray, thickness: float,
            marker_radius: float) -> np.ndarray:
    """uint8 [size, size]: paddles [k, 2, 2] (segment end points) and marker centres [m, 2]."""
    ys, xs = np.mgrid[0:size, 0:size]
    pix = np.stack([xs.ravel(), ys.ravel()], 1).astype(np.float64)  # [P, 2]
    a, b = paddles[:, 0], paddles[:, 1]  # [k, 2]
    ab = b - a
    t = ((pix[:, None] - a[None]) * ab[None]).sum(-1) / np.maximum((ab ** 2).sum(-1), 1e-12)[None]
    closest = a[None] + np.clip(t, 0, 1)[..., None] * ab[None]  # [P, k, 2]
    d_paddle = np.sqrt(((pix[:, None] - closest) ** 2).sum(-1)).min(1)
    d_marker = np.sqrt(((pix[:, None] - markers[None]) ** 2).sum(-1)).min(1)
    # linear one-pixel edge: full ink inside the stroke/disc, fading to 0 one pixel further out
    cover = np.maximum(np.clip(thickness / 2 + 0.5 - d_paddle, 0, 1),
                       np.clip(marker_radius + 0.5 - d_marker, 0, 1))
    return np.round(cover * INK).astype(np.uint8).reshape(size, size)


def _paddles(path: np.ndarray, paddle_len: float) -> np.ndarray:
    """Paddle end points [steps, 2, 2]: one paddle per step, centred on the step's midpoint."""
    centre = (path[:-1] + path[1:]) / 2
    u = path[1:] - path[:-1]
    u = u / np.linalg.norm(u, axis=1, keepdims=True)
    half = paddle_len / 2 * u
    return np.stack([centre - half, centre + half], 1)


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def generate_pathfinder(n: int, seed: int, size: int = 32, path_length: int = DIFFICULTY["hard"],
                        n_distractors: int | None = None, distractor_length: int | None = None,
                        max_turn_deg: float = 30.0, max_image_tries: int = 200) -> dict:
    """`n` images with labels 1, 0, 1, 0, ...

    Returns ``images`` uint8 [n, size, size], ``sequences`` uint8 [n, size * size] (row-major view),
    ``labels`` int64 [n], and per image (lists of length n): ``paths`` (list of [steps + 1, 2] point
    arrays, ids 0/1 full length, then distractors), ``paddle_centres`` (list of [steps, 2] arrays),
    ``endpoints`` ([2, 2] marked points) and ``endpoint_paths`` ((id, id) of the path each mark
    ends: (0, 0) for positives, (0, 1) for negatives).
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size}")
    if path_length < 1:
        raise ValueError("path_length must be >= 1")
    geo = geometry(size)
    distractor_length = distractor_length or max(1, path_length // 3)
    if n_distractors is None:
        n_distractors = 20 // distractor_length
    max_turn = math.radians(max_turn_deg)
    lengths = [path_length, path_length] + [distractor_length] * n_distractors
    rng = np.random.default_rng(seed)

    images = np.zeros((n, size, size), dtype=np.uint8)
    labels = np.array([1 - i % 2 for i in range(n)], dtype=np.int64)
    out_paths, out_centres, out_ends, out_end_ids = [], [], [], []
    for i in range(n):
        for _ in range(max_image_tries):
            paths, forbidden = [], _Forbidden(size, geo["clearance"])
            for steps in lengths:
                path = _grow_path(rng, steps, size, geo, forbidden, max_turn)
                if path is None:
                    break
                paths.append(path)
                forbidden.add(path_samples(path, spacing=0.25 * size / 32))
            if len(paths) == len(lengths):
                break
        else:
            raise RuntimeError(f"could not place {len(lengths)} paths of lengths {lengths} on a "
                               f"{size}x{size} canvas; lower path_length or n_distractors")
        end_ids = (0, 0) if labels[i] == 1 else (0, 1)
        ends = np.stack([paths[0][0], paths[end_ids[1]][-1]])
        paddles = np.concatenate([_paddles(p, geo["paddle_len"]) for p in paths])
        images[i] = _render(size, paddles, ends, geo["thickness"], geo["marker_radius"])
        out_paths.append(paths)
        out_centres.append([(p[:-1] + p[1:]) / 2 for p in paths])
        out_ends.append(ends)
        out_end_ids.append(end_ids)
    return {"images": images, "sequences": images.reshape(n, size * size), "labels": labels,
            "paths": out_paths, "paddle_centres": out_centres, "endpoints": out_ends,
            "endpoint_paths": out_end_ids, "geometry": geo}
