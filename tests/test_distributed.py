"""What makes N processes train as one: one writer, shards that add up to the one-process batch,
and stages that run their jobs in turn under DDP (Sinkhorn over every process's tokens: test_moe)."""

from __future__ import annotations

import pytest

from common import distributed
from common.data.datamodule import EpochShuffleSampler
from common.errors import ConfigError
from common.io import atomic_dir, atomic_file, write_json
from common.training.trainer import TrainerConfig, build_trainer


@pytest.fixture
def rank_one(monkeypatch):
    """This process as Lightning's launcher starts the second process of a run."""
    for name in distributed.RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOCAL_RANK", "1")


def test_rank_zero_is_the_process_that_names_no_other_rank(monkeypatch):
    for name in distributed.RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert distributed.is_global_zero()
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("NODE_RANK", "0")
    assert distributed.is_global_zero()
    monkeypatch.setenv("NODE_RANK", "1")  # local rank 0 of the second node
    assert not distributed.is_global_zero()


def test_other_ranks_write_nothing_and_leave_nothing(rank_one, tmp_path):
    (tmp_path / "kept.json").write_text("rank zero's\n")
    write_json(tmp_path / "kept.json", {"from": "rank one"})
    write_json(tmp_path / "new.json", {"from": "rank one"})
    with atomic_file(tmp_path / "plot.png", "wb") as handle:
        handle.write(b"png")
    with atomic_dir(tmp_path / "models") as scratch:
        (scratch / "weights.pt").write_bytes(b"w")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"]
    assert (tmp_path / "kept.json").read_text() == "rank zero's\n"


@pytest.mark.parametrize("n,replicas", [(37, 2), (40, 4), (5, 3)])
def test_shards_of_a_step_are_the_rows_one_process_takes(n, replicas):
    """Batch b of every one of `replicas` processes, together, are batch b of one process with
    `replicas` times the batch size (the permutation padded with its own start at the end)."""
    batch = 3
    whole = list(EpochShuffleSampler(n, seed=7))
    shards = [list(EpochShuffleSampler(n, seed=7, rank=r, replicas=replicas)) for r in range(replicas)]
    assert {len(s) for s in shards} == {-(-n // replicas)}
    padded = whole + whole[:len(shards[0]) * replicas - n]
    for b in range(-(-len(shards[0]) // batch)):
        together = sorted(i for s in shards for i in s[b * batch:(b + 1) * batch])
        assert together == sorted(padded[b * batch * replicas:(b + 1) * batch * replicas])


def test_runs_go_in_turn_when_training_spans_processes():
    assert TrainerConfig().job_workers(None) is None
    assert TrainerConfig(devices=2, strategy="ddp").job_workers(None) == 1
    assert TrainerConfig(num_nodes=2).job_workers(4) == 1
    assert TrainerConfig(devices="auto").job_workers(3) == 1


def test_fsdp_on_cpu_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"^trainer: The strategy `fsdp` requires a GPU accelerator"):
        build_trainer(TrainerConfig(strategy="fsdp", devices=1), tmp_path)


@pytest.mark.parametrize("strategy", ["ddp", "auto"])
def test_only_modules_that_skip_parameters_make_ddp_search_for_them(tmp_path, strategy):
    """Plain DDP refuses a step that leaves a parameter without a gradient (a Manticore's); DDP picked
    by `strategy: auto` for several devices is told as well. Other modules keep DDP's default."""
    cfg = TrainerConfig(strategy=strategy, devices=2)
    told = build_trainer(cfg, tmp_path / "a", skips_parameters=True).strategy
    plain = build_trainer(cfg, tmp_path / "b").strategy
    assert told._ddp_kwargs.get("find_unused_parameters") is True
    assert not plain._ddp_kwargs.get("find_unused_parameters", False)
