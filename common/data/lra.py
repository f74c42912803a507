"""Long Range Arena tasks as padded id arrays for sequence classification.

    splits = lra_splits(LRATaskConfig(task="listops", n_train=2000, n_val=500, min_len=20, max_len=100))
    splits["train"]["input_ids"]  # int32 [n, n_ctx], right-padded with 0
    splits["train"]["attention_mask"], splits["train"]["label"]

Tasks, vocabularies and sources:

  listops     generated (`common/data/listops.py`), 18 ids (0 = <pad>), <eos> appended, 10 classes;
              train and validation come from one generator stream, so they never share an
              expression (the generator drops duplicates).
  pathfinder  generated (`common/data/pathfinder.py`, our own generator, not the LRA release),
              pixels 0-255 row by row (N * N ids), 2 classes; train and validation use seeds
              `seed` and `seed + 1`.
  imdb        Hugging Face Hub (`paper` profile), bytes + 1 (0 = pad), vocabulary 129, 2 classes;
              validation is the Hub's `test` split.
  cifar10     Hugging Face Hub (`paper` profile), grayscale pixels, vocabulary 256, 10 classes;
              validation is the Hub's `test` split.

Every row is right-padded with id 0 to the longest row of the task (for pixel tasks 0 is also
black, so the mask, not the id, tells padding apart; image rows are never padded).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from common.config import bounded, seed_field
from common.data import listops, pathfinder
from common.data.hub import HUB_CLASSIFICATION_SOURCES, load_hub_classification, local_files
from common.data.manifest import verify_manifest, write_manifest
from common.errors import ConfigError, DataError
from common.io import atomic_dir

LRA_TASKS = ("listops", "pathfinder", "imdb", "cifar10")


@dataclass
class LRATaskConfig:
    task: Literal["listops", "pathfinder", "imdb", "cifar10"] = "listops"
    n_train: int = bounded(2000, ge=1)
    n_val: int = bounded(500, ge=1)
    seed: int = seed_field()
    # listops: length band in tokens (LRA: 500-2000), tree depth and arguments per operator
    min_len: int = bounded(listops.PAPER_MIN_LEN, ge=1)
    max_len: int = bounded(listops.PAPER_MAX_LEN, ge=1)
    max_depth: int = bounded(10, ge=2)
    max_args: int = bounded(10, ge=2)
    # pathfinder: canvas size, paddles per path, distractor paths (None: the published rule)
    size: int = 32
    path_length: int = bounded(pathfinder.DIFFICULTY["hard"], ge=1)
    n_distractors: int | None = bounded(None, ge=0)
    # imdb / cifar10: local files in the Hub schema ({"train": ..., "test": ...}) instead of the Hub;
    # imdb truncates to `max_len` bytes
    data_files: dict[str, str] | None = None

    def check(self) -> None:
        if self.task == "listops" and self.min_len > self.max_len:
            raise ConfigError(f"min_len: {self.min_len} is above max_len {self.max_len}")
        if self.task == "pathfinder" and self.size not in pathfinder.SIZES:
            raise ConfigError(f"size: {self.size} is not allowed; allowed: {', '.join(map(str, pathfinder.SIZES))}")
        if self.data_files is not None:  # checked here, before any other task of the stage is generated
            if self.task not in HUB_CLASSIFICATION_SOURCES:
                raise ConfigError(f"data_files: {self.task} is generated, not read; data_files is for "
                                  f"{', '.join(HUB_CLASSIFICATION_SOURCES)}")
            for split in ("train", "test"):
                local_files(HUB_CLASSIFICATION_SOURCES[self.task], split, self.data_files)


def vocab_size(cfg: LRATaskConfig) -> int:
    if cfg.task == "listops":
        return listops.VOCAB_SIZE
    if cfg.task == "pathfinder":
        return 256
    return HUB_CLASSIFICATION_SOURCES[cfg.task].vocab_size


def num_classes(cfg: LRATaskConfig) -> int:
    if cfg.task == "listops":
        return listops.NUM_CLASSES
    if cfg.task == "pathfinder":
        return 2
    return HUB_CLASSIFICATION_SOURCES[cfg.task].num_classes


def _padded(rows: list, labels) -> dict[str, np.ndarray]:
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), dtype=np.int32)  # int32 halves IMDb's memory; batches are int64
    mask = np.zeros((len(rows), width), dtype=bool)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
        mask[i, :len(row)] = True
    return {"input_ids": ids, "attention_mask": mask, "label": np.asarray(labels, dtype=np.int64)}


def _listops(cfg: LRATaskConfig) -> dict[str, dict[str, np.ndarray]]:
    try:
        data = listops.generate_listops(cfg.n_train + cfg.n_val, cfg.seed, min_len=cfg.min_len,
                                        max_len=cfg.max_len, max_depth=cfg.max_depth, max_args=cfg.max_args)
    except (ValueError, RuntimeError) as err:  # settings under which no or too few expressions exist
        raise ConfigError(f"listops: {err}") from None
    rows = [listops.encode(tokens, add_eos=True) for tokens in data["tokens"]]
    both = _padded(rows, data["label"])
    return {"train": {k: v[:cfg.n_train] for k, v in both.items()},
            "validation": {k: v[cfg.n_train:] for k, v in both.items()}}


def _pathfinder(cfg: LRATaskConfig) -> dict[str, dict[str, np.ndarray]]:
    out = {}
    for split, n, seed in (("train", cfg.n_train, cfg.seed), ("validation", cfg.n_val, cfg.seed + 1)):
        try:
            data = pathfinder.generate_pathfinder(n, seed, size=cfg.size, path_length=cfg.path_length,
                                                  n_distractors=cfg.n_distractors)
        except RuntimeError as err:  # the paths do not fit on the canvas
            raise ConfigError(f"pathfinder: {err}") from None
        ids = data["sequences"].astype(np.int32)
        out[split] = {"input_ids": ids, "attention_mask": np.ones(ids.shape, dtype=bool), "label": data["labels"]}
    return out


def _hub(cfg: LRATaskConfig) -> dict[str, dict[str, np.ndarray]]:
    out = {}
    for split, hub_split, n in (("train", "train", cfg.n_train), ("validation", "test", cfg.n_val)):
        max_len = cfg.max_len if cfg.task == "imdb" else None
        ds = load_hub_classification(cfg.task, hub_split, data_files=cfg.data_files, limit=n, max_len=max_len)
        ds = ds.with_format("numpy")  # rows as arrays: 50k images as Python int lists would take GBs
        out[split] = _padded(ds["input_ids"], ds["label"])
    return out


def lra_splits(cfg: LRATaskConfig) -> dict[str, dict[str, np.ndarray]]:
    """{"train", "validation"} -> {"input_ids", "attention_mask", "label"} arrays."""
    if cfg.task == "listops":
        return _listops(cfg)
    if cfg.task == "pathfinder":
        return _pathfinder(cfg)
    return _hub(cfg)


SPLITS = ("train", "validation")
ARRAYS = ("input_ids", "attention_mask", "label")


def save_splits(splits: dict[str, dict[str, np.ndarray]], out: str | Path, cfg: LRATaskConfig, stage: str) -> None:
    """Write `<split>_<array>.npy` for every split and array, and a manifest, atomically."""
    with atomic_dir(out) as tmp:
        for split in SPLITS:
            for name in ARRAYS:
                np.save(tmp / f"{split}_{name}.npy", splits[split][name])
        write_manifest(tmp, stage=stage, params=asdict(cfg), seed=cfg.seed,
                       counts={split: int(len(splits[split]["label"])) for split in SPLITS})


def load_splits(directory: str | Path, expected: LRATaskConfig | None = None,
                hint: str = "run `dvc repro lra_generate` first") -> dict:
    """Read back `save_splits`' directory after checking it against its manifest and, if given,
    that it was made from the `expected` config (stale data is an error, not a surprise)."""
    manifest = verify_manifest(directory, hint=hint)
    if expected is not None:
        made = manifest.get("params", {})
        for key, value in asdict(expected).items():
            if made.get(key) != value:
                raise DataError(f"{directory}: made with {key}={made.get(key)!r}, expected {value!r}; {hint}")
    try:
        return {split: {name: np.load(Path(directory) / f"{split}_{name}.npy") for name in ARRAYS}
                for split in SPLITS}
    except (OSError, ValueError) as err:
        raise DataError(f"{directory}: unreadable LRA arrays ({err}); {hint}") from None

