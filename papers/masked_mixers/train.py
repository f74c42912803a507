"""Training one network on the tokenized stories through the shared Lightning stack, the way every
language-modelling stage of this paper does it (CLM comparison, autoencoders, bidirectional LM).

Rows are cut to the models' `n_ctx` (a masked mixer's conv has exactly `n_ctx` positions). A run
stops at `trainer.max_steps` or, with `trainer.max_time_s`, when its wall-clock budget is spent;
afterwards the validation loss is measured once more on the same batches for every model, so runs
that stopped between validations are still compared on equal terms.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path

import lightning as L
import torch
from torch import nn

from common.data.datamodule import TextDataModule
from common.training.callbacks import MetricsJSON
from common.training.modules import CausalLMModule
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig, build_trainer, fit

log = logging.getLogger(__name__)
WEIGHTS = "model.pt"


def train_network(net: nn.Module, *, vocab_size: int, data_dir: Path, n_ctx: int, run_dir: Path,
                  optim: OptimConfig, trainer_cfg: TrainerConfig, batch_size: int, seed: int,
                  shift_labels: bool = True, run_config: dict | None = None) -> dict:
    """Train `net` (maps ids to logits) and return its history, step count, time and losses.
    The trained weights are saved as `run_dir/model.pt` for the stages that reuse them."""
    L.seed_everything(seed, workers=True, verbose=False)
    module = CausalLMModule(net, vocab_size=vocab_size, optim=optim, shift_labels=shift_labels)
    datamodule = TextDataModule(data_dir, batch_size=batch_size, seed=seed, n_ctx=n_ctx)
    metrics = MetricsJSON(run_dir / "metrics.json")
    trainer = build_trainer(trainer_cfg, run_dir, callbacks=[metrics])
    config = {"optim": asdict(optim), "trainer": asdict(trainer_cfg), "batch_size": batch_size, "seed": seed,
              "n_ctx": n_ctx, "shift_labels": shift_labels, **(run_config or {})}
    fit(trainer, module, datamodule, run_dir, run_config=config)
    train_seconds = metrics.state_dict()["elapsed_s"]
    (val,) = trainer.validate(module, datamodule=datamodule, verbose=False)
    train_losses = [row["train/loss"] for row in metrics.history if "train/loss" in row]
    torch.save(net.state_dict(), run_dir / WEIGHTS)
    return {
        "steps": trainer.global_step,
        "train_seconds": round(train_seconds, 2),
        "seconds_per_step": round(train_seconds / max(1, trainer.global_step), 4),
        # The mean of the last few logged training losses: one batch is too noisy to rank models.
        "train_loss": round(sum(train_losses[-3:]) / max(1, len(train_losses[-3:])), 4) if train_losses else None,
        "val_loss": round(float(val["val/loss"]), 4),
        "n_params": sum(p.numel() for p in net.parameters()),
        "history": metrics.history,
    }


def load_weights(net: nn.Module, run_dir: Path) -> nn.Module:
    net.load_state_dict(torch.load(run_dir / WEIGHTS, weights_only=True))
    return net.eval()
