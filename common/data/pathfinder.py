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
  angle in ``[-max_turn_deg, max_turn_deg]`` per step, on a grid of ``HEADINGS`` directions (0.25
  degrees apart; ``max_turn_deg`` is rounded to that grid). Each step is drawn as one paddle of length
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
- The same bytes on every CPU: headings are whole steps on the direction grid, and their cosines
  and sines come from a table computed once in decimal arithmetic. numpy's float ``sin``, ``cos``
  and ``arctan2`` take a different SIMD path on a CPU with AVX-512 and differ in the last bit,
  which was enough to make the data set differ between machines.
- Deterministic from ``seed`` and ``n``: images grow in lockstep, in chunks of 2048, from one
  random stream (one step of every unfinished path per round, so a round is a few array
  operations), which means the first k of n images differ from the k images of a run with n = k.

Not reproduced from the original: its exact paddle rendering, contrast jitter, the
``continuity``/``paddle_margin`` parameterisation, and its PNG + text metadata file layout.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np

DIFFICULTY = {"easy": 6, "intermediate": 9, "hard": 14}  # paddles per path (curv_baseline / _9 / _14)
SIZES = (32, 64, 128)
INK = 255
LOCKSTEP_CHUNK = 2048  # images grown together
HEADINGS = 1440  # directions a path can take: 0.25 degrees apart


def geometry(size: int) -> dict:
    """Pixel sizes for an N x N canvas (values for N = 32 scaled by N / 32)."""
    f = size / 32
    return {"paddle_len": 2.0 * f, "step": 3.0 * f, "thickness": 1.0 * f, "marker_radius": 1.5 * f,
            "clearance": 2.0 * f, "margin": 1.0 * f}


# ---------------------------------------------------------------------------------------------
# Path growth
# ---------------------------------------------------------------------------------------------


def unit_circle(n: int = HEADINGS) -> np.ndarray:
    """[n, 2]: (cos, sin) of 2 pi k / n, k = 0 .. n - 1, in 40-digit decimal arithmetic rounded once
    to float64, so every CPU gets the same bits (see the module docstring)."""
    with localcontext() as ctx:
        ctx.prec = 40
        pi = Decimal("3.141592653589793238462643383279502884197")
        table = np.zeros((n, 2))
        for k in range(n):
            x = 2 * pi * k / n
            term, cos, sin, i = Decimal(1), Decimal(0), Decimal(0), 0
            while abs(term) > Decimal("1e-39"):  # Taylor series: term = x^i / i!, signs by i mod 4
                if i % 2 == 0:
                    cos += term if i % 4 == 0 else -term
                else:
                    sin += term if i % 4 == 1 else -term
                i += 1
                term = term * x / i
            table[k] = float(cos), float(sin)
    return table


def _segment_points(p0: np.ndarray, p1: np.ndarray, n: int) -> np.ndarray:
    """n + 1 evenly spaced points from p0 to p1 for each row: p0, p1 [k, 2] -> [k, n + 1, 2]."""
    t = np.linspace(0.0, 1.0, n + 1)[None, :, None]
    return p0[:, None, :] + t * (p1 - p0)[:, None, :]


