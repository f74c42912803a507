"""AdamW with the usual exclusions from weight decay, and a warmup-then-decay schedule."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from common.config import bounded


@dataclass
class OptimConfig:
    lr: float = bounded(3e-4, gt=0)
    weight_decay: float = bounded(0.1, ge=0)
    beta1: float = bounded(0.9, ge=0, le=1)
    beta2: float = bounded(0.95, ge=0, le=1)
    eps: float = bounded(1e-8, gt=0)
    warmup_steps: int = bounded(100, ge=0)
    schedule: Literal["cosine", "linear", "constant"] = "cosine"
    min_lr_ratio: float = bounded(0.1, ge=0, le=1)


def param_groups(net: nn.Module, weight_decay: float, exclude: Iterable[nn.Parameter] = ()) -> list[dict]:
    """Decay matrices only: norms, biases, embeddings and the parameters a module names in its
    `no_weight_decay` attribute (Mamba's A_log and D, as in mamba-ssm) are left alone.

    Embeddings are found by module type rather than by name, and a weight tied between the
    embedding and the head is seen once, as an embedding. Parameters in `exclude` (for example
    architecture weights that have their own optimizer) are left out.
    """
    no_decay = {id(m.weight) for m in net.modules() if isinstance(m, nn.Embedding)}
    no_decay |= {id(getattr(m, name)) for m in net.modules() for name in getattr(m, "no_weight_decay", ())}
    decay, keep = [], []
    seen = {id(p) for p in exclude}
    for param in net.parameters():
        if not param.requires_grad or id(param) in seen:
            continue
        seen.add(id(param))
        (keep if param.ndim < 2 or id(param) in no_decay else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": keep, "weight_decay": 0.0}]


def lr_factor(step: int, cfg: OptimConfig, total_steps: int) -> float:
    """Multiplier on the peak learning rate at optimizer step `step`."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return 1.0
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps))
    shape = 0.5 * (1 + math.cos(math.pi * progress)) if cfg.schedule == "cosine" else 1 - progress
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * shape


def build_optimizer(net: nn.Module, cfg: OptimConfig, total_steps: int, exclude: Iterable[nn.Parameter] = ()):
    optimizer = torch.optim.AdamW(param_groups(net, cfg.weight_decay, exclude), lr=cfg.lr,
                                  betas=(cfg.beta1, cfg.beta2), eps=cfg.eps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, cfg, total_steps))
    return optimizer, scheduler
