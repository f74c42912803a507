"""Train any `LanguageModel` config on a MAD task through the shared Lightning stack, and score it.

    scores = train_on_mad(LMConfig(pattern="attn,swiglu", ...), setting("manticore", "memorization"),
                          TrainerConfig(max_steps=...), run_dir="runs/x")

Scores are those MAD reports: per-position accuracy over scored test positions (what Manticore
tabulates), the class-averaged accuracy mad-lab logs, and the test loss over scored positions.

Compression is not next-token prediction: the whole sequence must be rebuilt from one vector.
For it the config's blocks become the encoder of `MADAutoEncoder`, MAD's autoencoder: encode,
keep the last position (the compression token, which has seen every input under causal mixing),
add a sinusoidal embedding of each output position, decode with a two-layer MLP and unembed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from common.blocks.norms import build_norm
from common.data.mad import IGNORE_INDEX, MADTaskConfig, accuracy, class_averaged_accuracy, sequence_length
from common.data.task_datamodules import MADDataModule
from common.device import compute_device
from common.models.lm import LanguageModel, LMConfig
from common.training.modules import CausalLMModule
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig, TrainingRun, run_training


def lm_backbone(cfg: LMConfig) -> LanguageModel:
    """`LanguageModel` without its vocabulary head: maps ids to final-normed hidden states [B, T, D]."""
    model = LanguageModel(cfg)
    model.head = nn.Identity()  # a tied head shares the embedding's weight, which stays
    return model


def sinusoidal_positions(n: int, d: int) -> torch.Tensor:
    """[n, d]: sin on even channels, cos on odd, wavelengths 2*pi ... 10000*2*pi (Vaswani et al.)."""
    position = torch.arange(n, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    out = torch.zeros(n, d)
    out[:, 0::2] = torch.sin(position * freq)
    out[:, 1::2] = torch.cos(position * freq[: d // 2])
    return out


class MADAutoEncoder(nn.Module):
    """MAD's compression model around any block pattern; output logits [B, T, V] for every input position."""

    def __init__(self, cfg: LMConfig, seq_len: int):
        super().__init__()
        d = cfg.d_model
        self.encoder = lm_backbone(cfg)
        self.register_buffer("positions", sinusoidal_positions(seq_len, d), persistent=False)
        self.decoder = nn.Sequential(build_norm(cfg.norm, d, cfg.norm_eps), nn.Linear(d, d), nn.GELU(),
                                     build_norm(cfg.norm, d, cfg.norm_eps), nn.Linear(d, d), nn.GELU())
        self.unembed = nn.Linear(d, cfg.vocab_size)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        code = self.encoder(input_ids)[:, -1:]  # [B, 1, D]: the compression token's state
        return self.unembed(self.decoder(code + self.positions[: input_ids.shape[1]]))

    def aux_loss(self) -> torch.Tensor | None:
        return self.encoder.aux_loss()


def build_mad_model(lm: LMConfig, task: MADTaskConfig) -> nn.Module:
    """The network for `task`: vocabulary and context set from the task; the autoencoder for compression."""
    lm = replace(lm, vocab_size=task.vocab_size, n_ctx=max(lm.n_ctx, sequence_length(task)))
    if task.task == "compression":
        return MADAutoEncoder(lm, sequence_length(task))
    return LanguageModel(lm)


@torch.no_grad()
def evaluate_mad(net: nn.Module, loader) -> dict[str, float]:
    """MAD scores over every scored position of `loader` (batches of input_ids / labels, unshifted),
    computed on the GPU when there is one; the network is left where it was."""
    was_training, home = net.training, next(net.parameters()).device
    device = compute_device()
    net.eval().to(device)
    preds, targets, loss_sum = [], [], 0.0
    for batch in loader:
        logits, labels = net(batch["input_ids"].to(device)).float(), batch["labels"].to(device)
        loss_sum += F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX,
                                    reduction="sum").item()
        preds.append(logits.argmax(-1).cpu().numpy())  # argmax per batch: all logits can be GBs (vocab 8192)
        targets.append(labels.cpu().numpy())
    net.train(was_training).to(home)
    preds, targets = np.concatenate(preds), np.concatenate(targets)
    scored = int((targets != IGNORE_INDEX).sum())
    return {"accuracy": accuracy(preds, targets), "class_averaged_accuracy": class_averaged_accuracy(preds, targets),
            "loss": loss_sum / scored, "scored_positions": scored}


def train_on_mad(lm: LMConfig, task: MADTaskConfig, trainer: TrainerConfig, run_dir: str | Path,
                 optim: OptimConfig | None = None, batch_size: int = 32, seed: int = 0) -> dict[str, float]:
    """Train on the task's train split, then score the whole test split. A run killed midway
    resumes from its last checkpoint in `run_dir` when called again with the same arguments."""
    def build() -> CausalLMModule:
        return CausalLMModule(build_mad_model(lm, task), vocab_size=task.vocab_size, optim=optim, shift_labels=False,
                              full_window=True)

    scores, _ = train_module_on_mad(build, task, trainer, run_dir, batch_size, seed,
                                    run_config={"lm": asdict(lm), "optim": asdict(optim or OptimConfig())})
    return scores


def train_module_on_mad(build: Callable[[], L.LightningModule], task: MADTaskConfig, trainer: TrainerConfig,
                        run_dir: str | Path, batch_size: int, seed: int, run_config: dict
                        ) -> tuple[dict[str, float], TrainingRun]:
    """`train_on_mad` for a module made by `build` (its `net` maps ids to unshifted logits), e.g. a
    hybrid with its own optimizers; `run_config` names the network for the resume check. Returns
    the scores and the run (its module and metric history)."""
    data = MADDataModule(task, batch_size=batch_size, seed=seed)
    run = run_training(build, data, trainer, run_dir, seed=seed,
                       run_config={**run_config, "task": asdict(task), "batch_size": batch_size})
    return {**evaluate_mad(run.module.net, data.test_dataloader()), "steps": run.steps}, run
