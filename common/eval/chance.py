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


def scored_unigram_loss(train, val, vocab_size: int) -> float:
    """`unigram_loss` of padded tokenized rows (`input_ids`, `attention_mask`), scored on the labels a
    causal LM is scored on: every non-padding validation token but a row's first."""
    def tokens(rows, first: int) -> list[list[int]]:
        return [r["input_ids"][first:sum(r["attention_mask"])] for r in rows]

    return unigram_loss(tokens(train, 0), tokens(val, 1), vocab_size)
