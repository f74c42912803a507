"""`lra_sizing` and the LRA rows of the Manticore ledger: a claim is `needs paper scale` while a
component trained alone is at chance at the table's budget, and judged task by task over seeds once every run
of every network is above it."""

from __future__ import annotations

import pytest
import yaml

from common.claims.ledger import check_ledger
from common.errors import DataError
from papers.manticore import lra_sizing
from papers.manticore.sizing import flat_from, rise_noise
from tests.conftest import ROOT, judge_claims


def sized(accuracies: dict[str, dict[int, float]], chance: float = 0.2, n: int = 500,
          flat: dict[str, int | None] | None = None) -> dict:
    """lra_sizing's results for one task scored on `n` examples, with `accuracies[component][budget]`;
    each curve flat from its first budget unless `flat` says otherwise."""
    budgets = sorted(next(iter(accuracies.values())))
    networks = {}
    for component, by_budget in accuracies.items():
        # Above chance here by hand: 5 points over a 20% chance on 500 examples is p < 0.01; 1 point is not.
        above = {b: acc >= chance + 0.05 for b, acc in by_budget.items()}
        start = next((b for b in budgets if all(above[c] for c in budgets if c >= b)), None)
        networks[component] = {"runs": {str(b): {"accuracy": a, "n": n, "majority_rate": chance,
                                                 "above_chance": above[b]} for b, a in by_budget.items()},
                               "above_chance_from": start, "flat_from": (flat or {}).get(component, budgets[0])}
    row = {"table_budget": budgets[0], "budgets": budgets, "sequence_length": 61, "chance": chance,
           "components": list(accuracies), "networks": networks}
    for key in ("above_chance_from", "flat_from"):
        froms = [net[key] for net in networks.values()]
        row[f"all_{key}"] = None if None in froms else max(froms)
    return {"profile": "tiny", "alpha": 0.01, "components": list(accuracies), "tasks": {"listops": row}}


def table(accuracy: dict[str, float | list[float]], chance: float = 0.2, n: int = 500,
          programmed_at: float | list[float] | None = None, steps: int = 150) -> dict:
    """lra_experiments' results: ListOps searched, and Pathfinder-64 with GPT-Neo programmed out;
    `accuracy[model]` one value, or one per seed."""
    def model(accs):
        accs = accs if isinstance(accs, list) else [accs]
        mean = sum(accs) / len(accs)
        return {"runs": True, "accuracy": mean, "accuracy_std": 0.0, "majority_rate": chance, "n": n,
                "seeds": [{"seed": i, "accuracy": a, "n": n, "majority_rate": chance} for i, a in enumerate(accs)]}

    models = {k: model(v) for k, v in accuracy.items()}
    seeds = list(range(len(models["manticore"]["seeds"])))
    best = max(("gpt_neo", "mamba"), key=lambda c: models[c]["accuracy"])
    tasks = {"listops": {"task": {"task": "listops"}, "programmed": False, "steps": steps, "seeds": seeds,
                         "sequence_length": 61, "models": models, "best_component": best,
                         "best_component_accuracy": models[best]["accuracy"],
                         "manticore_minus_best": [h["accuracy"] - b["accuracy"] for h, b in
                                                  zip(models["manticore"]["seeds"], models[best]["seeds"])]}}
    if programmed_at is not None:
        tasks["pathfinder64"] = {"task": {"task": "pathfinder", "size": 64, "path_length": 6}, "programmed": True,
                                 "sequence_length": 4096, "steps": 10, "excluded": ["gpt_neo"],
                                 "seeds": list(range(len(programmed_at) if isinstance(programmed_at, list) else 1)),
                                 "models": {"gpt_neo": {"runs": False}, "mamba": model(programmed_at),
                                            "manticore": model(programmed_at)}}
    return {"profile": "tiny", "components": ["gpt_neo", "mamba"], "seeds": seeds,
            "equivalence_margin": 0.01, "tasks": tasks}


def lra_row(lra: dict, sizing: dict, profile: str, task: str = "listops") -> dict:
    """One LRA row of claims.yaml judged at `profile` (the tables decide only at `paper`)."""
    claim_id = f"table3-lra-{task}" if task in ("listops", "pathfinder32") else f"table7-programmed-hybrid-{task}"
    entry = judge_claims("manticore", {"lra_experiments": lra, "lra_sizing": sizing}, [claim_id], profile)[claim_id]
    check_ledger([entry])
    return entry


