"""The BlackMamba pipeline: `dvc repro papers/blackmamba/dvc.yaml` at the smoke profile, for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.claims.ledger import check_ledger
from common.claims.rules import VERDICTS
from tests.test_dvc import _run, copy_checkout

RESULTS = "papers/blackmamba/results"
NOTES = "docs/blackmamba/results-notes.md"
COMPARED = {"blackmamba", "mamba", "mamba_dense_mlp", "transformer", "moe_transformer"}


@pytest.fixture(scope="module")
def repro(tmp_path_factory):
    repo = copy_checkout(tmp_path_factory.mktemp("bm"), profile="smoke")
    result = _run([sys.executable, "-m", "dvc", "repro", "papers/blackmamba/dvc.yaml"], repo)
    return repo, result


def load(repo, name):
    return json.loads((repo / RESULTS / name).read_text())


@pytest.mark.slow  # the pipeline under DVC, about 4 min; make test runs its stages in process
def test_every_stage_runs_and_writes_its_results(repro):
    repo, result = repro
    for stage in ("table1", "sinkhorn", "train_compare", "lr_check", "latency", "routing", "zero_shot", "report"):
        assert f"Running stage 'papers/blackmamba/dvc.yaml:{stage}'" in result.stdout, result.stdout[-3000:]
    for png in ("loss_vs_flops.png", "latency.png", "routing_heatmap.png"):
        assert (repo / RESULTS / png).stat().st_size > 1000
    for name in COMPARED | {"blackmamba_deep"}:
        for seed in (0, 1, 2):
            assert (repo / f"data/blackmamba/models/{name}/seed{seed}/model.safetensors").is_file()
    again = _run([sys.executable, "-m", "dvc", "repro", "papers/blackmamba/dvc.yaml"], repo)
    assert "Running stage" not in again.stdout


@pytest.mark.slow  # the pipeline under DVC, about 4 min; make test runs its stages in process
def test_a_refused_config_and_a_forced_rerun_keep_every_finished_run(repro):
    """A misspelt key stops `train_compare` before any work and leaves the trained models and runs
    in place (DVC removes outputs that are not persisted before a stage runs); forced to run again,
    the stage loads every finished run instead of training it, to the same results."""
    repo, _ = repro
    params = repo / "papers/blackmamba/params.yaml"
    text = params.read_text()
    kept = [*(repo / "data/blackmamba").rglob("*.safetensors"), *(repo / "data/blackmamba").rglob("weights.pt")]
    before = {path: path.read_bytes() for path in kept}
    results = (repo / RESULTS / "train_compare.json").read_text()
    anchor = "  smoke:\n    seeds: [0, 1, 2]"
    assert text.count(anchor) == 1
    try:
        params.write_text(text.replace(anchor, anchor + "\n    max_stepz: 4"))
        refused = subprocess.run([sys.executable, "-m", "dvc", "repro", "papers/blackmamba/dvc.yaml"], cwd=repo,
                                 env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                                                           f"{os.environ['PATH']}"},
                                 capture_output=True, text=True, timeout=600)
        assert refused.returncode != 0 and "max_stepz" in refused.stdout + refused.stderr
        assert len(before) >= 2 * 3 * len(COMPARED)  # each run's weights and each model's
        assert {path: path.read_bytes() for path in kept} == before
    finally:
        params.write_text(text)
    forced = _run([sys.executable, "-m", "dvc", "repro", "-f", "-s", "papers/blackmamba/dvc.yaml:train_compare"], repo)
    runs = 3 * (len(COMPARED) + 1)  # the compared models' seeds and the routing model's
    assert (forced.stdout + forced.stderr).count("not training it again") == runs, forced.stderr[-3000:]
    assert (repo / RESULTS / "train_compare.json").read_text() == results


@pytest.mark.slow  # the pipeline under DVC, about 4 min; make test runs its stages in process
def test_results_hold_what_the_readme_reports(repro):
    repo, _ = repro
    train = load(repo, "train_compare.json")
    assert set(train["compared"]) == COMPARED and set(train["models"]) == COMPARED | {"blackmamba_deep"}
    for res in train["models"].values():
        assert set(res["seeds"]) == {"0", "1", "2"}
        for run in res["seeds"].values():
            assert run["steps"] == 8 and run["history"][-1]["train_flops"] > 0
    # The learning-rate check: each compared model's first seed at the rates besides its own (its own
    # rate's run is train_compare's), and no run kept as a model.
    check = load(repo, "lr_check.json")
    assert check["seed"] == 0 and check["rates"] == [0.002, 0.004] and set(check["own_lr"]) == COMPARED
    for name in COMPARED:
        assert check["own_lr"][name] == train["models"][name]["lr"] == 0.004
        assert set(check["final_val_loss"][name]) == {"0.002"}
    assert train["models"]["blackmamba_deep"]["lr"] == train["models"]["blackmamba"]["lr"]
    assert sorted(p.name for p in (repo / "data/blackmamba/models/blackmamba").iterdir()) == ["seed0", "seed1", "seed2"]
    assert (repo / "data/blackmamba/lr_check/blackmamba/lr0.002").is_dir()
    assert not (repo / "data/blackmamba/lr_check/blackmamba/lr0.004").exists()
    # Seeds differ, and the unigram chance level is a real loss (uniform would be log V).
    finals = [run["final_val_loss"] for run in train["models"]["blackmamba"]["seeds"].values()]
    assert len(set(finals)) == 3
    assert 0 < train["unigram_val_loss"] < __import__("math").log(train["vocab_size"])
    latency = load(repo, "latency.json")
    assert latency["models"]["mamba"]["64"]["cache_bytes"] == latency["models"]["mamba"]["8"]["cache_bytes"]
    transformer = latency["models"]["transformer"]
    assert transformer["64"]["cache_bytes"] == 8 * transformer["8"]["cache_bytes"]
    routing = load(repo, "routing.json")
    assert routing["model"] == "blackmamba_deep" and set(routing["seeds"]) == {"0", "1", "2"}
    for mode in routing["seeds"]["0"].values():
        assert mode["n_layers"] == 2
        assert sum(mode["layers"][0]["tokens_per_expert"]) == 2 * 4 * train["n_ctx"]
    zero_shot = load(repo, "zero_shot.json")
    assert set(zero_shot["models"]) == COMPARED
    assert zero_shot["controls"]["untrained blackmamba"]["architecture"] == "blackmamba/seed0"
    assert set(zero_shot["controls"]["untrained blackmamba"]["tasks"]) == set(zero_shot["tasks"])
    assert len(load(repo, "table1.json")["rows"]) == 16
    sinkhorn = load(repo, "sinkhorn.json")["summary"]
    assert set(sinkhorn) == {"logits", "sigmoid"}


@pytest.mark.slow  # the pipeline under DVC, about 4 min; make test runs its stages in process
def test_the_ledger_validates_and_the_metrics_are_its_headline(repro):
    repo, _ = repro
    ledger = load(repo, "claims.json")
    assert ledger["profile"] == "smoke"
    check_ledger(ledger["claims"])
    assert {entry["verdict"] for entry in ledger["claims"]} <= set(VERDICTS)
    metrics = load(repo, "metrics.json")
    assert metrics.pop("profile") == "smoke"
    assert set(metrics) <= {entry["id"] for entry in ledger["claims"]}
    assert all(isinstance(value, float) for value in metrics.values())


@pytest.mark.slow  # the pipeline under DVC, about 4 min; make test runs its stages in process
def test_readme_tables_are_generated_from_the_results(repro):
    repo, _ = repro
    readme = (repo / "papers/blackmamba/README.md").read_text()
    assert "_Profile `smoke`; generated from `results/train_compare.json`._" in readme
    for entry in load(repo, "claims.json")["claims"]:
        assert f"`{entry['id']}`" in readme and f"**{entry['verdict']}**" in readme


def test_committed_readme_and_ledger_match_the_committed_results():
    """The README, its notes page and the ledger in git must be what the report stage makes of the
    results in git."""
    from common.eval.report import render_pages
    from papers.blackmamba.report import TABLES
    from tests.conftest import ROOT, rebuilt_ledger

    pages = {page: (ROOT / page).read_text() for page in ("papers/blackmamba/README.md", NOTES)}
    assert render_pages(pages, ROOT / RESULTS, TABLES, "") == pages, "run `dvc repro papers/blackmamba/dvc.yaml`"
    rebuilt, committed = rebuilt_ledger("blackmamba")
    assert rebuilt == committed


def test_zero_shot_writes_its_tasks_output_when_every_task_is_built_in(tmp_path):
    """At `paper` every task is lm-eval's own; the stage's DVC output, the task directory, must still
    exist, or DVC fails the stage after a complete evaluation (the rehearsal found it missing)."""
    from papers.blackmamba.zero_shot import ZeroShotConfig, prepare_tasks

    tasks, include_path = prepare_tasks(ZeroShotConfig(tasks=["piqa", "hellaswag"]), tmp_path / "no_stories",
                                        tmp_path / "tasks", tokenizer=None, window=2048)
    assert tasks == ["piqa", "hellaswag"] and include_path is None
    assert json.loads((tmp_path / "tasks" / "tasks.json").read_text())["tasks"] == tasks




def test_latency_tracks_the_architectures_only_and_every_profile_names_them():
    """`latency` times the compared architectures with random weights: a change of steps, seeds or rates
    in `train_compare` must not rerun it. DVC fails a stage whose tracked key is missing, so every
    profile block names both keys (empty where the base's hold)."""
    import yaml

    from tests.conftest import ROOT

    stage = yaml.safe_load((ROOT / "papers/blackmamba/dvc.yaml").read_text())["stages"]["latency"]
    (tracked,) = [entry["papers/blackmamba/params.yaml"] for entry in stage["params"] if isinstance(entry, dict)]
    assert {key for key in tracked if key.startswith("train_compare.")} == {
        f"train_compare.{block}.{key}" for block in ("base", "${profile}") for key in ("blackmamba", "baselines")}
    section = yaml.safe_load((ROOT / "papers/blackmamba/params.yaml").read_text())["train_compare"]
    for profile in ("smoke", "tiny", "paper"):
        assert {"blackmamba", "baselines"} <= set(section[profile]), profile
