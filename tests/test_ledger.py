"""The claims ledger's verdict rules, on small ledgers built by hand."""

from __future__ import annotations

import importlib
import json
import math
import shutil
from pathlib import Path

import pytest

from common.claims.ledger import check_ledger, claim_entry
from common.claims.rules import (
    VERDICTS,
    above_chance,
    interval,
    judge_difference,
    judge_equivalence,
    judge_non_inferiority,
    paired_differences,
    run_above_chance,
    spread,
)
from tests.conftest import ROOT, report_argv, report_results

T_975_DF2 = 4.302652729911275  # Student's t, 97.5% quantile, 2 degrees of freedom (statistical tables)


def test_the_interval_is_the_t_interval_of_the_mean():
    values = [1.0, 2.0, 4.0]
    mean, sd = 7 / 3, math.sqrt(((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2 + (4 - 7 / 3) ** 2) / 2)
    low, high = interval(values)
    assert low == pytest.approx(mean - T_975_DF2 * sd / math.sqrt(3))
    assert high == pytest.approx(mean + T_975_DF2 * sd / math.sqrt(3))


def test_models_at_chance_are_inconclusive_whatever_the_gap():
    # A consistent gap between two models that are both at chance (1 in 32) decides nothing.
    accuracy = {"mixer": [0.032, 0.030, 0.034], "transformer": [0.029, 0.027, 0.031]}
    differences = paired_differences(accuracy["mixer"], accuracy["transformer"])
    assert interval(differences)[0] > 0  # the gap itself is "significant"
    ok = all(above_chance(values, chance=1 / 32) for values in accuracy.values())
    assert not ok
    verdict, why = judge_difference(differences, +1, above_chance_ok=ok)
    assert verdict == "inconclusive" and "chance" in why
    assert above_chance([0.2, 0.25, 0.22], chance=1 / 32)
    assert above_chance([1.2, 1.3, 1.25], 8.3, higher_is_better=False)


def test_an_interval_spanning_zero_is_inconclusive():
    verdict, why = judge_difference([0.05, -0.02, 0.01], -1)
    assert verdict == "inconclusive" and "spans zero" in why


def test_a_failing_positive_control_is_inconclusive():
    verdict, why = judge_difference([-0.3, -0.31, -0.29], -1, control_ok=False)
    assert verdict == "inconclusive" and "control" in why


@pytest.mark.parametrize("judge", [lambda d: judge_difference(d, -1), lambda d: judge_difference(d, +1),
                                   lambda d: judge_equivalence(d, 0.1), lambda d: judge_non_inferiority(d, 0.1)],
                         ids=["smaller", "larger", "equivalent", "non-inferior"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_value_that_is_not_finite_is_inconclusive_never_a_verdict(judge, bad):
    """A diverged seed or a missing score (NaN) made `statistics` raise an AttributeError inside the
    report; compared as NaN, it would have counted as below or above every bound."""
    verdict, why = judge([-0.3, bad, -0.29])
    assert verdict == "inconclusive" and "not finite" in why
    assert all(math.isnan(end) for end in interval([1.0, bad, 2.0]))
    assert not above_chance([0.5, bad, 0.6], chance=0.1)
    assert not above_chance([0.5, bad, 0.6], chance=9.0, higher_is_better=False)
    assert math.isnan(spread([1.0, bad])["mean"]) and math.isnan(spread([1.0, bad])["std"])


def test_an_equivalence_margin_below_zero_is_a_programming_error():
    with pytest.raises(ValueError, match="margin must be at least 0"):
        judge_equivalence([0.0, 0.0, 0.0], margin=-0.1)


def test_the_opposite_direction_is_not_reproduced():
    verdict, _ = judge_difference([0.3, 0.31, 0.29], -1)
    assert verdict == "not reproduced"


def test_direction_and_size_give_reproduced_and_size_alone_differs_gives_direction_reproduced():
    assert judge_difference([-0.3, -0.31, -0.29], -1)[0] == "reproduced"  # no size claimed
    assert judge_difference([-0.3, -0.31, -0.29], -1, paper_effect=-0.25)[0] == "reproduced"
    assert judge_difference([-0.03, -0.031, -0.029], -1, paper_effect=-0.5)[0] == "direction reproduced"


def test_a_claim_of_no_difference_is_judged_against_its_margin():
    assert judge_equivalence([0.01, -0.01, 0.0], margin=0.1)[0] == "reproduced"
    assert judge_equivalence([0.69, 0.7, 0.68], margin=0.1)[0] == "not reproduced"  # "same efficiency", 0.69 apart
    assert judge_equivalence([0.05, 0.2, -0.1], margin=0.1)[0] == "inconclusive"
    assert judge_equivalence([0.01, -0.01, 0.0], margin=0.1, above_chance_ok=False)[0] == "inconclusive"


def test_matches_or_beats_is_one_sided_against_its_margin():
    # mean -0.005, sd 0.005: t(0.975, 2) = 4.303 gives the interval -0.005 +- 0.0124
    assert judge_non_inferiority([-0.01, -0.005, 0.0], margin=0.02)[0] == "reproduced"
    assert judge_non_inferiority([0.3, 0.2, 0.4], margin=0.02)[0] == "reproduced", "beating it is matching or better"
    assert judge_non_inferiority([-0.01, -0.005, 0.0], margin=0.01)[0] == "inconclusive"  # low -0.0174
    assert judge_non_inferiority([-0.3, -0.31, -0.29], margin=0.02)[0] == "not reproduced"
    assert judge_non_inferiority([0.0, 0.0, 0.01], margin=0.02, above_chance_ok=False)[0] == "inconclusive"


def entry(**overrides):
    fields = dict(id="fig4", paper="blackmamba", claim="BlackMamba needs fewer training FLOPs", where="Figure 4",
                  metric="validation loss", profile="tiny", verdict="reproduced", why="by hand",
                  arms={"blackmamba": [0.82, 0.83, 0.82], "mamba": [0.85, 0.85, 0.84]},
                  difference=[-0.03, -0.02, -0.02], chance=8.3)
    return fields | overrides


def test_a_valid_ledger_passes_and_holds_mean_spread_and_interval():
    ledger = [claim_entry(**entry()),
              claim_entry(**entry(id="tab1", trained=False, arms=None, difference=None, chance=None,
                                  verdict="not reproduced", why="counted")),
              claim_entry(**entry(id="fig5", verdict="needs paper scale", why="GPU kernels",
                                  evidence="CPU ms/token, 3 seeds", arms=None, difference=None))]
    check_ledger(ledger)
    first = ledger[0]
    assert first["arms"]["mamba"]["mean"] == pytest.approx(0.8466666, rel=1e-6) and first["arms"]["mamba"]["n"] == 3
    assert first["difference"]["interval"] == pytest.approx(list(interval([-0.03, -0.02, -0.02])))


@pytest.mark.parametrize(("overrides", "problem"), [
    ({"verdict": "partly reproduced"}, "allowed: " + ", ".join(VERDICTS)),
    ({"arms": {"a": [1.0, 2.0]}, "difference": None}, "at least 3 seeds"),
    ({"chance": None}, "chance level or a control"),
    ({"verdict": "needs paper scale"}, "cheapest evidence"),
    ({"why": ""}, "missing why"),
])
def test_invalid_entries_are_refused(overrides, problem):
    with pytest.raises(ValueError, match=problem):
        claim_entry(**entry(**overrides))


def test_fewer_than_three_seeds_give_inconclusive_and_nothing_else():
    # a `paper` run with fewer seeds (or the rehearsal's one) must still write its ledger
    for judged in (judge_difference([-0.3], -1), judge_difference([-0.3, -0.31], -1),
                   judge_equivalence([0.0, 0.01], margin=0.1), judge_non_inferiority([0.2], margin=0.02)):
        assert judged[0] == "inconclusive" and "a verdict needs at least 3" in judged[1]
    one_seed = {"arms": {"a": [1.0], "b": [1.1]}, "difference": [-0.1]}
    assert claim_entry(**entry(**one_seed, verdict="inconclusive"))["difference"]["n"] == 1
    with pytest.raises(ValueError, match="with fewer it is inconclusive"):
        claim_entry(**entry(**one_seed))


def test_claim_ids_are_unique():
    with pytest.raises(ValueError, match="repeat"):
        check_ledger([claim_entry(**entry()), claim_entry(**entry())])


@pytest.mark.parametrize(("accuracy", "trials", "chance"), [(0.586, 256, 1 / 32), (0.039, 256, 1 / 32),
                                                            (0.0625, 256, 1 / 32), (0.6, 10, 0.5)])
def test_one_run_above_chance_is_the_exact_binomial_tail(accuracy, trials, chance):
    """Against the tail summed by hand: P(X >= k) for X ~ Binomial(trials, chance) below 1%."""
    k = round(accuracy * trials)
    tail = sum(math.comb(trials, j) * chance ** j * (1 - chance) ** (trials - j) for j in range(k, trials + 1))
    assert run_above_chance(accuracy, trials, chance) == (tail < 0.01)


def test_readme_tables_render_from_their_results_file_or_from_another_tables(tmp_path):
    from common.eval.report import render

    (tmp_path / "runs.json").write_text('{"profile": "tiny", "n": 3}')
    readme = "a\n<!-- table:runs -->\nold\n<!-- /table -->\nb\n<!-- table:runs_again -->\n<!-- /table -->\n"
    out = render(readme, tmp_path, {"runs": lambda d: f"n = {d['n']}", "runs_again": ("runs", lambda d: "again")},
                 "rerun")
    assert out == ("a\n<!-- table:runs -->\n_Profile `tiny`; generated from `results/runs.json`._\n\nn = 3\n"
                   "<!-- /table -->\nb\n<!-- table:runs_again -->\n_Profile `tiny`; generated from `results/runs.json`."
                   "_\n\nagain\n<!-- /table -->\n")


def test_tables_render_into_the_page_that_holds_each_and_a_table_in_two_pages_is_refused(tmp_path):
    from common.errors import DataError
    from common.eval.report import render_pages

    (tmp_path / "runs.json").write_text('{"profile": "tiny", "n": 3}')
    tables = {"runs": lambda d: f"n = {d['n']}", "runs_again": ("runs", lambda d: "again")}
    readme, docs = Path("README.md"), Path("docs/page.md")
    block, again = "<!-- table:runs -->\n<!-- /table -->\n", "<!-- table:runs_again -->\n<!-- /table -->\n"
    generated = "_Profile `tiny`; generated from `results/runs.json`._\n\n"
    out = render_pages({readme: "a\n" + block, docs: "b\n" + again}, tmp_path, tables, "rerun")
    assert out == {readme: f"a\n<!-- table:runs -->\n{generated}n = 3\n<!-- /table -->\n",
                   docs: f"b\n<!-- table:runs_again -->\n{generated}again\n<!-- /table -->\n"}
    with pytest.raises(DataError, match=r"^table 'runs': a <!-- table:runs --> block in each of README.md and docs/"):
        render_pages({readme: block, docs: again + block}, tmp_path, tables, "rerun")
    with pytest.raises(DataError, match=r"^table 'runs_again': no <!-- table:runs_again --> .* in README.md; put it"):
        render_pages({readme: block}, tmp_path, tables, "rerun")


@pytest.mark.parametrize("paper", ["blackmamba", "manticore", "masked_mixers"])
def test_a_report_over_results_from_two_profiles_is_one_line_and_writes_nothing(paper, tmp_path, capsys):
    # The paper rehearsal found it: Manticore's report, run over paper-profile MAD searches beside
    # tiny-profile results, died on a KeyError deep in one claim.
    module = importlib.import_module(f"papers.{paper}.report")
    results = tmp_path / "results"
    shutil.copytree(ROOT / f"papers/{paper}/results", results)
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / f"papers/{paper}/README.md", readme)
    # The last stage's results (a record of earlier runs spans profiles and is not checked).
    name = next(name for name in reversed(report_results(paper))
                if not json.loads((results / f"{name}.json").read_text()).get("spans_profiles"))
    last = results / f"{name}.json"
    last.write_text(json.dumps({**json.loads(last.read_text()), "profile": "paper"}))
    before = {path: path.read_bytes() for path in [readme, *results.iterdir()]}
    with pytest.raises(SystemExit) as exit_info:
        module.main(report_argv(paper, results, readme))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "different profiles" in err[0] and f"paper: {name}" in err[0], err
    assert {path: path.read_bytes() for path in [readme, *results.iterdir()]} == before
