"""Tokenized corpora as Arrow data sets, in the two layouts the papers use.

- `padded`: one document per row, cut or right-padded to `n_ctx`. The masked mixer needs it: its
  token-mixing convolution has exactly `n_ctx` channels, so every row must be that long.
- `packed`: documents joined end to end and cut into `n_ctx` blocks; the remainder is dropped.

Each document is followed by `</s>`, which the model learns to predict. Rows carry an
`attention_mask` that is 1 on real tokens and 0 on padding; the collator turns padding into label
-100 so it never enters the loss (pad and `</s>` share an id, so the mask, not the id, decides).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

import datasets
import numpy as np

from common.data.manifest import load_dataset_dir


def tokenize_padded(texts: datasets.Dataset, tokenizer, n_ctx: int, num_proc: int | None = None) -> datasets.Dataset:
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id

    def encode(batch):
        ids = tokenizer(batch["text"], add_special_tokens=False)["input_ids"]
        rows, masks = [], []
        for doc in ids:
            doc = (doc + [eos])[:n_ctx]
            rows.append(doc + [pad] * (n_ctx - len(doc)))
            masks.append([1] * len(doc) + [0] * (n_ctx - len(doc)))
        return {"input_ids": rows, "attention_mask": masks}

    # keep_in_memory: otherwise `map` writes cache files next to the input's Arrow files, which
    # would modify another stage's output (and its DVC hash).
    return texts.map(encode, batched=True, remove_columns=texts.column_names, num_proc=num_proc,
                     features=_features(), keep_in_memory=True, desc=f"tokenize (padded, n_ctx={n_ctx})")


def tokenize_packed(texts: datasets.Dataset | Iterable[str], tokenizer, n_ctx: int,
                    max_tokens: int | None = None) -> datasets.Dataset:
    """`texts` (a data set with a `text` column, or any iterable of strings, a stream included)
    packed into `n_ctx` blocks. With `max_tokens`, reading stops once that many tokens are in."""
    eos = tokenizer.eos_token_id
    stream: list[int] = []
    for batch in _text_batches(texts, 1000):
        for doc in tokenizer(batch, add_special_tokens=False)["input_ids"]:
            stream.extend(doc)
            stream.append(eos)
        if max_tokens is not None and len(stream) >= max_tokens:
            stream = stream[:max_tokens]
            break
    n_blocks = len(stream) // n_ctx
    blocks = np.asarray(stream[: n_blocks * n_ctx], dtype=np.int32).reshape(n_blocks, n_ctx)
    return datasets.Dataset.from_dict(
        {"input_ids": blocks, "attention_mask": np.ones_like(blocks, dtype=np.int8)}, features=_features()
    )


def _text_batches(texts: datasets.Dataset | Iterable[str], size: int) -> Iterator[list[str]]:
    if isinstance(texts, datasets.Dataset):
        for start in range(0, len(texts), size):
            yield texts[start:start + size]["text"]
        return
    stream = iter(texts)
    while batch := list(islice(stream, size)):
        yield batch


def _features() -> datasets.Features:
    return datasets.Features({
        "input_ids": datasets.Sequence(datasets.Value("int32")),
        "attention_mask": datasets.Sequence(datasets.Value("int8")),
    })


def load_tokenized(path: str | Path, splits: tuple[str, ...] = ("train", "validation")) -> datasets.DatasetDict:
    """Load a tokenized `DatasetDict`, verifying it against its manifest first."""
    return load_dataset_dir(path, splits=splits, columns=("input_ids",), hint="rebuild it with `dvc repro tokenize`")
