"""`TextDataModule`: batches of tokenized text for causal language modelling.

Its training loader can be resumed exactly: the shuffle order of epoch e is a function of
(seed, e) alone, and the loader's position inside the epoch is saved in every checkpoint, so a
run restarted from a checkpoint sees precisely the batches the killed run had not yet seen.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader, DistributedSampler

from common.config import bounded
from common.data.manifest import manifest_fingerprint
from common.data.tokenized import load_tokenized
from common.errors import DataError


def collate_lm(rows: list[dict]) -> dict[str, torch.Tensor]:
    """Stack rows; labels are the inputs with padding set to -100 (the model shifts them)."""
    input_ids = torch.stack([torch.as_tensor(r["input_ids"], dtype=torch.long) for r in rows])
    mask = torch.stack([torch.as_tensor(r["attention_mask"], dtype=torch.long) for r in rows])
    return {"input_ids": input_ids, "attention_mask": mask, "labels": input_ids.masked_fill(mask == 0, -100)}


class EpochShuffleSampler(DistributedSampler):
    """A permutation of `range(n)` drawn from (seed, epoch); Lightning calls `set_epoch`.

    Process `rank` of `replicas` takes every `replicas`-th index of it, starting at its rank (the
    permutation padded with its own start to a multiple of `replicas`). So at every step the
    processes of a distributed run train together on exactly the rows one process would train on
    with their summed batch size. Lightning wraps any other sampler in a `DistributedSampler` that
    draws a permutation of its own; it leaves a `DistributedSampler` as it is."""

    def __init__(self, n: int, seed: int, rank: int = 0, replicas: int = 1):
        # Not DistributedSampler.__init__, which wants a dataset and a process group: only its type is used.
        self.n, self.seed, self.epoch = n, seed, 0
        self.rank, self.replicas = rank, replicas

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        order = torch.randperm(self.n, generator=generator).tolist()
        if self.replicas == 1:
            return iter(order)
        order += order[:len(self) * self.replicas - self.n]
        return iter(order[self.rank::self.replicas])

    def __len__(self) -> int:
        return -(-self.n // self.replicas)


def training_loader(rows, batch_size: int, seed: int, trainer: L.Trainer | None, **kwargs) -> DataLoader:
    """The resumable, epoch-shuffled training loader of a data module, sharded over the processes of
    `trainer` (the data module's, None outside a fit)."""
    rank, replicas = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
    sampler = EpochShuffleSampler(len(rows), seed, rank, replicas)
    return ResumableDataLoader(rows, batch_size=batch_size, sampler=sampler, **kwargs)


class ResumableDataLoader(DataLoader):
    """A DataLoader that reports how many batches of the current epoch it has handed out.

    Lightning saves `state_dict()` in checkpoints and calls `load_state_dict()` on resume; the next
    epoch iteration then skips the batches already trained on. (A sized loader is not prefetched
    by Lightning, so batches handed out equals batches trained on.) Skipped batches are collated
    and dropped, which costs no model compute and works with any sampler.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._position, self._skip = 0, 0

    def __iter__(self):
        skip, self._skip = self._skip, 0
        self._position = 0
        for batch in super().__iter__():
            self._position += 1
            if self._position > skip:
                yield batch

    def state_dict(self) -> dict:
        return {"batches_yielded": self._position}

    def load_state_dict(self, state: dict) -> None:
        self._skip = state["batches_yielded"]


@dataclass
class LoaderConfig:
    """The `data` block of a training stage's config."""

    batch_size: int = bounded(16, ge=1)  # per device
    num_workers: int = bounded(0, ge=0)
    n_ctx: int | None = bounded(None, ge=2)  # rows cut to their first n_ctx tokens (None: as stored)


class TextDataModule(L.LightningDataModule):
    """Loads a tokenized `DatasetDict` written by the `tokenize` stage; `batch_size` is per device."""

    def __init__(self, data_dir: str | Path, batch_size: int = 32, num_workers: int = 0, seed: int = 0,
                 train_split: str = "train", val_split: str = "validation", n_ctx: int | None = None,
                 full_window: bool = False):
        """`n_ctx` cuts every row to its first `n_ctx` tokens (None: rows as stored). `full_window`
        refuses data whose rows are shorter than `n_ctx`: a model with weights per position (a
        masked mixer's convolution) would leave the positions past the rows untrained."""
        super().__init__()
        if full_window and n_ctx is None:
            raise ValueError("TextDataModule: full_window needs n_ctx")
        self.full_window = full_window
        self.data_dir = Path(data_dir)
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.seed = seed
        self.train_split, self.val_split = train_split, val_split
        self.n_ctx = n_ctx
        self.data = None

    def setup(self, stage: str | None = None) -> None:
        if self.data is None:
            self.data = load_tokenized(self.data_dir, splits=(self.train_split, self.val_split))
        if self.full_window:
            for split in (self.train_split, self.val_split):
                stored = len(self.data[split][0]["input_ids"])
                if stored < self.n_ctx:
                    raise DataError(f"{self.data_dir}: {split} rows hold {stored} tokens, fewer than the model "
                                    f"window n_ctx={self.n_ctx}; tokenize to at least {self.n_ctx} tokens per row "
                                    "or lower n_ctx")

    def fingerprint(self) -> str:
        """The data's identity for resuming: its manifest (a content hash per file) and the cut."""
        return manifest_fingerprint(self.data_dir, extra={"n_ctx": self.n_ctx, "splits": [self.train_split,
                                                                                        self.val_split]})

    def train_dataloader(self) -> DataLoader:
        return training_loader(self.data[self.train_split], self.batch_size, self.seed, self.trainer,
                               **self._loader_kwargs())

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.data[self.val_split], batch_size=self.batch_size, shuffle=False, **self._loader_kwargs())

    def _collate(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        batch = collate_lm(rows)
        return batch if self.n_ctx is None else {k: v[:, :self.n_ctx] for k, v in batch.items()}

    def _loader_kwargs(self) -> dict:
        return {"collate_fn": self._collate, "num_workers": self.num_workers,
                "persistent_workers": self.num_workers > 0}
