"""Searching Manticore's mixture weights, then retraining with them fixed.

- `ManticoreSearchModule`: single-level DARTS. The network's weights (components, projectors,
  embeddings) have the usual AdamW; the mixture weights have their own optimizer and learning rate:
  AdamW on the logits (`softmax`, and DASH's `gumbel`), or exponentiated gradient on the simplex
  (GAEA). Updates are `alternating` (weights on even batches, mixture weights on odd ones, the
  official code's schedule) or `simultaneous` (both on every batch, from the same gradients). Both
  learning rates follow their schedules per batch, whichever optimizer stepped: the mixture
  weights' rate decays linearly to zero (the paper's appendix E) or stays constant.
  DASH draws one Gumbel sample per forward pass; the official code draws several independent ones
  within a pass, which looks like a bug there, so its DASH numbers are not expected here.
- `snapshot` / `rewind`: keep the pre-search weights and restore them exactly, so that retraining
  starts from the same point as search did, with only the searched alphas carried over.
- `freeze_alphas`: stop training the mixture weights (retraining, fixed-alpha sweeps).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal

import torch

from common.config import bounded
from common.errors import ConfigError
from common.training.modules import CausalLMModule
from common.training.optim import OptimConfig, build_optimizer
from papers.manticore.hybrid import Manticore


class ExponentiatedGradient(torch.optim.Optimizer):
    """Mirror descent on the simplex (GAEA), stepped as the official code steps it:
    a <- a * exp(clip(-lr * grad, -clip, clip)), each row renormalised, then floored at `floor`.
    The floor lets a weight that reached zero regain weight (a pure multiplicative step keeps a zero
    at zero for ever); the clip bounds what one step can do. Flooring after the renormalisation, as
    the official code does, leaves a row's sum up to (components - 1) x `floor` above 1, and keeps a
    weight that a step drove to the floor there (flooring first and renormalising after would lift
    it to a share of the row at once)."""

    def __init__(self, params, lr: float = 0.1, clip: float = 9.0, floor: float = 1e-5):
        super().__init__(params, {"lr": lr, "clip": clip, "floor": floor})

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.mul_(torch.exp((-group["lr"] * p.grad).clamp(-group["clip"], group["clip"])))
                p.div_(p.sum(dim=-1, keepdim=True))
                p.clamp_(min=group["floor"])
        return loss


@dataclass
class SearchConfig:
    arch_lr: float = bounded(0.05, gt=0)
    arch_schedule: Literal["linear", "constant"] = "linear"  # linear: to zero at max_steps, as in the paper
    update: Literal["alternating", "simultaneous"] = "alternating"
    gradient_clip_val: float | None = bounded(1.0, gt=0)


class ManticoreSearchModule(CausalLMModule):
    """Causal-LM (or MAD, with `shift_labels=False`) training of a `Manticore` with a second
    optimizer for its mixture weights. Uses manual optimization: give its Trainer
    `gradient_clip_val=None` (clipping is done here, on the weights only)."""

    def __init__(self, net: Manticore, vocab_size: int, optim: OptimConfig | None = None,
                 search: SearchConfig | None = None, shift_labels: bool = True):
        super().__init__(net, vocab_size, optim, shift_labels)
        if not net.arch_parameters():
            raise ConfigError("search: the hybrid's mixture weights are fixed; "
                              "use alpha_mode softmax, gumbel or simplex")
        self.search = search or SearchConfig()
        self.automatic_optimization = False

    def configure_optimizers(self):
        arch = self.net.arch_parameters()
        weights, scheduler = build_optimizer(self.net, self.optim, self.trainer.max_steps, exclude=arch)
        if self.net.cfg.alpha_mode == "simplex":
            arch_opt = ExponentiatedGradient(arch, lr=self.search.arch_lr)
        else:
            arch_opt = torch.optim.AdamW(arch, lr=self.search.arch_lr, betas=(0.9, 0.999), weight_decay=0.0)
        return [weights, arch_opt], [scheduler]

    def arch_lr_at(self, batch: int) -> float:
        """The mixture weights' learning rate at training batch `batch` (counted from 0)."""
        if self.search.arch_schedule == "constant":
            return self.search.arch_lr
        return self.search.arch_lr * max(0.0, 1.0 - batch / self.trainer.max_steps)

    def training_step(self, batch, batch_idx):
        weights_opt, arch_opt = self.optimizers()
        step = self.trainer.global_step  # batches trained so far: one optimizer step per batch
        loss = super().training_step(batch, batch_idx)
        update_weights = self.search.update == "simultaneous" or step % 2 == 0
        update_arch = self.search.update == "simultaneous" or step % 2 == 1
        weights_opt.zero_grad()
        arch_opt.zero_grad()
        self.manual_backward(loss)
        if update_weights:
            if self.search.gradient_clip_val is not None:
                self.clip_gradients(weights_opt, gradient_clip_val=self.search.gradient_clip_val,
                                    gradient_clip_algorithm="norm")
            weights_opt.step()
        if update_arch:
            for group in arch_opt.param_groups:
                group["lr"] = self.arch_lr_at(step)
            # Lightning counts every optimizer step as a global step; one step per batch keeps
            # `max_steps` meaning batches in both modes, so the second step of a simultaneous
            # update goes to the wrapped optimizer directly.
            (arch_opt.optimizer if update_weights else arch_opt).step()
        # Per batch, as the official code's schedule runs, so that alternating updates see the
        # same learning rates at a given batch as simultaneous ones.
        self.lr_schedulers().step()
        self.log("train/arch_lr", arch_opt.param_groups[0]["lr"])
        # The softmax (or simplex) weights, not a Gumbel sample: the search trajectory.
        for i, row in enumerate(self.net.mixture_weights(sample=False).detach()):
            for m, value in enumerate(row):
                self.log(f"train/alpha_{i}_{m}", value)
        return loss


def alpha_trajectory(history: list[dict], n_blocks: int, n_components: int) -> list[list[list[float]]]:
    """The logged `train/alpha_{i}_{m}` of a search's metric history, one `[L, M]` point per row."""
    keys = [[f"train/alpha_{i}_{m}" for m in range(n_components)] for i in range(n_blocks)]
    return [[[row[k] for k in block] for block in keys] for row in history if keys[0][0] in row]


def snapshot(net: Manticore) -> dict[str, torch.Tensor]:
    """A copy of every weight except the mixture weights."""
    return {k: v.detach().clone() for k, v in net.state_dict().items() if k != "alphas"}


def rewind(net: Manticore, state: dict[str, torch.Tensor]) -> None:
    """Restore `snapshot`'s weights in place, keeping the current mixture weights."""
    current = net.state_dict()
    missing = sorted(set(current) - set(state) - {"alphas"})
    if missing:
        raise ValueError(f"snapshot lacks {missing[:4]}")
    net.load_state_dict({**copy.copy(state), "alphas": current["alphas"]})


def freeze_alphas(net: Manticore) -> None:
    for p in net.arch_parameters():
        p.requires_grad_(False)
