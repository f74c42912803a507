"""The one builder of every ledger (`common.claims.build`): claims declared as data, checked when
loaded, judged only by the rules, and no verdict written anywhere in a paper's code."""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest
import yaml

from common.claims.build import Evidence, build_ledger, load_spec
from common.claims.rules import VERDICTS
from common.errors import ConfigError
from tests.conftest import ROOT

PAPERS = ("blackmamba", "masked_mixers", "manticore")
MIGRATED = PAPERS


def extractors(**functions) -> types.ModuleType:
    module = types.ModuleType("test_extractors")
    for name, function in functions.items():
        setattr(module, name, function)
    return module


def claim(**fields) -> dict:
    return {"id": "c", "claim": "A beats B", "where": "Table 1", "metric": "loss, B - A", "extract": "numbers",
            "judge": "difference", "sign": 1, "size": "no number in the paper", "seeds": 3, **fields}


def spec_of(*claims: dict) -> dict:
    return {"paper": "p", "results": ["r"], "claims": list(claims)}


def build(spec: dict, evidence: Evidence | dict[str, Evidence], profile: str = "tiny") -> dict[str, dict]:
    by_name = evidence if isinstance(evidence, dict) else {"numbers": evidence}
    module = extractors(**{name: (lambda results, e=e, **args: e) for name, e in by_name.items()})
    return {entry["id"]: entry for entry in build_ledger(spec, {}, module, profile)}


def write(tmp_path: Path, spec: dict) -> Path:
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize(("change", "message"), [
    ({"judge": "vibes"}, "judge 'vibes'; allowed: difference"),
    ({"colour": "red"}, "unknown key(s) colour"),
    ({"sign": 0}, "sign must be +1"),
    ({"size": None}, "says in `size` why it judges direction only"),
    ({"seeds": None}, "declares its `seeds`"),
    ({"control": "later"}, "control 'later' is not a claim declared above it"),
    ({"judge": "equivalence"}, "judge equivalence needs a `margin`"),
    ({"judge": "exact", "reproduced_when": ["x is big"]}, "is not `<fact> <op> <number>`"),
    ({"judge": "needs_paper_scale"}, "gives `why` and the cheapest `evidence`"),
    ({"earlier_run": {"commit": "abc1234", "stage": "s"}}, "gives `why` and the cheapest `evidence`"),
    ({"earlier_run": {"stage": "s"}, "why": "w", "evidence": "e"}, "earlier_run is {commit: <hash>"),
    ({"where": ""}, "missing where"),
])
def test_a_bad_claim_is_one_line_naming_it_and_what_is_allowed(tmp_path, change, message):
    with pytest.raises(ConfigError) as raised:
        load_spec(write(tmp_path, spec_of({**claim(), **change})))
    assert message in str(raised.value) and "claim c" in str(raised.value) and "\n" not in str(raised.value)


def test_a_repeated_id_and_a_file_that_is_not_a_spec_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="the id repeats"):
        load_spec(write(tmp_path, spec_of(claim(), claim())))
    with pytest.raises(ConfigError, match="must hold `paper`"):
        load_spec(write(tmp_path, {"claims": "none"}))
    with pytest.raises(ConfigError, match="no such claims file"):
        load_spec(tmp_path / "absent.yaml")


@pytest.mark.parametrize("paper", PAPERS)
def test_every_paper_spec_loads_and_names_extractors_that_exist(paper):
    spec = load_spec(ROOT / "papers" / paper / "claims.yaml")
    module = importlib.import_module(f"papers.{paper}.evidence")
    assert spec["paper"] == paper
    for entry in spec["claims"]:
        if entry.get("extract"):
            assert callable(getattr(module, entry["extract"], None)), entry["id"]


