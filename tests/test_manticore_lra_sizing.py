"""`lra_sizing` and the LRA rows of the Manticore ledger: a claim is `needs paper scale` while a
component trained alone is at chance at the table's budget, `inconclusive` (one seed) once all leave it."""

from __future__ import annotations

import pytest
import yaml

from common.eval.ledger import check_ledger
from papers.manticore import lra_sizing
from papers.manticore.report import lra_claims
from tests.conftest import ROOT


def sized(accuracies: dict[str, dict[int, float]], chance: float = 0.2, n: int = 500) -> dict:
    """lra_sizing's results for one task scored on `n` examples, with `accuracies[component][budget]`."""
    budgets = sorted(next(iter(accuracies.values())))
    networks = {}
    for component, by_budget in accuracies.items():
        # Above chance here by hand: 5 points over a 20% chance on 500 examples is p < 0.01; 1 point is not.
        above = {b: acc >= chance + 0.05 for b, acc in by_budget.items()}
        start = next((b for b in budgets if all(above[c] for c in budgets if c >= b)), None)
        networks[component] = {"runs": {str(b): {"accuracy": a, "n": n, "majority_rate": chance,
                                                 "above_chance": above[b]} for b, a in by_budget.items()},
                               "above_chance_from": start}
    starts = [net["above_chance_from"] for net in networks.values()]
    return {"profile": "tiny", "alpha": 0.01, "components": list(accuracies),
            "tasks": {"listops": {"table_budget": budgets[0], "budgets": budgets, "sequence_length": 61,
                                  "chance": chance, "components": list(accuracies), "networks": networks,
                                  "all_above_chance_from": None if None in starts else max(starts)}}}


def table(accuracy: dict[str, float], chance: float = 0.2, n: int = 500, programmed_at: float | None = None) -> dict:
    """lra_experiments' results: ListOps searched, and Pathfinder-64 with GPT-Neo programmed out."""
    def model(acc):
        return {"accuracy": acc, "n": n, "majority_rate": chance, "runs": True}

    tasks = {"listops": {"programmed": False, "models": {k: model(v) for k, v in accuracy.items()},
                         "best_component_accuracy": max(v for k, v in accuracy.items() if k != "manticore")}}
    if programmed_at is not None:
        tasks["pathfinder64"] = {"programmed": True, "sequence_length": 4096, "steps": 10, "excluded": ["gpt_neo"],
                                 "models": {"gpt_neo": {"runs": False}, "mamba": model(programmed_at),
                                            "manticore": model(programmed_at)}}
    return {"profile": "tiny", "components": ["gpt_neo", "mamba"], "tasks": tasks}


def test_a_task_no_budget_takes_above_chance_needs_paper_scale():
    sizing = sized({"gpt_neo": {150: 0.30, 600: 0.35}, "mamba": {150: 0.21, 600: 0.21}})
    [entry] = lra_claims(table({"gpt_neo": 0.30, "mamba": 0.21, "manticore": 0.31}), sizing)
    assert entry["verdict"] == "needs paper scale"
    assert "gpt_neo 150, mamba >600" in entry["evidence"], entry["evidence"]
    check_ledger([entry])


def test_a_component_learning_only_past_the_tables_budget_names_the_budget_to_run():
    sizing = sized({"gpt_neo": {150: 0.30, 600: 0.35}, "mamba": {150: 0.21, 600: 0.32}})
    [entry] = lra_claims(table({"gpt_neo": 0.30, "mamba": 0.21, "manticore": 0.31}), sizing)
    assert entry["verdict"] == "inconclusive"
    assert "on listops every component is above chance from 600 steps" in entry["why"], entry["why"]
    check_ledger([entry])


def test_every_component_above_chance_is_inconclusive_on_one_seed():
    sizing = sized({"gpt_neo": {150: 0.30}, "mamba": {150: 0.28}})
    [entry] = lra_claims(table({"gpt_neo": 0.30, "mamba": 0.28, "manticore": 0.33}), sizing)
    assert entry["verdict"] == "inconclusive" and "one seed" in entry["why"]
    assert entry["arms"]["listops"]["mean"] == pytest.approx(0.03)


@pytest.mark.parametrize(("accuracy", "verdict"), [(0.2, "needs paper scale"), (0.5, "inconclusive")])
def test_the_programmed_hybrid_is_judged_only_above_chance(accuracy, verdict):
    sizing = sized({"gpt_neo": {150: 0.30}, "mamba": {150: 0.28}})
    entries = lra_claims(table({"gpt_neo": 0.30, "mamba": 0.28, "manticore": 0.3}, programmed_at=accuracy), sizing)
    programmed = {e["id"]: e for e in entries}["table7-programmed-hybrid-pathfinder64"]
    assert programmed["verdict"] == verdict
    check_ledger(entries)


def test_budgets_for_a_task_the_tables_do_not_run_stop_the_stage(tmp_path, capsys):
    params = yaml.safe_load((ROOT / "papers/manticore/params.yaml").read_text())
    params["lra_sizing"]["tiny"]["budgets"] = {"listopz": [10]}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({**params, "profile": "tiny"}))
    with pytest.raises(SystemExit) as stop:
        lra_sizing.main(["--params", str(tmp_path / "params.yaml"), "--lra", str(tmp_path / "lra"),
                         "--run-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out.json")])
    assert stop.value.code == 2
    assert "lra_sizing.budgets.listopz: not a task of lra_experiments" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()