def test_below_the_paper_profile_the_table_needs_paper_scale_and_says_what_the_sizing_measured():
    sizing = sized({"gpt_neo": {150: 0.30, 600: 0.35}, "mamba": {150: 0.21, 600: 0.21}})
    entry = lra_row(table({"gpt_neo": 0.30, "mamba": 0.21, "manticore": 0.31}), sizing, "tiny")
    assert entry["verdict"] == "needs paper scale"
    assert "gpt_neo 150, mamba >600" in entry["evidence"], entry["evidence"]
    assert "mamba 0.210 ± 0.000 (at chance)" in entry["evidence"]


def test_at_the_paper_profile_a_network_at_chance_decides_nothing():
    sizing = sized({"gpt_neo": {150: 0.30, 600: 0.35}, "mamba": {150: 0.21, 600: 0.32}})
    entry = lra_row(table({"gpt_neo": 0.30, "mamba": 0.21, "manticore": 0.31}), sizing, "paper")
    assert entry["verdict"] == "inconclusive"


def test_every_network_above_chance_is_inconclusive_on_one_seed():
    sizing = sized({"gpt_neo": {150: 0.30}, "mamba": {150: 0.28}})
    entry = lra_row(table({"gpt_neo": 0.30, "mamba": 0.28, "manticore": 0.33}), sizing, "paper")
    assert entry["verdict"] == "inconclusive" and "1 seed(s)" in entry["why"]
    assert entry["difference"]["mean"] == pytest.approx(0.03)


# Three seeds, every run above chance: Manticore minus the better component by mean, paired by seed.
# The paper's ListOps effect is 38.70 - 37.90 = 0.8 points.
@pytest.mark.parametrize(("manticore", "verdict"), [
    ([0.377, 0.389, 0.398], "reproduced"),  # + 0.007, 0.009, 0.008 over Mamba's seeds: the paper's size
    ([0.420, 0.440, 0.430], "direction reproduced"),  # + 0.05, 0.06, 0.04: every seed ahead, 6x the size
    ([0.320, 0.330, 0.340], "not reproduced"),  # 0.05 behind in every seed
    ([0.400, 0.360, 0.395], "inconclusive"),  # + 0.03, -0.02, 0.005: the interval spans zero
])
def test_three_seeds_above_chance_are_judged_against_the_better_component(manticore, verdict):
    sizing = sized({"gpt_neo": {1500: 0.30}, "mamba": {1500: 0.38}})
    lra = table({"gpt_neo": [0.30, 0.31, 0.29], "mamba": [0.37, 0.38, 0.39], "manticore": manticore}, steps=1500)
    entry = lra_row(lra, sizing, "paper")
    assert entry["verdict"] == verdict, entry["why"]
    # The better component by mean is Mamba, though GPT-Neo has the higher score in no seed: paired with Mamba.
    assert entry["difference"]["values"] == pytest.approx([h - m for h, m in zip(manticore, [0.37, 0.38, 0.39])])
    assert entry["paper_value"] == {"GPT-Neo": 37.90, "Mamba": 20.65, "Manticore": 38.70}


@pytest.mark.parametrize(("flat", "why"), [
    ({"mamba": 3000}, "the components' accuracy still rises until 3000 steps"),
    ({"mamba": None}, "still rises by more than noise up to 6000 steps"),
])
def test_a_component_still_rising_past_the_tables_budget_keeps_the_task_from_a_verdict(flat, why):
    sizing = sized({"gpt_neo": {1500: 0.30, 3000: 0.31, 6000: 0.31}, "mamba": {1500: 0.38, 3000: 0.45, 6000: 0.47}},
                   flat=flat)
    lra = table({"gpt_neo": [0.30, 0.31, 0.29], "mamba": [0.37, 0.38, 0.39], "manticore": [0.42, 0.44, 0.43]},
                steps=1500)
    entry = lra_row(lra, sizing, "paper")
    assert entry["verdict"] == "inconclusive" and why in entry["why"], entry["why"]


