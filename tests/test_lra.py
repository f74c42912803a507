"""LRA arrays and DataModules (ListOps, Pathfinder, IMDb, CIFAR-10) and a short classification run."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import torch
from PIL import Image

from common.config import from_dict, stage_config
from common.data import listops, pathfinder
from common.data.lra import LRATaskConfig, load_splits, lra_splits, num_classes, save_splits, vocab_size
from common.data.task_datamodules import LRADataModule
from common.errors import ConfigError, DataError
from common.models.lm import LMConfig
from common.stages import lra_generate
from common.stages.lra_generate import LRAGenerateConfig
from common.training.lra import train_on_lra
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig
from tests.conftest import smoke_params, write_params

LISTOPS = LRATaskConfig(task="listops", n_train=60, n_val=20, min_len=5, max_len=40, max_depth=4, max_args=4, seed=2)

OPS = {3: min, 4: max, 5: lambda a: sorted(a)[len(a) // 2] if len(a) % 2 else (sorted(a)[len(a) // 2 - 1]
                                                                             + sorted(a)[len(a) // 2]) // 2,
       6: lambda a: sum(a) % 10}


def value_of(ids: list[int]) -> int:
    """Independent evaluator over ids (3-6 operators, 7 = ']', 8-17 digits), recursive descent."""
    def parse(i):
        if ids[i] >= 8:
            return ids[i] - 8, i + 1
        op, i, args = OPS[ids[i]], i + 1, []
        while ids[i] != 7:
            v, i = parse(i)
            args.append(v)
        return op(args), i + 1
    value, end = parse(0)
    assert ids[end] == listops.EOS_ID
    return value


def test_listops_arrays_are_labelled_padded_and_disjoint():
    splits = lra_splits(LISTOPS)
    train, val = splits["train"], splits["validation"]
    assert train["input_ids"].shape[0] == 60 and val["input_ids"].shape[0] == 20
    for split in (train, val):
        for ids, mask, label in zip(split["input_ids"], split["attention_mask"], split["label"]):
            real = ids[mask].tolist()
            assert (ids[~mask] == listops.PAD_ID).all() and mask[: len(real)].all()  # right padding
            assert 6 <= len(real) <= 41 and value_of(real) == label
    rows = lambda s: {tuple(r[m]) for r, m in zip(s["input_ids"], s["attention_mask"])}  # noqa: E731
    assert not rows(train) & rows(val)
    assert (vocab_size(LISTOPS), num_classes(LISTOPS)) == (18, 10)


def test_pathfinder_arrays_are_the_images():
    cfg = LRATaskConfig(task="pathfinder", n_train=4, n_val=2, size=32, path_length=6, seed=5)
    splits = lra_splits(cfg)
    images = pathfinder.generate_pathfinder(4, 5, size=32, path_length=6)
    assert (splits["train"]["input_ids"] == images["images"].reshape(4, 1024)).all()
    assert (splits["train"]["label"] == images["labels"]).all()
    assert splits["validation"]["attention_mask"].all() and splits["validation"]["input_ids"].shape == (2, 1024)
    assert (vocab_size(cfg), num_classes(cfg)) == (256, 2)


def test_hub_tasks_from_local_files(tmp_path):
    features = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(names=["neg", "pos"])})
    files = {}
    for split, texts in (("train", ["good", "bad movie", "ok"]), ("test", ["fine film"])):
        files[split] = str(tmp_path / f"{split}.parquet")
        datasets.Dataset.from_dict({"text": texts, "label": [1, 0, 1][: len(texts)]}, features=features
                                   ).to_parquet(files[split])
    splits = lra_splits(LRATaskConfig(task="imdb", n_train=3, n_val=5, max_len=6, data_files=files))
    train = splits["train"]
    assert train["input_ids"].shape == (3, 6)  # "bad movie" truncated to 6 bytes
    assert train["input_ids"][0].tolist() == [ord(c) + 1 for c in "good"] + [0, 0]
    assert train["attention_mask"][0].tolist() == [True] * 4 + [False] * 2
    assert splits["validation"]["input_ids"].shape == (1, 6) and train["label"].tolist() == [1, 0, 1]


def test_cifar_from_local_files(tmp_path):
    features = datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(num_classes=10)})
    pixels = np.random.default_rng(0).integers(0, 256, size=(3, 32, 32, 3), dtype=np.uint8)
    path = str(tmp_path / "cifar.parquet")
    datasets.Dataset.from_dict({"img": [Image.fromarray(p) for p in pixels], "label": [4, 2, 7]},
                               features=features).to_parquet(path)
    splits = lra_splits(LRATaskConfig(task="cifar10", n_train=2, n_val=1, data_files={"train": path, "test": path}))
    gray = (pixels.astype(float) @ np.array([0.299, 0.587, 0.114])).reshape(3, 1024)
    assert splits["train"]["input_ids"].shape == (2, 1024) and splits["train"]["attention_mask"].all()
    assert np.abs(splits["train"]["input_ids"] - gray[:2]).max() <= 1
    assert splits["train"]["label"].tolist() == [4, 2] and splits["validation"]["label"].tolist() == [4]


def test_local_files_are_checked_with_the_settings_before_any_task_is_made(tmp_path):
    present = tmp_path / "train.parquet"
    present.write_bytes(b"")
    tasks = {"listops": {"task": "listops"},
             "imdb": {"task": "imdb", "data_files": {"train": str(present), "test": str(tmp_path / "test.parquet")}}}
    with pytest.raises(DataError, match=rf"^{tmp_path / 'test.parquet'}: local data file for imdb not found$"):
        from_dict(LRAGenerateConfig, {"tasks": tasks}, where="lra_generate")
    tasks["imdb"]["data_files"] = {"train": str(present)}
    with pytest.raises(DataError, match="^imdb: data_files has no 'test' entry"):
        from_dict(LRAGenerateConfig, {"tasks": tasks}, where="lra_generate")
    tasks["imdb"]["data_files"] = {"train": str(tmp_path / "train.txt"), "test": str(present)}
    (tmp_path / "train.txt").write_text("")
    with pytest.raises(DataError, match="train.txt: unsupported file type for imdb"):
        from_dict(LRAGenerateConfig, {"tasks": tasks}, where="lra_generate")
    with pytest.raises(ConfigError, match=r"data_files: listops is generated, not read; data_files is for imdb"):
        from_dict(LRATaskConfig, {"task": "listops", "data_files": {"train": str(present)}}, where="lra")


def test_bad_lra_settings_are_config_errors():
    with pytest.raises(ConfigError, match="min_len"):
        from_dict(LRATaskConfig, {"task": "listops", "min_len": 50, "max_len": 10}, where="lra")
    with pytest.raises(ConfigError, match="allowed: 32, 64, 128"):
        from_dict(LRATaskConfig, {"task": "pathfinder", "size": 48}, where="lra")
    with pytest.raises(ConfigError, match="allowed: listops, pathfinder, imdb, cifar10"):
        from_dict(LRATaskConfig, {"task": "text"}, where="lra")


def test_datamodule_batches():
    dm = LRADataModule(LISTOPS, batch_size=16, seed=0)
    dm.setup()
    batch = next(iter(dm.train_dataloader()))
    assert set(batch) == {"input_ids", "attention_mask", "label"}
    assert batch["input_ids"].dtype == torch.long and batch["attention_mask"].dtype == torch.bool
    assert batch["input_ids"].shape == (16, dm.splits["train"]["input_ids"].shape[1])
    labels = torch.cat([b["label"] for b in dm.val_dataloader()])
    assert labels.tolist() == dm.splits["validation"]["label"].tolist()  # validation keeps its order


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("pattern", ["attn,swiglu", "mamba"])
def test_short_classification_run(tmp_path, pattern):
    trainer = TrainerConfig(max_steps=6, val_every_n_steps=6, limit_val_batches=1, log_every_n_steps=2,
                            checkpoint_every_n_steps=6, progress_bar=False)
    scores = train_on_lra(LMConfig(d_model=16, pattern=pattern), LISTOPS, trainer, tmp_path,
                          optim=OptimConfig(warmup_steps=1), batch_size=8)
    labels = lra_splits(LISTOPS)["validation"]["label"]
    assert scores["steps"] == 6 and scores["n"] == 20 and 0 <= scores["accuracy"] <= 1
    assert scores["majority_rate"] == pytest.approx(np.bincount(labels).max() / 20)
    assert np.isfinite(scores["loss"])


# --- the lra_generate stage and reading its output back -------------------------------------------

def test_generate_stage_writes_arrays_the_datamodule_reads(tmp_path):
    params = smoke_params()
    write_params(tmp_path / "params.yaml", params)
    lra_generate.main(["--params", str(tmp_path / "params.yaml"), "--out", str(tmp_path / "lra")])
    tasks = stage_config(params, "lra_generate", LRAGenerateConfig, profile="smoke").tasks
    assert sorted(p.name for p in (tmp_path / "lra").iterdir()) == sorted(tasks)
    for name, task in tasks.items():
        dm = LRADataModule(task, batch_size=4, data_dir=tmp_path / "lra" / name)
        dm.setup()
        fresh = lra_splits(task)  # the same config generates the same arrays
        for split in ("train", "validation"):
            for key in ("input_ids", "attention_mask", "label"):
                assert np.array_equal(dm.splits[split][key], fresh[split][key]), (name, split, key)
        assert next(iter(dm.train_dataloader()))["input_ids"].shape[0] == 4


def test_saved_arrays_are_checked(tmp_path):
    save_splits(lra_splits(LISTOPS), tmp_path / "listops", LISTOPS, stage="test")
    with pytest.raises(DataError, match="n_train=60, expected 61"):
        load_splits(tmp_path / "listops", LRATaskConfig(**{**LISTOPS.__dict__, "n_train": 61}))
    (tmp_path / "listops" / "train_label.npy").write_bytes(b"truncated")
    with pytest.raises(DataError, match="corrupted"):
        load_splits(tmp_path / "listops", LISTOPS)


def test_impossible_generation_settings_are_config_errors():
    # Depth 2 allows one operator with at most 3 arguments: never 10 tokens long.
    with pytest.raises(ConfigError, match="listops: only 0/2"):
        lra_splits(LRATaskConfig(task="listops", n_train=1, n_val=1, min_len=10, max_len=20, max_depth=2,
                                 max_args=3))
