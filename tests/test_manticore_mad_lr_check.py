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


def _tiny(**model_lr) -> MADExperimentsConfig:
    params = yaml.safe_load((ROOT / "papers/manticore/params.yaml").read_text())
    params["mad_experiments"]["tiny"]["model_lr"] = model_lr
    return stage_config(params, "mad_experiments", MADExperimentsConfig, "tiny", shared=MAD_TASKS)


def test_each_run_trains_and_is_checked_at_its_own_rate(monkeypatch):
    """`model_lr` names a rate per task and run; every other run keeps `optim.lr`. A worker job
    hands its run that rate, and the check trains it at that rate times each factor."""
    import papers.manticore.mad_runs as mad_runs

    cfg = _tiny(memorization={"mamba": 0.004, "manticore": 0.008})
    seen = {}
    monkeypatch.setattr(mad_runs, "train_alone", lambda lm, task, at, seed, run_dir: seen.setdefault(
        (task.task, run_dir.name), at.optim.lr))
    monkeypatch.setattr(mad_runs, "search_and_retrain", lambda configs, n_blocks, search, retrain, task, at, *rest:
                        seen.setdefault((task.task, "manticore"), at.optim.lr))
    for entry in ("mad_baseline/memorization", "mad_baseline/in-context-recall"):
        for kind, name in (("alone", "mamba"), ("alone", "gpt_neo"), ("manticore", "manticore")):
            mad_runs.run_job(kind, name, entry, 0, cfg, Path("runs"))
    assert seen == {("memorization", "mamba"): 0.004, ("memorization", "gpt_neo"): cfg.optim.lr,
                    ("memorization", "manticore"): 0.008, ("in-context-recall", "mamba"): cfg.optim.lr,
                    ("in-context-recall", "gpt_neo"): cfg.optim.lr, ("in-context-recall", "manticore"): cfg.optim.lr}
    rates = {(job["entry"], job["name"], job["cfg"].optim.lr): job["cfg"].lr_of(job["entry"], job["name"])
             for job in check_jobs(cfg, [0.5, 1, 2], Path("runs"))}
    assert rates[("mad_baseline/memorization", "mamba", cfg.optim.lr * 2)] == pytest.approx(0.008)
    assert rates[("mad_baseline/memorization", "manticore", cfg.optim.lr / 2)] == pytest.approx(0.004)
    assert rates[("mad_baseline/memorization", "gpt_neo", cfg.optim.lr / 2)] == pytest.approx(cfg.optim.lr / 2)
    assert cfg.run_rates()["mad_baseline/memorization"]["manticore"] == 0.008


AT = r"^mad_experiments\.tiny\.model_lr\."


@pytest.mark.parametrize("model_lr, message", [
    ({"copying": {"mamba": 0.004}}, AT + r"copying: not a task of settings; allowed: in-context-recall, "),
    ({"memorization": {"gru": 0.004}}, AT + r"memorization\.gru: not a run of the tables; allowed: gpt_neo, "),
    ({"memorization": {"mamba": 0}}, AT + r"memorization\.mamba: a learning rate must be a positive number; got 0\.0$"),
])
def test_a_bad_per_run_rate_is_refused_in_one_line(model_lr, message):
    with pytest.raises(ConfigError, match=message):
        _tiny(**model_lr)
