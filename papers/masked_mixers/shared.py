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


def plot_seed_curves(models: dict, path: Path, title: str) -> None:
    """Validation loss against steps per model: the mean over seeds, the seeds' range shaded."""
    import matplotlib.pyplot as plt
    import numpy as np

    from common.eval.plots import save_figure

    fig, ax = plt.subplots(figsize=(7, 4.5))
    if not models:
        ax.text(0.5, 0.5, "no models trained at this profile (models: [])", ha="center", va="center")
    for name, model in models.items():
        curves = [[(row["step"] + 1, row["val/loss"]) for row in run["history"] if "val/loss" in row]
                  for run in model["seeds"].values()]
        steps = [step for step, _ in curves[0]]
        losses = np.array([[loss for _, loss in curve] for curve in curves])
        line, = ax.plot(steps, losses.mean(axis=0), linewidth=1.2, label=name)
        ax.fill_between(steps, losses.min(axis=0), losses.max(axis=0), color=line.get_color(), alpha=0.2)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("validation cross-entropy (nats/token)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    if models:
        ax.legend(fontsize=7, ncol=2)
    save_figure(fig, path)
