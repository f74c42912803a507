"""LightningModules. Each is handed its network; it owns the loss, metrics and optimizer only."""

from __future__ import annotations

from typing import Literal

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from common.errors import DataError
from common.training.optim import OptimConfig, build_optimizer

IGNORE_INDEX = -100


def _unwrap(output) -> torch.Tensor:
    """Accept a tensor or a Hugging Face output object."""
    for name in ("logits", "last_hidden_state"):
        if hasattr(output, name):
            return getattr(output, name)
    return output[0] if isinstance(output, tuple) else output


def align(logits: torch.Tensor, labels: torch.Tensor, shift: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """With `shift`, position t predicts label t + 1: drop the last output and the first label."""
    return (logits[:, :-1], labels[:, 1:]) if shift else (logits, labels)


def token_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, shift: bool = True) -> torch.Tensor:
    """Mean cross-entropy over positions whose label is not -100."""
    logits, labels = align(logits, labels, shift)
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX)


def check_batch_fits(net: nn.Module, input_ids: torch.Tensor, vocab_size: int, full_window: bool) -> None:
    """Refuse data the network was not built for, in one line, before a step trains on it: token ids
    outside the vocabulary (data tokenized with another tokenizer; on a GPU, an opaque device-side
    assert), and, with `full_window`, rows shorter than the window of a network with weights per
    position (a network trained from scratch would never train those positions; a pretrained one
    fine-tuned on shorter rows keeps them as they were, which is fine)."""
    low, high = int(input_ids.min()), int(input_ids.max())
    if low < 0 or high >= vocab_size:
        raise DataError(f"the data holds token ids {low}..{high}, but the model's vocabulary has {vocab_size} "
                        f"(ids 0..{vocab_size - 1}): tokenize with the tokenizer the model was built for")
    if full_window and getattr(net, "position_weights", False) and input_ids.shape[1] < (window := net.cfg.n_ctx):
        raise DataError(f"rows of {input_ids.shape[1]} tokens are shorter than the model's window n_ctx={window}, "
                        "and the model has weights per position that would never train: tokenize rows of "
                        f"{window} tokens, or build the model with n_ctx={input_ids.shape[1]}")


