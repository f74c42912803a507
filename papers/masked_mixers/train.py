"""Training one network on the tokenized stories through the shared Lightning stack, the way every
language-modelling stage of this paper does it (CLM comparison, autoencoders, bidirectional LM),
and the comparison stages' training settings (`CompareConfig`).

Rows are cut to the models' `n_ctx` and must hold all of it (a masked mixer's conv has exactly
`n_ctx` positions, each with its own weights). After training the validation loss is measured
once more, on the same batches for every model.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import lightning as L
import torch
from torch import nn

from common.config import bounded, check_distinct, seeds_field
from common.data.datamodule import TextDataModule
from common.errors import ConfigError, DataError
from common.io import atomic_file
from common.training.modules import CausalLMModule
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig, run_training

log = logging.getLogger(__name__)
WEIGHTS = "model.pt"


def check_extra_seeds(extra: dict[str, list[int]], models: list[str]) -> None:
    """`extra_seeds`: for models of `models` only, each seed once and a non-negative integer. One
    that `seeds` holds too (a `-S` run with more seeds for every model) is trained once."""
    for name, more in extra.items():
        if name not in models:
            raise ConfigError(f"extra_seeds.{name}: not a model of this section; allowed: {', '.join(models)}")
        check_distinct(more, f"extra_seeds.{name}")
        if min(more, default=0) < 0:
            raise ConfigError(f"extra_seeds.{name}: seeds are non-negative integers; got {more}")


@dataclass
class CompareConfig:
    """How a comparison stage (`compare.py`: clm, autoencoders, bidirectional) trains its models;
    `generation` reads the clm section's to retrain a model exactly as clm did."""

    seeds: list[int] = seeds_field(0, 1, 2)
    workers: int | None = bounded(None, ge=1)  # processes; None: one per core
    models: list[str] = field(default_factory=list)
    # Seeds beyond `seeds` for the named models, where a claim reads more of them (claims.yaml).
    extra_seeds: dict[str, list[int]] = field(default_factory=dict)
    batch_size: int = bounded(16, ge=1)
    optim: OptimConfig = field(default_factory=OptimConfig)
    # A model's learning rate where it is not `optim.lr`: each its best of the rates the `lr_check`
    # stage tried.
    model_lr: dict[str, float] = field(default_factory=dict)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)

    def check(self) -> None:
        if len(self.models) == 1:
            raise ConfigError("models: list a mixer and a transformer to compare, or none ([]) to train nothing at "
                              "this profile")
        check_distinct(self.models, "models", at_least=2 if self.models else 0)
        check_distinct(self.seeds, "seeds")
        check_extra_seeds(self.extra_seeds, self.models)
        if unknown := [name for name in self.model_lr if name not in self.models]:
            raise ConfigError(f"model_lr.{unknown[0]}: not a model of this section; allowed: {', '.join(self.models)}")
        if bad := {name: lr for name, lr in self.model_lr.items() if not lr > 0}:
            raise ConfigError(f"model_lr: learning rates must be positive; got {bad}")
        if self.trainer.max_steps is None or self.trainer.max_time_s is not None:
            raise ConfigError("trainer: runs are compared at equal steps; set max_steps and leave max_time_s unset")

    def seeds_of(self, name: str) -> list[int]:
        return self.seeds + [seed for seed in self.extra_seeds.get(name, []) if seed not in self.seeds]

    def optim_of(self, name: str) -> OptimConfig:
        """The section's optimizer at the model's own rate."""
        return replace(self.optim, lr=self.model_lr.get(name, self.optim.lr))


def train_network(build: Callable[[], nn.Module], *, vocab_size: int, data_dir: Path, n_ctx: int, run_dir: Path,
                  optim: OptimConfig, trainer_cfg: TrainerConfig, batch_size: int, seed: int,
                  shift_labels: bool = True, run_config: dict | None = None,
                  callbacks: Sequence[L.Callback] = ()) -> dict:
    """Train the network `build()` makes (it maps ids to logits) and return its history, step count,
    time and losses. The trained weights are saved as `run_dir/model.pt` for the stages that reuse
    them. The network is built after seeding (`run_training`), so its initial weights depend only
    on `seed`, not on what ran before in the process. `callbacks` go to the Trainer (e.g. one that
    stops the run early: the schedule still follows `trainer_cfg.max_steps`)."""
    datamodule = TextDataModule(data_dir, batch_size=batch_size, seed=seed, n_ctx=n_ctx, full_window=True)
    run = run_training(lambda: CausalLMModule(build(), vocab_size=vocab_size, optim=optim, shift_labels=shift_labels),
                       datamodule, trainer_cfg, run_dir, seed=seed,
                       run_config={"optim": asdict(optim), "batch_size": batch_size, "n_ctx": n_ctx,
                                   "shift_labels": shift_labels, **(run_config or {})}, callbacks=list(callbacks))
    net, metrics = run.module.net, run.metrics
    train_seconds = metrics.state_dict()["elapsed_s"]
    (val,) = run.trainer.validate(run.module, datamodule=datamodule, verbose=False)
    train_losses = [row["train/loss"] for row in metrics.history if "train/loss" in row]
    with atomic_file(run_dir / WEIGHTS, "wb") as handle:  # rank zero's only, under DDP
        torch.save(net.state_dict(), handle)
    return {
        "steps": run.steps,
        "train_seconds": round(train_seconds, 2),
        "seconds_per_step": round(train_seconds / max(1, run.steps), 4),
        # The mean of the last few logged training losses: one batch is too noisy to rank models.
        "train_loss": round(sum(train_losses[-3:]) / max(1, len(train_losses[-3:])), 4) if train_losses else None,
        "val_loss": round(float(val["val/loss"]), 4),
        "n_params": sum(p.numel() for p in net.parameters()),
        "history": metrics.history,
    }


def run_dir_of(root: Path, model: str, seed: int) -> Path:
    """Where a comparison stage trains `model` with `seed`; later stages load its weights there."""
    return root / model / f"seed{seed}"


def load_weights(net: nn.Module, run_dir: Path) -> nn.Module:
    """The weights a comparison stage saved in `run_dir`; missing or foreign ones are a one-line error."""
    path = run_dir / WEIGHTS
    if not path.is_file():
        raise DataError(f"{path}: no trained weights; run the stage that trains this model first")
    try:
        state = torch.load(path, weights_only=True)
        net.load_state_dict(state)
    except Exception as err:  # unpickling and shape errors come in many types; all mean the same here
        raise DataError(f"{path}: not weights of this model ({type(err).__name__}); rerun the stage that "
                        "trained it") from None
    return net.eval()
