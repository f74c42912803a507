"""What every stage of this paper shares: the `models` section, the tokenizer's vocabulary, the
`device` option and multi-model loss plots. Plotting and tokenizer imports are deferred: the memory stage's
subprocesses need neither."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from common.config import stage_config
from common.errors import ConfigError
from common.stages import load_stage
from papers.masked_mixers.models import ModelsConfig

T = TypeVar("T")


def load_paper_stage(params_path: Path, section: str, cls: type[T]) -> tuple[T, ModelsConfig, str]:
    """The stage's own section and the shared `models` section, both for the active profile."""
    cfg, profile, raw = load_stage(params_path, section, cls)
    return cfg, stage_config(raw, "models", ModelsConfig, profile), profile


def vocab_size(tokenizer_dir: Path) -> int:
    from common.data.tokenizer import load_tokenizer

    return len(load_tokenizer(tokenizer_dir))


def resolve_device(device: str, key: str) -> str:
    """`cpu`, `cuda` or `auto` (cuda when available) -> the device to use; `cuda` without a GPU is a
    config error naming `key`."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{key}: cuda, but no CUDA device is available here; use cpu or auto")
    return device


def plot_curves(curves: dict[str, list[tuple[float, float]]], path: Path, title: str, xlabel: str,
                ylabel: str = "training cross-entropy (nats/token)") -> None:
    """One line per named curve of (x, y) points."""
    import matplotlib.pyplot as plt

    from common.eval.plots import save_figure

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, points in curves.items():
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, label=name, linewidth=1.2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    save_figure(fig, path)


def curve(history: list[dict], x: str, y: str = "train/loss") -> list[tuple[float, float]]:
    return [(row[x], row[y]) for row in history if y in row]
