"""The Manticore pipeline: `dvc repro papers/manticore/dvc.yaml` at the smoke profile, for real."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.test_dvc import _run, copy_checkout
from tests.test_readme_commands import examples

RESULTS = "papers/manticore/results"
EXPERIMENTS = "docs/manticore/experiments.md"  # the page the report writes the single-seed tables into


@pytest.fixture(scope="module")
def repro(tmp_path_factory):
    repo = copy_checkout(tmp_path_factory.mktemp("mc"), profile="smoke")
    return repo, _run([sys.executable, "-m", "dvc", "repro", "papers/manticore/dvc.yaml"], repo)


@pytest.mark.slow  # the pipeline under DVC, about 4 min; make test runs its stages in process
def test_every_stage_runs_and_the_results_hold_every_experiment(repro):
    repo, result = repro
    for stage in ("instruction_text", "components", "specialists", "completions", "nl_experiments",
                  "mad_experiments", "mad_lr_check", "mad_sizing", "lra_experiments", "lra_sizing", "programmed",
                  "projector_budget", "finetune_tasks", "report"):
        assert f"Running stage 'papers/manticore/dvc.yaml:{stage}'" in result.stdout, result.stdout[-3000:]
    nl = json.loads((repo / RESULTS / "nl_experiments.json").read_text())
    assert [s["alphas"][0][1] for s in nl["sweep"]] == [0.0, 0.5, 1.0]
    assert set(nl["searched"]) == {"darts_alternating"}
    assert set(nl["summary"]["component_alone"]) == {"gpt_neo", "mamba"}
    assert (repo / RESULTS / "nl_landscape.png").stat().st_size > 1000
    completions = json.loads((repo / RESULTS / "completions.json").read_text())
    assert sum(completions["rows"].values()) == 2 * 12
    mad = json.loads((repo / RESULTS / "mad_experiments.json").read_text())
    assert set(mad["tasks"]) == {"mad_baseline/in-context-recall", "mad_baseline/memorization"}
    assert mad["seeds"] == [0, 1] and all(list(task["seeds"]) == ["0", "1"] for task in mad["tasks"].values())
    rows = {entry: task["seeds"]["0"] for entry, task in mad["tasks"].items()}  # the first seed's
    assert rows["mad_baseline/memorization"]["gpt_neo"] != mad["tasks"]["mad_baseline/memorization"]["seeds"]["1"][
        "gpt_neo"], "seeds that train differently"
    for row in rows.values():
        assert {"gpt_neo", "mamba", "manticore", "manticore_discretized"} <= set(row)
        assert all(sorted(block) == [0.0, 1.0] for block in row["manticore_discretized"]["alphas"])
        assert set(row["baselines"]) == {"striped_mh_hyena_moe", "mambaformer"}
        assert {"search", "discretized"} <= set(row["hybrids"]["manticore_3"])
    check = json.loads((repo / RESULTS / "mad_lr_check.json").read_text())
    assert check["factors"] == [1, 2] and set(check["tasks"]) == set(mad["tasks"])
    for entry, by_rate in check["tasks"].items():
        assert list(by_rate) == [f"{2 * check['own_lr']:g}"], "twice the tables' rate only"
        assert set(by_rate[f"{2 * check['own_lr']:g}"]) == set(rows[entry]) - {"programming"}
    sizing = json.loads((repo / RESULTS / "mad_sizing.json").read_text())
    assert sizing["summary"]["budgets"] == [2] and sizing["summary"]["table_budget"] == 4, \
        "smoke's budget; the tables' own is mad_experiments' runs"
    assert set(sizing["tasks"]) == set(mad["tasks"])
    for row in sizing["tasks"].values():
        assert set(row["networks"]) == {"gpt_neo", "mamba", "striped_mh_hyena_moe", "mambaformer"}
        assert 0 < row["chance"] < 1 and all(len(n["runs"]) == 1 for n in row["networks"].values())
    programmed = json.loads((repo / RESULTS / "programmed.json").read_text())
    assert len(programmed["sweep"]) == 9, "a 3 x 3 grid over two blocks"
    assert [r["seed"] for r in programmed["runs"]] == programmed["seeds"] == [0, 1]
    for k, point in enumerate(programmed["sweep"]):
        losses = [r["sweep"][k]["val_loss"] for r in programmed["runs"]]
        assert point["val_loss"] == pytest.approx(sum(losses) / len(losses)), "the landscape is the seeds' mean"
    assert len({r["programmed_val_loss"] for r in programmed["runs"]}) == 2, "seeds that train differently"
    assert mad["n_blocks"] == 1 and mad["programming"]["n_blocks"] == 2 and not mad["projectors"]
    for row in rows.values():
        assert len(row["manticore"]["alphas"]) == 1 and len(row["programming"]["alphas"]) == 2
        assert row["manticore"]["best_loss"] <= row["manticore"]["loss"]
    mean = [[sum(rows[t]["programming"]["alphas"][i][m] for t in rows) / len(rows) for m in range(2)]
            for i in range(2)]
    got = [a for block in programmed["programmed"]["alphas"] for a in block]
    assert got == pytest.approx([a for block in mean for a in block], abs=1e-6), \
        "the mean of the MAD programming searches' alphas, of the first seed"
    assert set(programmed["summary"]["frankenmerges"]) == {"gpt_neo then mamba", "mamba then gpt_neo"}
    budget = json.loads((repo / RESULTS / "projector_budget.json").read_text())
    assert [r["steps"] for r in budget["budgets"]] == [0, 2]
    assert budget["budgets"][1]["tokens"] == 2 * 4 * budget["sequence_length"]
    table1 = json.loads((repo / RESULTS / "finetune_tasks.json").read_text())
    assert set(table1["tasks"]) == {"stories", "instructions", "stories_instructions"}
    for row in table1["tasks"].values():
        assert {"gpt_neo", "mamba", "manticore"} <= set(row)
        assert sum(row["alphas"][0]) == pytest.approx(1.0)
    figure3 = table1["tasks"]["stories_instructions"]["landscape"]
    assert [s["alphas"][0][1] for s in figure3["sweep"]] == [0.0, 0.5, 1.0]
    assert set(figure3["searched"]) == {"darts_simultaneous", "gaea_simultaneous"} and "ensemble" in figure3
    assert table1["summary"]["tasks"] == 2 and table1["summary"]["figure3_tasks"] == 1
    searched = figure3["searched"]["darts_simultaneous"]  # Table 1's method and update rule
    assert table1["tasks"]["stories_instructions"]["manticore"] == searched["val_loss"]
    assert table1["tasks"]["stories_instructions"]["alphas"] == searched["alphas"]
    runs = repo / "data/manticore/finetune_runs"
    assert (runs / "stories/search").is_dir() and not (runs / "stories_instructions/search").exists(), \
        "a landscape task's Table 1 search is the landscape's, not trained twice"
    state = json.loads((repo / "data/manticore/finetune_runs/stories_instructions/sweep_0/run_state.json").read_text())
    assert state["global_step"] == 2, "the task's own steps"
    components = json.loads((repo / RESULTS / "components.json").read_text())
    assert components["components"]["mamba_instructions"]["corpus"] == "instructions"
    assert set(components["specialists"]["margins"]) == {"stories", "instructions"}
    specialists = json.loads((repo / RESULTS / "specialists.json").read_text())
    assert [(r["pair"], r["seed"]) for r in specialists["runs"]] == [
        (pair, seed) for pair in ("specialists", "same_architecture") for seed in (0, 1, 2)]
    main, control = specialists["runs"][0], specialists["runs"][3]
    assert set(main["searched"]) == {"darts_alternating", "gaea_alternating"} and "ensemble" in main
    assert set(main["alone_at_hybrid_compute"]) == {"gpt_neo", "mamba_instructions"}
    assert all(r["steps"] > 2 for r in main["alone_at_hybrid_compute"].values()), "more steps than the hybrid's"
    assert "ensemble" not in control and "alone_at_hybrid_compute" not in control
    assert set(main["tasks"]) == {"stories", "instructions", "mix"} and "tasks" not in control
    for point in main["sweep"]:
        loss = point["loss"]
        assert loss["mix"] == pytest.approx((loss["stories"] + loss["instructions"]) / 2)
        assert point["train_seconds"] > 0
    # Figure 4: seed 1 from the pair's own projector run, seed 3 a job of its own
    assert [(row["pair"], row["seed"]) for row in specialists["figure4"]] == [("specialists", 1), ("specialists", 3)]
    for row in specialists["figure4"]:
        assert [b["steps"] for b in row["budgets"]] == [0, 1, 2]
        assert [[p.get("trained", True) for p in b["sweep"]] for b in row["budgets"][:-1]] == [[False, True, False]] * 2
    assert specialists["figure4"][0]["budgets"][-1]["sweep"] == specialists["runs"][1]["sweep"], "the pair's own"
    assert (repo / "data/manticore/specialist_runs/specialists/seed3/budget1_sweep_1").is_dir()
    assert not (repo / "data/manticore/specialist_runs/specialists/seed3/search_darts_alternating").exists()
    claims = json.loads((repo / RESULTS / "claims.json").read_text())["claims"]
    ids = {c["id"] for c in claims}
    assert ids >= {"fig3-hybrid-beats-components", "table8-ensemble-below-manticore", "table2-right-beats-components",
                   "table1-mix-beats-components", "table1-beats-components-on-most-tasks",
                   "fig2-right-mad-programmed-hybrid", "fig4-optimum-stabilises"}
    lra = {c["id"]: c for c in claims if c["id"].startswith(("table3-lra-", "table7-"))}
    assert set(lra) == {"table3-lra-listops", "table3-lra-pathfinder32", "table7-programmed-hybrid-pathfinder64"}
    # smoke: two seeds of two steps, so no verdict
    assert all(c["verdict"] in ("needs paper scale", "inconclusive") for c in lra.values())
    sizing = json.loads((repo / RESULTS / "lra_sizing.json").read_text())
    assert set(sizing["tasks"]) == {"listops", "pathfinder32"}
    assert sizing["tasks"]["listops"]["budgets"] == [1, 2]  # smoke's budget and the table's own
    assert json.loads((repo / RESULTS / "metrics.json").read_text())
    readme = (repo / "papers/manticore/README.md").read_text()
    assert "`fig3-hybrid-beats-components`" in readme
    experiments = (repo / EXPERIMENTS).read_text()
    assert "_Profile `smoke`; generated from `results/nl_experiments.json`._" in experiments
    assert f"{nl['ensemble']['val_loss']:.4f}" in experiments


def test_committed_readme_and_ledger_match_the_committed_results():
    from common.eval.report import render_pages
    from papers.manticore.report import TABLES
    from tests.conftest import ROOT, rebuilt_ledger

    pages = {page: (ROOT / page).read_text() for page in ("papers/manticore/README.md", EXPERIMENTS)}
    assert render_pages(pages, ROOT / RESULTS, TABLES, "") == pages, "run `dvc repro papers/manticore/dvc.yaml:report`"
    rebuilt, committed = rebuilt_ledger("manticore")
    assert rebuilt == committed


@pytest.mark.slow  # the pipeline under DVC, about 4 min; make test runs its stages in process
def test_the_readme_python_example_runs_on_the_pipelines_components(repro):
    repo, _ = repro
    (block,) = [e for e in examples(ROOT / "papers/manticore/README.md") if e.language == "python"]
    result = subprocess.run([sys.executable, "-c", block.text], cwd=repo, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