@pytest.mark.parametrize("paper", PAPERS)
def test_no_paper_module_writes_a_verdict(paper):
    """Verdicts come from the rules only: no string literal in a paper's Python is a verdict class."""
    found = []
    for path in sorted((ROOT / "papers" / paper).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in VERDICTS:
                found.append(f"{path.name}:{node.lineno} {node.value!r}")
    assert not found, found


def test_the_judge_reads_the_evidence_and_fills_the_text_from_its_facts():
    evidence = Evidence(arms={"a": [1.0, 1.1, 1.2], "b": [1.5, 1.6, 1.7]}, difference=[0.5, 0.5, 0.6],
                        chance=5.0, facts={"steps": 600})
    entry = build(spec_of(claim(claim="A beats B ({steps} steps)", metric="loss at step {steps}, B - A")),
                  evidence)["c"]
    assert entry["verdict"] == "reproduced" and entry["metric"] == "loss at step 600, B - A"
    assert entry["claim"] == "A beats B (600 steps)"
    assert "Direction only: no number in the paper" in entry["why"] and entry["margin"] > 0
    assert entry["seeds_declared"] == 3 and entry["arms"]["a"]["n"] == 3
    with pytest.raises(ConfigError, match="names 'epochs', which its extractor does not give"):
        build(spec_of(claim(metric="loss after {epochs}")), evidence)


def test_fewer_seeds_than_declared_decide_nothing_and_only_the_declared_ones_are_read():
    row = build(spec_of(claim(seeds=5)), Evidence(difference=[0.5, 0.5, 0.6], chance=5.0))["c"]
    assert row["verdict"] == "inconclusive" and "3 of the 5 seeds declared" in row["why"]
    # A stage that ran a fourth seed for another claim: this one reads its three, in seed order.
    arms = {"a": [1.0, 1.1, 1.2, 9.0], "b": [1.5, 1.6, 1.8, 1.0]}
    row = build(spec_of(claim()), Evidence(arms=arms, difference=[0.5, 0.5, 0.6, -8.0], changes=[0, 0, 0, 5],
                                           chance=5.0))["c"]
    assert row["verdict"] == "reproduced" and row["difference"]["values"] == [0.5, 0.5, 0.6]
    assert row["arms"]["a"]["values"] == [1.0, 1.1, 1.2]


def test_a_gap_still_closing_is_not_settled_through_the_builder():
    """Per seed the gap is 0.3 and fell 0.2 over the last fifth: one more fifth and it is gone."""
    falling = Evidence(difference=[0.30, 0.31, 0.29], changes=[-0.20, -0.21, -0.19], chance=5.0)
    assert build(spec_of(claim()), falling)["c"]["verdict"] == "inconclusive"
    flat = Evidence(difference=[0.30, 0.31, 0.29], changes=[0.001, -0.002, 0.0], chance=5.0)
    assert build(spec_of(claim()), flat)["c"]["verdict"] == "reproduced"


def test_a_named_control_gates_its_row():
    control = claim(id="control")
    row = claim(id="row", extract="row", control="control")
    spec = spec_of(control, row)
    failed = {"numbers": Evidence(difference=[0.1, -0.1, 0.05], chance=5.0),
              "row": Evidence(difference=[0.5, 0.5, 0.6], chance=5.0)}
    ledger = build(spec, failed)
    assert ledger["control"]["verdict"] == "inconclusive"
    assert ledger["row"]["verdict"] == "inconclusive" and "the control control is inconclusive" in ledger["row"]["why"]
    shown = {**failed, "numbers": Evidence(difference=[0.5, 0.6, 0.55], chance=5.0)}
    assert build(spec, shown)["row"]["verdict"] == "reproduced"


def test_a_computed_check_that_failed_gates_its_row():
    evidence = Evidence(difference=[0.5, 0.5, 0.6], chance=5.0, failure="the retrieval control is at chance")
    row = build(spec_of(claim()), evidence)["c"]
    assert row["verdict"] == "inconclusive" and row["why"].startswith("the retrieval control is at chance")


def test_a_computed_check_is_the_rows_control_unless_the_claim_names_one():
    evidence = Evidence(difference=[0.5, 0.5, 0.6], chance=5.0, control="the retrieval control retrieves")
    assert build(spec_of(claim()), evidence)["c"]["control"] == "the retrieval control retrieves"
    named = build(spec_of(claim(id="first"), claim(control="first")), evidence)
    assert named["c"]["control"] == "first" and named["c"]["verdict"] == "reproduced"


@pytest.mark.parametrize(("parts", "verdict"), [
    ({"x": [0.5, 0.6, 0.55], "y": [0.3, 0.31, 0.32]}, "reproduced"),
    ({"x": [0.5, 0.6, 0.55], "y": [0.3, -0.3, 0.01]}, "inconclusive"),
    ({"x": [0.5, 0.6, 0.55], "y": [-0.3, -0.31, -0.32]}, "not reproduced"),
])
def test_a_row_of_several_comparisons_holds_only_when_each_does(parts, verdict):
    row = build(spec_of(claim()), Evidence(arms=parts, parts=parts, chance=5.0))["c"]
    assert row["verdict"] == verdict
    assert (row["margin"] > 0) == (verdict != "inconclusive")


@pytest.mark.parametrize(("facts", "verdict"), [
    ({"ratio": 0.80}, "reproduced"),
    ({"ratio": 0.90}, "direction reproduced"),
    ({"ratio": 1.00}, "not reproduced"),
])
def test_an_exact_claim_is_judged_on_its_declared_conditions(facts, verdict):
    exact = claim(judge="exact", reproduced_when=["ratio <= 0.85", "ratio >= 0.75"], direction_when=["ratio < 0.98"])
    row = build(spec_of(exact), Evidence(facts=facts))["c"]
    assert row["verdict"] == verdict and row["trained"] is False
    assert f"ratio = {facts['ratio']:.4g}" in row["why"]


def test_a_row_judged_only_at_paper_scale_says_so_elsewhere():
    row = claim(trained=False, judged_at=["paper"], why="overhead dominates", evidence="{speeds} at {profile}")
    evidence = Evidence(difference=[0.5, 0.6, 0.55], facts={"speeds": "a 1.0, b 2.0"})
    tiny = build(spec_of(row), evidence, "tiny")["c"]
    assert tiny["verdict"] == "needs paper scale" and tiny["evidence"] == "a 1.0, b 2.0 at tiny"
    assert build(spec_of(row), evidence, "paper")["c"]["verdict"] == "reproduced"


def test_a_row_whose_stage_trained_nothing_here_reads_its_earlier_run():
    row = claim(earlier_run={"commit": "abc1234", "stage": "s"}, why="needs {earlier_to_decide} seeds",
                evidence="{earlier_verdict} at {earlier_commit}")
    record = {"claims": {"c": {"earlier_to_decide": "more than 10", "earlier_verdict": "inconclusive",
                               "earlier_commit": "abc1234", "earlier_metric": "loss at step 600"}}}
    measured = Evidence(arms={"a": [1.5, 1.6, 1.55], "b": [1.0, 1.0, 1.0]}, difference=[0.5, 0.6, 0.55], chance=5.0)
    module = extractors(numbers=lambda results, **args: measured)
    ran = build_ledger(spec_of(row), {"s": {"models": {"a": {}}}, "earlier_runs": record}, module, "tiny")[0]
    assert ran["verdict"] == "reproduced"
    skipped = build_ledger(spec_of(row), {"s": {"models": {}}, "earlier_runs": record}, module, "tiny")[0]
    assert skipped["verdict"] == "needs paper scale" and skipped["why"] == "needs more than 10 seeds"
    assert skipped["evidence"] == "inconclusive at abc1234" and skipped["metric"] == "loss at step 600"
    one_model = claim(earlier_run={"commit": "abc1234", "stage": "s", "model": "b"}, why="w", evidence="e")
    assert build_ledger(spec_of(one_model), {"s": {"models": {"a": {}}}, "earlier_runs": record}, module,
                        "tiny")[0]["verdict"] == "needs paper scale"
    with pytest.raises(ConfigError, match="python -m common.claims.earlier"):
        build_ledger(spec_of(row), {"s": {"models": {}}}, module, "tiny")
    # A stage whose results list runs or budgets, not models, trained nothing when the list is empty.
    for units in ({"runs": []}, {"budgets": []}, {"tasks": {}}):
        entry = build_ledger(spec_of(row), {"s": units, "earlier_runs": record}, module, "tiny")[0]
        assert entry["verdict"] == "needs paper scale", units


def test_a_claim_this_configuration_did_not_measure_is_inconclusive_and_says_why():
    row = build(spec_of(claim()), Evidence(missing="one MoE layer: no layer is late"))["c"]
    assert row["verdict"] == "inconclusive" and row["why"] == "one MoE layer: no layer is late"


def test_a_detector_that_never_fired_on_its_positive_case_decides_nothing():
    detector = claim(judge="detector", claimed=False, what="loss spike")
    rises = {"rise over the run's minimum": [0.01, 0.02, 0.0]}
    silent = Evidence(arms=rises, fires=[False, False, False], fires_on_positive=False, chance=5.0)
    assert build(spec_of(detector), silent)["c"]["verdict"] == "inconclusive"
    shown = Evidence(arms=rises, fires=[False, False, False], fires_on_positive=True, chance=5.0)
    assert build(spec_of(detector), shown)["c"]["verdict"] == "reproduced"


@pytest.mark.parametrize(("values", "verdict"), [
    ([0.0, 0.01, 0.0], "reproduced"),  # the interval dips below 0, the metric's floor: clipped there
    ([0.05, 0.2, 0.1], "inconclusive"),
    ([0.5, 0.52, 0.51], "not reproduced"),
])
def test_a_value_claimed_near_an_end_of_its_range_is_judged_on_its_clipped_interval(values, verdict):
    near = claim(judge="within", band=[0.0, 0.1], scale=[0.0, 1.0], trained=False)
    row = build(spec_of(near), Evidence(arms={"hamming": values}, difference=values))["c"]
    assert row["verdict"] == verdict


def test_a_size_condition_that_fails_leaves_the_direction():
    sized = claim(size_when=["ahead < 0"])
    evidence = Evidence(difference=[0.5, 0.5, 0.6], chance=5.0, facts={"ahead": 0.2})
    row = build(spec_of(sized), evidence)["c"]
    assert row["verdict"] == "direction reproduced" and "ahead = 0.2 (< 0: fails)" in row["why"]
    evidence.facts["ahead"] = -0.1
    assert build(spec_of(sized), evidence)["c"]["verdict"] == "reproduced"


def test_a_probe_that_can_only_refute_never_confirms_and_one_that_can_only_confirm_never_refutes():
    learns = Evidence(difference=[0.5, 0.5, 0.6], chance=5.0)
    row = build(spec_of(claim(cannot_confirm="no larger batch beside it")), learns)["c"]
    assert row["verdict"] == "inconclusive" and row["why"].startswith("no larger batch beside it")
    falls = Evidence(difference=[-0.5, -0.5, -0.6], chance=5.0)
    assert build(spec_of(claim(cannot_confirm="no larger batch")), falls)["c"]["verdict"] == "not reproduced"
    row = build(spec_of(claim(cannot_refute="the gradients are not logged")), falls)["c"]
    assert row["verdict"] == "inconclusive" and "the gradients are not logged" in row["why"]


def test_a_count_of_other_claims_holds_on_at_least_its_number():
    """"Most tasks" (2 of 3): decided only when the task rows decide it either way."""
    tasks = [claim(id=f"task{i}", extract=f"task{i}") for i in range(3)]
    most = claim(id="most", judge="count", of=["task0", "task1", "task2"], at_least=2, extract=None, trained=False)
    spec = spec_of(*tasks, most)
    win, loss, unsure = ([0.5, 0.6, 0.55], [-0.5, -0.6, -0.55], [0.5, -0.6, 0.1])

    def verdict(*differences):
        evidence = {f"task{i}": Evidence(difference=d, chance=5.0) for i, d in enumerate(differences)}
        return build(spec, evidence)["most"]

    assert verdict(win, win, loss)["verdict"] == "reproduced"
    assert verdict(win, loss, loss)["verdict"] == "not reproduced"
    row = verdict(win, unsure, loss)
    assert row["verdict"] == "inconclusive" and row["why"].startswith("1 of 3 pass, at least 2 needed")


def test_groups_of_parts_pass_when_one_of_their_parts_does():
    """Two of three algorithms, each with two variants: an algorithm passes when one variant does."""
    parts = {"a1": [0.5, 0.6, 0.55], "a2": [-0.5, -0.6, -0.55], "b1": [0.3, 0.31, 0.32], "b2": [0.1, -0.1, 0.0],
             "c1": [-0.3, -0.31, -0.32], "c2": [-0.5, -0.6, -0.55]}
    groups = {"a": ["a1", "a2"], "b": ["b1", "b2"], "c": ["c1", "c2"]}
    row = build(spec_of(claim(at_least=2)), Evidence(arms=parts, parts=parts, groups=groups, chance=5.0))["c"]
    assert row["verdict"] == "reproduced" and row["why"].startswith("2 of 3 pass, at least 2 needed")
    parts["b1"] = [0.1, -0.1, 0.0]
    assert build(spec_of(claim(at_least=2)), Evidence(arms=parts, parts=parts, groups=groups,
                                                       chance=5.0))["c"]["verdict"] == "inconclusive"
    parts["b1"] = parts["b2"] = [-0.3, -0.31, -0.32]
    assert build(spec_of(claim(at_least=2)), Evidence(arms=parts, parts=parts, groups=groups,
                                                       chance=5.0))["c"]["verdict"] == "not reproduced"


def test_counted_outcomes_of_grouped_parts_decide_per_part_then_per_group():
    """k_of_n over parts: each part's hits counted by the exact binomial test (6 of 6 decides at share
    1/2, 5 of 6 does not: P(X >= 5) = 7/64), then two of three groups needed; fewer seeds than
    declared decide nothing."""
    counted = claim(judge="k_of_n", share=0.5, at_least=2, seeds=6, chance=0.5)
    parts = {"a1": [1, 1, 1, 1, 1, 1], "a2": [0, 1, 0, 0, 1, 0], "b1": [1, 1, 1, 1, 1, 0], "b2": [1, 1, 1, 1, 1, 1],
             "c1": [0, 0, 0, 0, 0, 0], "c2": [0, 1, 0, 0, 0, 0]}
    groups = {"a": ["a1", "a2"], "b": ["b1", "b2"], "c": ["c1", "c2"]}
    row = build(spec_of(counted), Evidence(arms={"searched": [2.0] * 6}, parts=parts, groups=groups))["c"]
    assert row["verdict"] == "reproduced" and row["why"].startswith("2 of 3 pass, at least 2 needed")
    parts["b2"] = [1, 1, 1, 1, 1, 0]
    six = {"searched": [2.0] * 6}
    assert build(spec_of(counted), Evidence(arms=six, parts=parts, groups=groups))["c"]["verdict"] == "inconclusive"
    parts["b1"] = parts["b2"] = parts["c2"] = [0, 0, 0, 0, 0, 0]  # b and c fail: 0 of 6 rejects 1/2 or more
    assert build(spec_of(counted), Evidence(arms=six, parts=parts, groups=groups))["c"]["verdict"] == "not reproduced"
    three = {name: [1, 1, 1] for name in parts}
    row = build(spec_of(counted), Evidence(arms={"searched": [2.0] * 3}, parts=three, groups=groups))["c"]
    assert row["verdict"] == "inconclusive" and "a unanimous count decides from 6 seeds" in row["why"]
    at_chance = build(spec_of(counted), Evidence(arms=six, parts={**parts, "b1": [1] * 6, "b2": [1] * 6},
                                                 groups=groups, learned=False))["c"]
    assert at_chance["verdict"] == "inconclusive" and at_chance["why"].startswith("a model is not measurably above")


def test_a_count_of_outcomes_decides_nothing_when_a_model_sits_at_chance():
    counted = claim(judge="k_of_n", share=0.5, seeds=6, chance=0.5)
    six = {"outcome": [1.0] * 6}
    assert build(spec_of(counted), Evidence(arms=six, hits=6, n=6))["c"]["verdict"] == "reproduced"
    row = build(spec_of(counted), Evidence(arms=six, hits=6, n=6, learned=False))["c"]
    assert row["verdict"] == "inconclusive" and "the rules alone would say reproduced" in row["why"]


def test_a_claim_scoped_to_other_profiles_has_no_row_here():
    scoped = claim(profiles=["paper"])
    evidence = Evidence(difference=[0.5, 0.5, 0.6], chance=5.0)
    assert build(spec_of(scoped), evidence, "tiny") == {}
    assert build(spec_of(scoped), evidence, "paper")["c"]["verdict"] == "reproduced"


def test_a_learning_rate_check_names_the_model_that_does_better_elsewhere():
    """Worked by hand: the mixer's own rate (0.002, loss 3.0) beats 0.001 (3.2) and 0.004 (3.1); the
    transformer's own 0.002 (3.5) loses to 0.004 (3.4) by 0.1, more than its seeds' spread of 0.05.
    A model the check did not train is said unchecked, a check of another rate asks for a rerun,
    and no rates gate nothing."""
    from common.claims.build import learning_rates

    check = {"seed": 0, "rates": [0.001, 0.002, 0.004], "own_lr": {"mixer": 0.002, "transformer": 0.002},
             "final_val_loss": {"mixer": {"0.001": 3.2, "0.004": 3.1}, "transformer": {"0.001": 3.6, "0.004": 3.4}}}
    spread = {"mixer": 0.05, "transformer": 0.05, "variant": 0.05}
    said, failure = learning_rates(check, {"mixer": 0.002}, {"mixer": 3.0}, spread)
    assert said == "mixer at lr 0.002, each its best of 0.001, 0.002, 0.004 at seed 0" and failure is None
    said, failure = learning_rates(check, {"mixer": 0.002, "transformer": 0.002}, {"mixer": 3.0, "transformer": 3.5},
                                   spread)
    assert failure == ("transformer does better at lr 0.004 than at its 0.002 (by 0.1, more than its seeds' spread "
                       "0.05) (lr_check)")
    said, failure = learning_rates(check, {"mixer": 0.002, "variant": 0.002}, {"mixer": 3.0, "variant": 3.3}, spread)
    assert said.endswith("; variant unchecked") and failure is None
    assert "rerun it" in learning_rates(check, {"mixer": 0.004}, {"mixer": 3.0}, spread)[1]
    assert learning_rates({**check, "rates": []}, {"mixer": 0.002}, {"mixer": 3.0}, spread) == (
        "mixer at lr 0.002, rates unchecked", None)


def test_a_lower_loss_at_another_rate_within_the_seeds_spread_is_said_and_gates_nothing():
    """One seed at another rate: the transformer's 3.4 at 0.004 is 0.1 below its own 3.5, less than
    the 0.2 (or 0.15) its seeds spread at its own rate."""
    from common.claims.build import learning_rates

    check = {"seed": 0, "rates": [0.001, 0.002, 0.004], "own_lr": {"transformer": 0.002},
             "final_val_loss": {"transformer": {"0.001": 3.6, "0.004": 3.4}}}
    for std in (0.2, 0.15):
        said, failure = learning_rates(check, {"transformer": 0.002}, {"transformer": 3.5}, {"transformer": std})
        assert failure is None
        assert said.endswith(f"(lower but not better: transformer at lr 0.004 by 0.1, within its seeds' spread "
                             f"{std:g})")
