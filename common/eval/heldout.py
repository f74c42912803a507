"""A causal language model's loss on held-out rows, outside any training run."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from common.data.datamodule import collate_lm
from common.device import compute_device
from common.training.modules import IGNORE_INDEX, _unwrap, align


@torch.no_grad()
def heldout_loss(net: nn.Module, rows, batch_size: int = 16, n_ctx: int | None = None,
                 max_rows: int | None = None) -> float:
    """Mean next-token cross-entropy (nats) over every non-padding label of `rows` (a tokenized
    split: `input_ids` and `attention_mask`), token-weighted across batches so the result does not
    depend on `batch_size`. `n_ctx` cuts rows to their first tokens; `max_rows` reads only the first rows.
    Computed on the GPU when there is one (a network comes back from Lightning's `fit` on the CPU),
    and the network is left where it was."""
    n = len(rows) if max_rows is None else min(max_rows, len(rows))
    if n == 0:
        raise ValueError("heldout_loss: no rows")
    was_training, home = net.training, next(net.parameters()).device
    device = compute_device()
    net.eval().to(device)
    total, count = 0.0, 0
    for start in range(0, n, batch_size):
        batch = collate_lm([rows[i] for i in range(start, min(start + batch_size, n))])
        input_ids, labels = batch["input_ids"][:, :n_ctx].to(device), batch["labels"][:, :n_ctx].to(device)
        logits, labels = align(_unwrap(net(input_ids)), labels)
        total += F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX,
                                 reduction="sum").item()
        count += int((labels != IGNORE_INDEX).sum())
    net.train(was_training).to(home)
    return total / count
