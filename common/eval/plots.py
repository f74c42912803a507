"""Plots written by stages. Matplotlib's Agg backend: no display is needed."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from common.io import atomic_file  # noqa: E402


def save_figure(fig, path: str | Path) -> None:
    with atomic_file(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def plot_loss_curves(history: list[dict], path: str | Path, title: str, x: str = "step") -> None:
    """Train and validation loss against `x` (`step` or `elapsed_s`) from a `MetricsJSON` history."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, style in (("train/loss", "-"), ("val/loss", "o-")):
        points = [(row[x], row[key]) for row in history if key in row]
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, style, label=key, markersize=3)
    ax.set_xlabel({"step": "optimizer step", "elapsed_s": "wall time (s)"}.get(x, x))
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, path)
