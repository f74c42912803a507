"""The BlackMamba pipeline: `dvc repro papers/blackmamba/dvc.yaml` at the smoke profile, for real."""

from __future__ import annotations

import json
import sys

import pytest

from tests.test_dvc import _run, copy_checkout

RESULTS = "papers/blackmamba/results"


@pytest.fixture(scope="module")
def repro(tmp_path_factory):
    repo = copy_checkout(tmp_path_factory.mktemp("bm"), profile="smoke")
    result = _run([sys.executable, "-m", "dvc", "repro", "papers/blackmamba/dvc.yaml"], repo)
    return repo, result


def load(repo, name):
    return json.loads((repo / RESULTS / name).read_text())


def test_every_stage_runs_and_writes_its_results(repro):
    repo, result = repro
    for stage in ("table1", "sinkhorn", "train_compare", "latency", "routing", "report"):
        assert f"Running stage 'papers/blackmamba/dvc.yaml:{stage}'" in result.stdout, result.stdout[-3000:]
    for png in ("loss_vs_flops.png", "loss_vs_time.png", "latency.png", "routing_heatmap.png"):
        assert (repo / RESULTS / png).stat().st_size > 1000
    for name in ("blackmamba", "mamba", "transformer", "moe_transformer"):
        assert (repo / f"data/blackmamba/models/{name}/model.safetensors").is_file()
    again = _run([sys.executable, "-m", "dvc", "repro", "papers/blackmamba/dvc.yaml"], repo)
    assert "Running stage" not in again.stdout


def test_results_hold_what_the_readme_reports(repro):
    repo, _ = repro
    train = load(repo, "train_compare.json")
    assert set(train["models"]) == {"blackmamba", "mamba", "transformer", "moe_transformer"}
    for res in train["models"].values():
        assert res["steps"] == 8 and res["history"][-1]["train_flops"] > 0
    latency = load(repo, "latency.json")
    assert latency["models"]["mamba"]["64"]["cache_bytes"] == latency["models"]["mamba"]["8"]["cache_bytes"]
    transformer = latency["models"]["transformer"]
    assert transformer["64"]["cache_bytes"] == 8 * transformer["8"]["cache_bytes"]
    routing = load(repo, "routing.json")
    for mode in routing["modes"].values():
        assert mode["n_layers"] == 1
        assert sum(mode["layers"][0]["tokens_per_expert"]) == 2 * 4 * train["n_ctx"]
    assert len(load(repo, "table1.json")["rows"]) == 16
    assert load(repo, "sinkhorn.json")["summary"]["blackmamba"]["max_iters_absolute"] >= 1


def test_readme_tables_are_generated_from_the_results(repro):
    repo, _ = repro
    readme = (repo / "papers/blackmamba/README.md").read_text()
    train = load(repo, "train_compare.json")
    assert "_Profile `smoke`; generated from `results/train_compare.json`._" in readme
    assert f"{train['models']['mamba']['final_val_loss']:.3f}" in readme
    assert readme.count("**Verdict") == 5


def test_committed_readme_matches_the_committed_results():
    """The README in git must be what the report stage makes of the results in git."""
    from papers.blackmamba.report import render
    from tests.conftest import ROOT

    readme = (ROOT / "papers/blackmamba/README.md").read_text()
    assert render(readme, ROOT / RESULTS) == readme, "run `python -m papers.blackmamba.report`"
