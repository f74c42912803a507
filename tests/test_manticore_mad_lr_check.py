"""The MAD tables' learning-rate check: which runs it trains, and the settings it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from common.config import from_dict, stage_config
from common.errors import ConfigError
from papers.manticore.mad_config import MAD_TASKS, MADExperimentsConfig
from papers.manticore.mad_lr_check import MADLRCheckConfig, check_jobs
from tests.conftest import ROOT


def test_the_tables_first_seed_runs_again_at_each_multiple_of_their_rate_but_one():
    params = yaml.safe_load((ROOT / "papers/manticore/params.yaml").read_text())
    cfg = stage_config(params, "mad_experiments", MADExperimentsConfig, "tiny", shared=MAD_TASKS)
    jobs = check_jobs(cfg, [0.5, 1, 2], Path("runs"))
    per_rate = len(cfg.tasks()) * (len(cfg.components) + len(cfg.baselines) + 1 + len(cfg.hybrids))
    assert len(jobs) == 2 * per_rate, "every network alone, Manticore's search and each hybrid's, per task"
    assert sorted({job["cfg"].optim.lr for job in jobs}) == [cfg.optim.lr / 2, cfg.optim.lr * 2]
    assert {job["seed"] for job in jobs} == {cfg.seeds[0]} and not {job["kind"] for job in jobs} - {
        "alone", "manticore", "hybrid"}, "the first seed; no programming search"
    assert all(job["cfg"].optim.warmup_steps == cfg.optim.warmup_steps and job["cfg"].trainer == cfg.trainer
               for job in jobs), "everything but the rate as the tables train it"
    assert len({job["run_root"] for job in jobs}) == 2 * len(cfg.tasks())


@pytest.mark.parametrize("raw, message", [
    ({"factors": [1, -2]}, r"^c\.factors: multiples of a learning rate must be positive; got \[-2\.0\]$"),
    ({"factors": [2, 2]}, r"^c\.factors: give"),
])
def test_a_bad_check_is_refused_in_one_line(raw, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(MADLRCheckConfig, raw, where="c")