class _Forbidden:
    """Per image, a boolean 128 x 128 grid over the canvas marking points closer than `clearance`
    to a placed path. All images share one flat array, each grid framed by a k-cell border so a
    disk stamped near the edge needs no clipping; lookups and stamps are single flat gathers."""

    CELLS = 128

    def __init__(self, n_images: int, size: int, clearance: float):
        self.GRID = self.CELLS / size  # cells per pixel: 4 at N = 32, 1 at N = 128
        r = clearance * self.GRID
        self.k = k = int(math.ceil(r))
        self.side = side = self.CELLS + 2 * k
        dy, dx = np.mgrid[-k:k + 1, -k:k + 1]
        self.disk = (dy * side + dx)[dx ** 2 + dy ** 2 < r ** 2]  # flat offsets of the stamp
        self.flat = np.zeros(n_images * side * side, dtype=bool)

    def _index(self, images: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Flat index of the cell holding pixel point (x, y); points outside the canvas are clipped."""
        cx = np.clip(np.rint(x * self.GRID).astype(np.int64), 0, self.CELLS - 1)
        cy = np.clip(np.rint(y * self.GRID).astype(np.int64), 0, self.CELLS - 1)
        return images * (self.side * self.side) + (cy + self.k) * self.side + (cx + self.k)

    def add(self, image: int, points: np.ndarray) -> None:
        base = self._index(np.int64(image), points[:, 0], points[:, 1])
        self.flat[(base[:, None] + self.disk[None]).ravel()] = True

    def clear(self, image: int) -> None:
        self.flat[image * self.side * self.side:(image + 1) * self.side * self.side] = False

    def hits(self, images: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Points (x, y) of shape [len(images), ...] -> True where in that image's forbidden zone."""
        index = images.reshape(images.shape + (1,) * (x.ndim - 1))
        return self.flat[self._index(index, x, y)]


def _grow_paths(rng, n_images, lengths, size, geo, max_turn, n_candidates=12, attempts=20, backtracks=20,
                max_image_tries=200) -> list[list[np.ndarray]]:
    """For each of `n_images` images, polylines [lengths[j] + 1, 2] that keep clear of each other.

    The images grow in lockstep, one step of every unfinished image per round, so each round is
    a few array operations (the per-image loop in Python was the generator's cost). Per image and
    path: start at a random point (a start in the forbidden zone costs an attempt), aim within 90
    degrees of the canvas centre, then per step draw `n_candidates` headings within `max_turn`
    grid steps of the last and take the first whose step stays inside the margins and out of the forbidden zone
    (checked at points every 0.5 * N / 32 px along the step). When none fits, undo the last 3 steps
    (at most `backtracks` times per attempt); after `attempts` failed attempts the whole image
    starts over, at most `max_image_tries` times. A finished path joins the forbidden zone.
    """
    step, margin = geo["step"], geo["margin"]
    unit = unit_circle()
    n_sub = max(1, math.ceil(step / (0.5 * size / 32)))
    fractions = np.linspace(0.0, 1.0, n_sub + 1)
    lo, hi = margin, size - 1 - margin
    centre = (size - 1) / 2
    lengths = np.asarray(lengths)
    longest = int(lengths.max()) + 1

    forbidden = _Forbidden(n_images, size, geo["clearance"])
    paths: list[list[np.ndarray]] = [[] for _ in range(n_images)]
    path_idx = np.zeros(n_images, dtype=np.int64)  # path being grown
    points = np.zeros((n_images, longest, 2))
    headings = np.zeros((n_images, longest), dtype=np.int64)  # indices into `unit`
    n_points = np.zeros(n_images, dtype=np.int64)  # 0: needs a start
    attempt = np.zeros(n_images, dtype=np.int64)
    budget = np.zeros(n_images, dtype=np.int64)
    image_tries = np.zeros(n_images, dtype=np.int64)
    active = np.ones(n_images, dtype=bool)

    while active.any():
        # New starts.
        s = np.flatnonzero(active & (n_points == 0))
        if len(s):
            start = rng.uniform(lo, hi, size=(len(s), 2))
            heading = rng.integers(0, HEADINGS, size=len(s))
            blocked = forbidden.hits(s, start[:, 0], start[:, 1])
            attempt[s[blocked]] += 1
            s, start, heading = s[~blocked], start[~blocked], heading[~blocked]
            # a uniform heading, turned around when it points away from the centre
            away = (unit[heading] * (centre - start)).sum(1) < 0
            heading[away] = (heading[away] + HEADINGS // 2) % HEADINGS
            points[s, 0] = start
            headings[s, 0] = heading
            n_points[s], budget[s] = 1, backtracks

        # One step for every growing path: the first candidate heading that fits.
        g = np.flatnonzero(active & (n_points > 0))
        if len(g):
            last = n_points[g] - 1
            turn = rng.integers(-max_turn, max_turn + 1, size=(len(g), n_candidates))
            heading = (headings[g, last][:, None] + turn) % HEADINGS
            dx, dy = step * unit[heading, 0], step * unit[heading, 1]  # [g, cand]
            x, y = points[g, last, 0][:, None], points[g, last, 1][:, None]
            ends = np.stack([x + dx, y + dy], -1)
            fits = ((ends >= lo) & (ends <= hi)).all(-1)
            sx = x[..., None] + fractions * dx[..., None]  # [g, cand, sub]
            sy = y[..., None] + fractions * dy[..., None]
            fits &= ~forbidden.hits(g, sx, sy).any(-1)
            ok = fits.any(1)
            first = fits.argmax(1)
            grow, rows = g[ok], np.flatnonzero(ok)
            points[grow, n_points[grow]] = ends[rows, first[rows]]
            headings[grow, n_points[grow]] = heading[rows, first[rows]]
            n_points[grow] += 1
            stuck = g[~ok]
            spent = stuck[budget[stuck] == 0]
            attempt[spent], n_points[spent] = attempt[spent] + 1, 0
            retry = stuck[budget[stuck] > 0]
            budget[retry] -= 1
            n_points[retry] = np.maximum(1, n_points[retry] - 3)

        # Images out of attempts start over; finished paths join the forbidden zone.
        for i in np.flatnonzero(active & (attempt >= attempts)):
            image_tries[i] += 1
            if image_tries[i] >= max_image_tries:
                raise RuntimeError(f"could not place {len(lengths)} paths (lengths {lengths.min()}-{lengths.max()}) "
                                   f"on a {size}x{size} canvas; lower path_length or n_distractors")
            forbidden.clear(i)
            paths[i], path_idx[i], attempt[i], n_points[i] = [], 0, 0, 0
        for i in np.flatnonzero(active & (n_points == lengths[np.minimum(path_idx, len(lengths) - 1)] + 1)):
            path = points[i, :n_points[i]].copy()
            paths[i].append(path)
            forbidden.add(i, path_samples(path, n_sub=math.ceil(step / (0.25 * size / 32))))
            path_idx[i] += 1
            attempt[i], n_points[i] = 0, 0
            active[i] = path_idx[i] < len(lengths)
    return paths


def path_samples(path: np.ndarray, n_sub: int) -> np.ndarray:
    """Points along the whole polyline, `n_sub` intervals per step (used for clearance checks).

    The count comes from the configured step length, not a measured one: a measured 3.0 px step
    divided by 0.25 px rounds up to 12 or 13 depending on its last bit."""
    return _segment_points(path[:-1], path[1:], n_sub).reshape(-1, 2)


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------


def _render(size: int, paddles: np.ndarray, markers: np.ndarray, thickness: float,
            marker_radius: float) -> np.ndarray:
    """uint8 [size, size]: paddles [k, 2, 2] (segment end points) and marker centres [m, 2].

    Each shape only inks pixels within its reach (half its length plus the anti-aliased rim), so
    coverage is computed on a small window around each shape and max-combined into the canvas."""
    canvas = np.zeros(size * size)

    def stamp(centres: np.ndarray, reach: float, distance) -> None:
        r = int(math.ceil(reach + 0.5))  # + 0.5: windows are centred on the rounded centre pixel
        oy, ox = np.mgrid[-r:r + 1, -r:r + 1]
        base = np.rint(centres).astype(np.int64)
        px = base[:, 0, None] + ox.ravel()[None]  # [shapes, window]
        py = base[:, 1, None] + oy.ravel()[None]
        cover = distance(px.astype(np.float64), py.astype(np.float64))
        inside = (px >= 0) & (px < size) & (py >= 0) & (py < size)
        np.maximum.at(canvas, (py * size + px)[inside], cover[inside])

    def paddle_cover(px, py):
        # linear one-pixel edge: full ink inside the stroke, fading to 0 one pixel further out
        a, ab = paddles[:, 0, :, None], (paddles[:, 1] - paddles[:, 0])[:, :, None]
        t = ((px - a[:, 0]) * ab[:, 0] + (py - a[:, 1]) * ab[:, 1]) / np.maximum((ab ** 2).sum(1), 1e-12)
        t = np.clip(t, 0, 1)
        d = np.sqrt((px - (a[:, 0] + t * ab[:, 0])) ** 2 + (py - (a[:, 1] + t * ab[:, 1])) ** 2)
        return np.clip(thickness / 2 + 0.5 - d, 0, 1)

    def marker_cover(px, py):
        d = np.sqrt((px - markers[:, 0, None]) ** 2 + (py - markers[:, 1, None]) ** 2)
        return np.clip(marker_radius + 0.5 - d, 0, 1)

    half = np.linalg.norm(paddles[:, 1] - paddles[:, 0], axis=1).max() / 2
    stamp(paddles.mean(1), half + thickness / 2 + 0.5, paddle_cover)
    stamp(markers, marker_radius + 0.5, marker_cover)
    return np.round(canvas * INK).astype(np.uint8).reshape(size, size)


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
    max_turn = round(max_turn_deg / 360 * HEADINGS)  # in grid steps
    lengths = [path_length, path_length] + [distractor_length] * n_distractors
    rng = np.random.default_rng(seed)

    images = np.zeros((n, size, size), dtype=np.uint8)
    labels = np.array([1 - i % 2 for i in range(n)], dtype=np.int64)
    out_paths, out_centres, out_ends, out_end_ids = [], [], [], []
    all_paths = []
    for start in range(0, n, LOCKSTEP_CHUNK):  # chunks bound the forbidden grids' memory (~20 kB per image)
        all_paths += _grow_paths(rng, min(LOCKSTEP_CHUNK, n - start), lengths, size, geo, max_turn,
                                 max_image_tries=max_image_tries)
    for i, paths in enumerate(all_paths):
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
