"""Mixture weights chosen without search: fixed grids for sweeps, and programmed alphas.

- `sweep_grid(n_blocks, points)`: for two components, every combination of alpha_1 (the weight of
  the second component) in `points` per block, the paper's 1-D (one block) and 2-D (two blocks)
  landscapes.
- `exclude(n_blocks, n_components, m)`: uniform weight on every component but m (task metadata:
  a component that cannot read the sequence, such as GPT-Neo beyond its 2048 positions).
- `average(alphas)`: the mean of alphas searched on several tasks (the paper programs natural-
  language hybrids with the average of the alphas searched on the MAD tasks).
"""

from __future__ import annotations

import itertools

import torch

from common.errors import ConfigError


def sweep_grid(n_blocks: int, points: list[float]) -> list[torch.Tensor]:
    if any(not 0 <= p <= 1 for p in points):
        raise ConfigError(f"sweep points must lie in [0, 1], got {points}")
    return [torch.tensor([[1 - p, p] for p in combo]) for combo in itertools.product(points, repeat=n_blocks)]


def exclude(n_blocks: int, n_components: int, m: int) -> torch.Tensor:
    if not 0 <= m < n_components or n_components < 2:
        raise ConfigError(f"exclude: component {m} of {n_components}; at least one other component must remain")
    alphas = torch.full((n_blocks, n_components), 1.0 / (n_components - 1))
    alphas[:, m] = 0.0
    return alphas


def average(alphas: list[torch.Tensor]) -> torch.Tensor:
    if not alphas or len({tuple(a.shape) for a in alphas}) != 1:
        raise ConfigError(f"average: needs alphas of one shape, got {[tuple(a.shape) for a in alphas]}")
    mean = torch.stack(alphas).mean(0)
    return mean / mean.sum(-1, keepdim=True)
