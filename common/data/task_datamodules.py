"""DataModules for the synthetic task suites: MAD (token targets) and Long Range Arena (one label per
sequence). Both generate their data in `setup` from their task config, so a DataModule is all a
Lightning run needs; the training loader is the resumable, epoch-seeded one of `TextDataModule` (`training_loader`).

Batches:
  MADDataModule  {"input_ids": [B, T], "labels": [B, T]} with -100 on unscored positions; the
                 validation and test loaders both serve MAD's test split (as mad-lab does).
  LRADataModule  {"input_ids": [B, T], "attention_mask": [B, T], "label": [B]}, right-padded,
                 as `SequenceClassificationModule` expects.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from common.data.datamodule import training_loader
from common.data.lra import LRATaskConfig, load_splits, lra_splits
from common.data.mad import MADTaskConfig, generate
from common.data.manifest import config_fingerprint, manifest_fingerprint


class ArrayRows(Dataset):
    """Row i of every array, as a dict of the given names."""

    def __init__(self, **arrays: np.ndarray):
        self.arrays = arrays
        self.n = len(next(iter(arrays.values())))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        return {name: a[i] for name, a in self.arrays.items()}


def collate_arrays(rows: list[dict]) -> dict[str, torch.Tensor]:
    """Stack rows; integer arrays become int64 (embedding ids, labels), booleans stay boolean."""
    out = {}
    for name in rows[0]:
        stacked = torch.as_tensor(np.stack([r[name] for r in rows]))
        out[name] = stacked if stacked.dtype == torch.bool else stacked.long()
    return out


class _ArrayDataModule(L.LightningDataModule):
    def __init__(self, batch_size: int, seed: int, num_workers: int):
        super().__init__()
        self.batch_size, self.seed, self.num_workers = batch_size, seed, num_workers
        self.train: ArrayRows | None = None
        self.val: ArrayRows | None = None

    def train_dataloader(self) -> DataLoader:
        return training_loader(self.train, self.batch_size, self.seed, self.trainer, **self._kwargs())

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val, batch_size=self.batch_size, shuffle=False, **self._kwargs())

    def test_dataloader(self) -> DataLoader:
        return self.val_dataloader()

    def _kwargs(self) -> dict:
        return {"collate_fn": collate_arrays, "num_workers": self.num_workers,
                "persistent_workers": self.num_workers > 0}


class MADDataModule(_ArrayDataModule):
    """One MAD task: `generate(task)` once; train on its train split, validate and test on its test split."""

    def __init__(self, task: MADTaskConfig, batch_size: int = 32, seed: int = 0, num_workers: int = 0):
        super().__init__(batch_size, seed, num_workers)
        self.task = task
        self.data: dict | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.data is None:
            self.data = generate(self.task)
            self.train = ArrayRows(input_ids=self.data["train_inputs"], labels=self.data["train_targets"])
            self.val = ArrayRows(input_ids=self.data["test_inputs"], labels=self.data["test_targets"])

    def fingerprint(self) -> str:
        """The task config: the data are generated from it, seed included."""
        return config_fingerprint(asdict(self.task))


class LRADataModule(_ArrayDataModule):
    """One LRA task (ListOps, Pathfinder, IMDb or CIFAR-10); see `common/data/lra.py`. Built from
    `task` in `setup`, or read from `data_dir` (written by the `lra_generate` stage) when given."""

    def __init__(self, task: LRATaskConfig, batch_size: int = 32, seed: int = 0, num_workers: int = 0,
                 data_dir: str | Path | None = None):
        super().__init__(batch_size, seed, num_workers)
        self.task = task
        self.data_dir = data_dir
        self.splits: dict | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.splits is None:
            self.splits = lra_splits(self.task) if self.data_dir is None else load_splits(self.data_dir, self.task)
            self.train = ArrayRows(**self.splits["train"])
            self.val = ArrayRows(**self.splits["validation"])

    def fingerprint(self) -> str:
        """The stored data's manifest, or the task config the data are generated from."""
        if self.data_dir is None:
            return config_fingerprint(asdict(self.task))
        return manifest_fingerprint(self.data_dir, extra=asdict(self.task))
