"""Train any `LanguageModel` config as a sequence classifier on a Long Range Arena task.

    scores = train_on_lra(LMConfig(pattern="mamba", repeat=2, d_model=64),
                          LRATaskConfig(task="listops", min_len=20, max_len=100),
                          TrainerConfig(max_steps=...), run_dir="runs/x")

The blocks (without the vocabulary head) feed `SequenceClassificationModule`, which pools the last
real position (the causal models here see the whole sequence only there) or the mean.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from common.data.lra import LRATaskConfig, num_classes, vocab_size
from common.data.task_datamodules import LRADataModule
from common.device import compute_device
from common.models.lm import LMConfig
from common.training.mad import lm_backbone
from common.training.modules import SequenceClassificationModule
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig, run_training


@torch.no_grad()
def evaluate_classifier(module: SequenceClassificationModule, loader) -> dict[str, float]:
    """Accuracy and mean loss over every batch of `loader`, and the majority-class rate (chance),
    computed on the GPU when there is one; the module is left where it was."""
    was_training, home = module.training, next(module.parameters()).device
    device = compute_device()
    module.eval().to(device)
    correct, loss_sum, labels = 0, 0.0, []
    for batch in loader:
        label = batch["label"].to(device)
        logits = module(batch["input_ids"].to(device), batch["attention_mask"].to(device)).float()
        loss_sum += F.cross_entropy(logits, label, reduction="sum").item()
        correct += int((logits.argmax(-1) == label).sum())
        labels.append(label.cpu().numpy())
    module.train(was_training).to(home)
    labels = np.concatenate(labels)
    return {"accuracy": correct / len(labels), "loss": loss_sum / len(labels),
            "majority_rate": float(np.bincount(labels).max() / len(labels)), "n": len(labels)}


def train_on_lra(lm: LMConfig, task: LRATaskConfig, trainer: TrainerConfig, run_dir: str | Path,
                 optim: OptimConfig | None = None, batch_size: int = 32, seed: int = 0,
                 pooling: Literal["last", "mean"] = "last") -> dict[str, float]:
    """Train on the task's train split, then score the whole validation split."""
    data = LRADataModule(task, batch_size=batch_size, seed=seed)
    data.setup()
    longest = max(split["input_ids"].shape[1] for split in data.splits.values())
    lm = replace(lm, vocab_size=vocab_size(task), n_ctx=max(lm.n_ctx, longest))
    optim = optim or OptimConfig()
    run = run_training(
        lambda: SequenceClassificationModule(lm_backbone(lm), lm.d_model, num_classes(task), pooling=pooling,
                                             optim=optim),
        data, trainer, run_dir, seed=seed,
        run_config={"lm": asdict(lm), "task": asdict(task), "optim": asdict(optim), "batch_size": batch_size,
                    "pooling": pooling})
    return {**evaluate_classifier(run.module, data.val_dataloader()), "steps": run.steps}
