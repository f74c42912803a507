"""Train any `LanguageModel` config on a MAD task through the shared Lightning stack, and score it.

    scores = train_on_mad(LMConfig(pattern="attn,swiglu", ...), setting("manticore", "memorization"),
                          TrainerConfig(max_steps=...), run_dir="runs/x")

Scores are those MAD reports: per-position accuracy over scored test positions (what Manticore
tabulates), the class-averaged accuracy mad-lab logs, and the test loss over scored positions.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from common.data.mad import MADTaskConfig, accuracy, class_averaged_accuracy, generate, sequence_length
from common.models.lm import LanguageModel, LMConfig
from common.training.modules import CausalLMModule, token_cross_entropy
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig, build_trainer


def _loader(inputs, targets, batch_size: int, shuffle: bool, seed: int) -> DataLoader:
    data = TensorDataset(torch.as_tensor(inputs, dtype=torch.long), torch.as_tensor(targets, dtype=torch.long))
    generator = torch.Generator().manual_seed(seed) if shuffle else None
    return DataLoader(data, batch_size=batch_size, shuffle=shuffle, generator=generator,
                      collate_fn=lambda rows: {"input_ids": torch.stack([r[0] for r in rows]),
                                               "labels": torch.stack([r[1] for r in rows])})


def train_on_mad(lm: LMConfig, task: MADTaskConfig, trainer: TrainerConfig, run_dir: str | Path,
                 optim: OptimConfig | None = None, batch_size: int = 32, seed: int = 0) -> dict[str, float]:
    """Train on the task's train split, then score the test split. The model's vocabulary and
    context are set from the task."""
    data = generate(task)
    lm = replace(lm, vocab_size=task.vocab_size, n_ctx=max(lm.n_ctx, sequence_length(task)))
    L.seed_everything(seed, verbose=False)
    model = LanguageModel(lm)
    module = CausalLMModule(model, vocab_size=task.vocab_size, optim=optim, shift_labels=False)
    test = _loader(data["test_inputs"], data["test_targets"], batch_size, shuffle=False, seed=seed)
    fit = build_trainer(trainer, run_dir)
    fit.fit(module, train_dataloaders=_loader(data["train_inputs"], data["train_targets"], batch_size, True, seed),
            val_dataloaders=test)
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(batch["input_ids"]) for batch in test])
    targets = torch.as_tensor(data["test_targets"], dtype=torch.long)
    return {
        "accuracy": accuracy(logits, targets),
        "class_averaged_accuracy": class_averaged_accuracy(logits, targets),
        "loss": token_cross_entropy(logits, targets, shift=False).item(),
        "steps": fit.global_step,
    }