def test_a_curve_is_flat_from_the_first_budget_no_later_one_beats_beyond_noise():
    # Two standard errors of a difference of two runs on 500 examples: 2 * sqrt(2 * p * (1 - p) / 500).
    assert rise_noise(0.5, 500) == pytest.approx(0.06325, abs=1e-5)
    budgets = [150, 600, 1500, 3000, 6000]
    rising = {150: 0.18, 600: 0.28, 1500: 0.38, 3000: 0.43, 6000: 0.47}  # +0.05 and +0.09 after 1500: 0.09 > 0.061
    assert flat_from(budgets, rising, 500) == 3000
    assert flat_from(budgets, {**rising, 6000: 0.52}, 500) is None  # still rising at the end: not shown flat
    # GPT-Neo's measured ListOps curve up to 1,500: +0.06 over 0.27 exceeds 0.056, the noise there.
    gpt_neo = {150: 0.268, 600: 0.270, 1500: 0.330, 3000: 0.30, 6000: 0.31}
    assert flat_from(budgets, gpt_neo, 500) == 1500
    assert flat_from(budgets, {**gpt_neo, 1500: 0.32}, 500) == 150  # +0.052 is within it
    assert flat_from([20, 300], {20: 0.5, 300: 0.5}, 128) == 20


def test_one_seed_at_chance_keeps_the_task_from_a_verdict():
    sizing = sized({"gpt_neo": {1500: 0.30}, "mamba": {1500: 0.38}})
    lra = table({"gpt_neo": [0.30, 0.31, 0.21], "mamba": [0.37, 0.38, 0.39], "manticore": [0.42, 0.44, 0.43]},
                steps=1500)
    entry = lra_row(lra, sizing, "paper")
    assert entry["verdict"] == "inconclusive" and entry["why"] == "a model is not measurably above chance"


def test_the_programmed_stand_in_needs_paper_scale_and_the_papers_tasks_are_judged_on_an_equivalence():
    sizing = sized({"gpt_neo": {150: 0.30}, "mamba": {150: 0.28}})
    stand_in = lra_row(table({"gpt_neo": 0.30, "mamba": 0.28, "manticore": 0.3}, programmed_at=0.5), sizing, "tiny",
                       "pathfinder64")
    assert stand_in["verdict"] == "needs paper scale" and "gpt_neo programmed out" in stand_in["evidence"]
    for accuracy, verdict in (([0.80, 0.81, 0.82], "reproduced"), ([0.20, 0.20, 0.20], "inconclusive")):
        lra = table({"gpt_neo": 0.30, "mamba": 0.28, "manticore": 0.3}, programmed_at=accuracy)
        lra["tasks"]["pathfinder64_6"] = lra["tasks"].pop("pathfinder64")
        assert lra_row(lra, sizing, "paper", "pathfinder64_6")["verdict"] == verdict


def test_budgets_for_a_task_the_tables_do_not_run_stop_the_stage(tmp_path, capsys):
    params = yaml.safe_load((ROOT / "papers/manticore/params.yaml").read_text())
    params["lra_sizing"]["tiny"]["budgets"] = {"listopz": [10]}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({**params, "profile": "tiny"}))
    with pytest.raises(SystemExit) as stop:
        lra_sizing.main(["--params", str(tmp_path / "params.yaml"), "--lra", str(tmp_path / "lra"),
                         "--tables", str(tmp_path / "tables.json"), "--run-dir", str(tmp_path / "runs"),
                         "--out", str(tmp_path / "out.json")])
    assert stop.value.code == 2
    assert "lra_sizing.budgets.listopz: not a task of lra_tasks" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


def test_the_tables_budget_is_the_tables_first_seed_run():
    """The table's run at its own budget is read, not trained again; a table of other steps or
    without that seed is refused."""
    run = {"seed": 0, "steps": 3000, "accuracy": 0.3, "n": 500, "majority_rate": 0.14, "loss": 1.7}
    tables = {"tasks": {"listops": {"models": {"mamba": {"seeds": [{**run, "seed": 1}, run]}}}}}
    assert lra_sizing.table_run(tables, "listops", "mamba", 3000, 0) == {k: v for k, v in run.items() if k != "seed"}
    for args in (("listops", "mamba", 600, 0), ("listops", "mamba", 3000, 2), ("pathfinder32", "mamba", 3000, 0)):
        with pytest.raises(DataError, match="rerun lra_experiments"):
            lra_sizing.table_run(tables, *args)
