"""Chance levels for language-model losses."""

from __future__ import annotations

import numpy as np


def unigram_loss(train_rows, val_rows, vocab_size: int) -> float:
    """Cross-entropy (nats/token) of the validation tokens under the training tokens' unigram
    frequencies (add-one smoothed): the loss of a model that ignores context."""
    counts = np.bincount(np.concatenate([np.asarray(r, dtype=np.int64) for r in train_rows]),
                         minlength=vocab_size).astype(np.float64) + 1.0
    log_p = np.log(counts / counts.sum())
    val = np.concatenate([np.asarray(r, dtype=np.int64) for r in val_rows])
    return float(-log_p[val].mean())
