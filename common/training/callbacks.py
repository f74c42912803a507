"""Callbacks every training stage uses: metrics to JSON, a wall-clock budget, a NaN guard."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import lightning as L
import torch

from common.errors import TrainingDiverged
from common.io import write_json


def _scalars(metrics: dict) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float, torch.Tensor)) and
            (not isinstance(v, torch.Tensor) or v.numel() == 1)}


class MetricsJSON(L.Callback):
    """Keeps the metric history and writes final and best metrics to a JSON file DVC tracks.

    The file holds `final` (the last value of every logged metric), `best` (the metrics at the
    validation with the best `monitor`), `history` (one row per logging step and per validation,
    with the step and the training seconds so far), `timing`, `world_size`, and whatever `extra`
    the stage adds. Only rank zero writes. The history and best row travel inside checkpoints, so
    a resumed run reports its whole curve. Everything except `timing` and the `elapsed_s` column
    is deterministic for a fixed seed on CPU.
    """

    def __init__(self, path: str | Path, monitor: str = "val/loss", mode: str = "min", extra: dict | None = None):
        self.path = Path(path)
        self.monitor, self.mode = monitor, mode
        self.extra = dict(extra or {})
        self.history: list[dict[str, float]] = []
        self.best: dict[str, float] = {}
        self._elapsed_before = 0.0  # seconds trained by earlier processes of a resumed run
        self._start = time.monotonic()

    def state_dict(self) -> dict:
        return {"history": self.history, "best": self.best, "elapsed_s": self._elapsed()}

    def load_state_dict(self, state: dict) -> None:
        self.history, self.best = state["history"], state["best"]
        self._elapsed_before = state["elapsed_s"]

    def on_fit_start(self, trainer, pl_module):
        self._start = time.monotonic()

    def _elapsed(self) -> float:
        if self._start is None:  # restored from a finished run: its own training time
            return self._elapsed_before
        return round(self._elapsed_before + time.monotonic() - self._start, 3)

    def restore(self) -> bool:
        """Take the history, best row and training time of the finished run whose file this is,
        keeping this stage's `extra` (rewritten if it differs); False if the file cannot be read."""
        try:
            saved = json.loads(self.path.read_text())
            self.history, self.best = saved["history"], saved["best"]
            self._elapsed_before, self._start = saved["timing"]["train_seconds"], None
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
            return False
        if {k: saved.get(k) for k in self.extra} != self.extra:
            write_json(self.path, {**saved, **self.extra})
        return True

    def _row(self, trainer, prefix: str) -> dict[str, float]:
        row = {k: v for k, v in _scalars(trainer.callback_metrics).items() if k.startswith(prefix)}
        row.update(step=trainer.global_step, elapsed_s=self._elapsed())
        return row

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        if step % trainer.log_every_n_steps == 0 and (not self.history or self.history[-1]["step"] != step):
            self.history.append(self._row(trainer, "train/"))

    def on_validation_end(self, trainer, pl_module):
        if trainer.sanity_checking:
            return
        row = self._row(trainer, "val/")
        self.history.append(row)
        value = row.get(self.monitor)
        if value is not None and (not self.best or self._better(value, self.best[self.monitor])):
            self.best = {k: v for k, v in row.items() if k != "elapsed_s"}

    def _better(self, a: float, b: float) -> bool:
        return a < b if self.mode == "min" else a > b

    def on_fit_end(self, trainer, pl_module):
        if not trainer.is_global_zero:
            return
        final = _scalars(trainer.callback_metrics)
        final["step"] = trainer.global_step
        write_json(self.path, {
            **self.extra,
            "final": final,
            "best": self.best,
            "history": self.history,
            "world_size": trainer.world_size,
            "timing": {"train_seconds": self._elapsed()},
        })


class WallClockBudget(L.Callback):
    """Stops training once `seconds` of wall time have passed since this process began fitting.

    Fixed-compute comparisons give every model the same budget. Ranks agree on stopping so that
    DDP processes never wait on one another. A resumed run gets a fresh budget.
    """

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._start = None

    def on_train_start(self, trainer, pl_module):
        self._start = time.monotonic()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        over = time.monotonic() - self._start >= self.seconds
        if trainer.strategy.reduce_boolean_decision(over, all=False):
            trainer.should_stop = True


class NonFiniteLossGuard(L.Callback):
    """Stops with a clear message the first time the training loss is NaN or infinite."""

    # Checked before backward, so the optimizer never applies a NaN update to the weights.
    def on_before_backward(self, trainer, pl_module, loss):
        value = float(loss.detach())
        if not math.isfinite(value):
            raise TrainingDiverged(
                f"train/loss became {value} at step {trainer.global_step}; "
                "lower optim.lr, raise optim.warmup_steps or set trainer.gradient_clip_val"
            )