class CausalLMModule(L.LightningModule):
    """Causal language modelling for any network that maps `input_ids` to logits `[B, T, V]`.

    `shift_labels=False` is for tasks whose targets are already aligned with the outputs (MAD:
    `targets[t]` is what position t must predict); the default shifts inputs into targets. The
    first batch of each process is checked against the network (`check_batch_fits`); give
    `full_window=True` when the network trains from scratch.
    """

    def __init__(self, net: nn.Module, vocab_size: int, optim: OptimConfig | None = None, shift_labels: bool = True,
                 full_window: bool = False):
        super().__init__()
        self.net = net
        self.optim = optim or OptimConfig()
        self.shift_labels = shift_labels
        self.save_hyperparameters({"vocab_size": vocab_size, "optim": vars(self.optim), "shift_labels": shift_labels})
        self.train_acc = MulticlassAccuracy(vocab_size, average="micro", ignore_index=IGNORE_INDEX)
        self.val_acc = MulticlassAccuracy(vocab_size, average="micro", ignore_index=IGNORE_INDEX)
        # Token-weighted mean of the loss; perplexity is its exponential, so both agree exactly.
        self.val_loss = MeanMetric()
        self.vocab_size, self.full_window = vocab_size, full_window
        self.batch_checked = False

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return _unwrap(self.net(input_ids))

    def _step(self, batch):
        """(loss, logits, targets), the logits aligned with the targets; a subclass with another loss
        (a classifier's) overrides this and keeps the contract."""
        if not self.batch_checked:
            check_batch_fits(self.net, batch["input_ids"], self.vocab_size, self.full_window)
            self.batch_checked = True
        logits, labels = self(batch["input_ids"]), batch["labels"]
        loss = token_cross_entropy(logits, labels, self.shift_labels)
        return (loss, *align(logits, labels, self.shift_labels))

    def _step_is_recorded(self) -> bool:
        """Whether this step's metrics reach a log or the history (`MetricsJSON` records the steps
        that end on a multiple of `log_every_n_steps`, and the final metrics hold the last step's)."""
        trainer, step = self.trainer, self.trainer.global_step + 1
        return step % max(trainer.log_every_n_steps, 1) == 0 or step == trainer.max_steps

    def training_step(self, batch, batch_idx):
        loss, logits, targets = self._step(batch)
        # Under DDP each process holds a share of the batch: the logged loss and accuracy are the
        # global batch's (the mean over processes of equal shares; the accuracy from summed counts),
        # as one process training on the whole batch would log them.
        self.log("train/loss", loss, prog_bar=True, sync_dist=True)
        # The argmax over [B, T, vocabulary] costs a third of a small model's step; only the steps
        # that record the accuracy pay for it, so every recorded value is what it was.
        if self._step_is_recorded():
            self.train_acc.update(logits.argmax(-1), targets)
            self.log("train/acc", self.train_acc.compute())  # compute() sums the counts over processes
            self.train_acc.reset()
        optimizers = self.optimizers()
        first = optimizers[0] if isinstance(optimizers, list) else optimizers  # modules with several optimizers
        self.log("train/lr", first.param_groups[0]["lr"])
        # Networks with routed experts expose their load-balancing loss; it joins the objective
        # but not the reported language-modelling loss.
        aux = self.net.aux_loss() if hasattr(self.net, "aux_loss") else None
        if aux is not None:
            self.log("train/aux_loss", aux, sync_dist=True)
            loss = loss + aux
        return loss

    def validation_step(self, batch, batch_idx):
        loss, logits, targets = self._step(batch)
        self.val_acc(logits.argmax(-1), targets)
        self.val_loss.update(loss, weight=(targets != IGNORE_INDEX).sum())
        self.log("val/acc", self.val_acc)

    def on_validation_epoch_end(self):
        # Already over every process's batches (the metric sums its state over processes), so not
        # averaged again: a mean of equal values over 3 processes need not give the value back.
        loss = self.val_loss.compute()
        self.val_loss.reset()
        self.log("val/loss", loss, prog_bar=True, sync_dist=False)
        self.log("val/ppl", loss.exp())

    def configure_optimizers(self):
        optimizer, scheduler = build_optimizer(self.net, self.optim, self.trainer.max_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class SequenceClassificationModule(L.LightningModule):
    """Classification from a network's hidden states `[B, T, D]`, pooled then projected.

    `pooling="last"` takes the last non-padding position (right padding, given by
    `attention_mask`); `"mean"` averages the non-padding positions.
    """

    def __init__(self, net: nn.Module, d_model: int, num_classes: int,
                 pooling: Literal["last", "mean"] = "last", optim: OptimConfig | None = None):
        super().__init__()
        if pooling not in ("last", "mean"):
            raise ValueError(f"pooling must be 'last' or 'mean', got {pooling!r}")
        self.net = net
        self.head = nn.Linear(d_model, num_classes)
        self.pooling = pooling
        self.optim = optim or OptimConfig()
        self.save_hyperparameters({"d_model": d_model, "num_classes": num_classes, "pooling": pooling,
                                   "optim": vars(self.optim)})
        self.train_acc = MulticlassAccuracy(num_classes, average="micro")
        self.val_acc = MulticlassAccuracy(num_classes, average="micro")

    def pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        mask = mask.to(hidden.dtype)
        if self.pooling == "mean":
            return (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp_min(1)
        last = (mask.sum(1).long() - 1).clamp_min(0)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        hidden = _unwrap(self.net(input_ids))
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape, device=input_ids.device)
        return self.head(self.pool(hidden, attention_mask))

    def _step(self, batch):
        logits = self(batch["input_ids"], batch.get("attention_mask"))
        return F.cross_entropy(logits.float(), batch["label"]), logits.argmax(-1)

    def training_step(self, batch, batch_idx):
        loss, preds = self._step(batch)
        self.train_acc.update(preds, batch["label"])
        self.log("train/loss", loss, prog_bar=True, sync_dist=True)  # as CausalLMModule logs them
        self.log("train/acc", self.train_acc.compute())
        self.train_acc.reset()
        return loss

    def validation_step(self, batch, batch_idx):
        loss, preds = self._step(batch)
        self.val_acc(preds, batch["label"])
        self.log("val/loss", loss, prog_bar=True, sync_dist=True)
        self.log("val/acc", self.val_acc, prog_bar=True)

    def configure_optimizers(self):
        modules = nn.ModuleDict({"net": self.net, "head": self.head})
        optimizer, scheduler = build_optimizer(modules, self.optim, self.trainer.max_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
