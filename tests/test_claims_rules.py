"""The one judge's rules that the ledgers' audit found missing or wrong, each on the case that
exposed it: settling on the paired gap, the control gate, the size rule, counts over seeds,
detectors and margins. Expected verdicts are worked out by hand from the numbers."""

from __future__ import annotations

import math

import pytest

from common.claims.ledger import claim_entry, claims_table, format_margin
from common.claims.rules import (
    boundaries,
    gap_changes,
    gate,
    judge_detector,
    judge_difference,
    judge_equivalence,
    judge_k_of_n,
    margin,
    seeds_to_decide,
    settle,
)

STEPS = [120, 300, 420, 480, 600]


def curves(values_per_seed):
    return [list(zip(STEPS, values)) for values in values_per_seed]


def test_a_flat_gap_between_falling_curves_settles():
    """`tab-s5-two-heads-slightly-better`: both models still fall 0.12 over the last fifth, but their
    gap sits near -0.1 in every seed; the old rule (each model's own fall) called it unsettled."""
    b = [[3.0, 2.2, 1.9, 1.78, 1.66], [3.1, 2.3, 2.0, 1.88, 1.76], [2.9, 2.1, 1.8, 1.68, 1.56]]
    gaps = [[-0.1, -0.09, -0.1, -0.087, -0.0867], [-0.11, -0.12, -0.1, -0.115, -0.115],
            [-0.1, -0.1, -0.11, -0.108, -0.107]]
    a = [[x + g for x, g in zip(xs, gs)] for xs, gs in zip(b, gaps)]
    changes = gap_changes(curves(a), curves(b))
    assert changes == pytest.approx([-0.0867 + 0.087, -0.115 + 0.115, -0.107 + 0.108])
    differences = [seed[-1] for seed in gaps]
    judge = lambda d: judge_difference(d, -1)  # noqa: E731
    judged = judge(differences)
    assert judged[0] == "reproduced"
    assert settle(judged, judge, differences, changes) == judged


def test_a_closing_gap_does_not_settle():
    """`clm-transfixer-vs-llama`: the gap went 1.33, 0.60, 0.31, 0.24, 0.177 over steps 120-600, so
    it closed 0.063 over the last fifth; five more fifths at that rate cross zero (0.177 - 0.315)."""
    llama = [[4.0, 3.0, 2.5, 2.3, 2.1], [4.1, 3.1, 2.6, 2.4, 2.2], [3.9, 2.9, 2.4, 2.2, 2.0]]
    gaps = [[1.33, 0.60, 0.31, 0.24, 0.177], [1.30, 0.62, 0.30, 0.25, 0.19], [1.35, 0.58, 0.32, 0.23, 0.165]]
    hybrid = [[x + g for x, g in zip(xs, gs)] for xs, gs in zip(llama, gaps)]
    changes = gap_changes(curves(hybrid), curves(llama))
    assert changes == pytest.approx([-0.063, -0.06, -0.065])
    differences = [seed[-1] for seed in gaps]
    judge = lambda d: judge_difference(d, -1)  # noqa: E731  (the paper: the hybrid's loss is lower)
    judged = judge(differences)
    assert judged[0] == "not reproduced"
    verdict, why = settle(judged, judge, differences, changes)
    assert verdict == "inconclusive" and why.startswith("still moving") and "not reproduced" in why
    # The same gap, not moving: the verdict stands.
    assert settle(judged, judge, differences, [0.01, -0.01, 0.002]) == judged


def test_an_equivalence_row_whose_gap_moves_does_not_settle():
    """A claim of no difference within +-0.05: the gap 0.12 lies outside the margin today, but it
    fell about 0.03 over the last fifth in every seed, so one more run would bring it inside."""
    judge = lambda d: judge_equivalence(d, 0.05)  # noqa: E731
    differences = [0.12, 0.125, 0.118]
    judged = judge(differences)
    assert judged[0] == "not reproduced"
    verdict, why = settle(judged, judge, differences, [-0.03, -0.031, -0.029])
    assert verdict == "inconclusive" and "still moving" in why
    # Moving away from the margin: one more run leaves it outside, and the verdict stands.
    assert settle(judged, judge, differences, [0.03, 0.031, 0.029]) == judged


def test_a_named_control_that_fails_gates_its_row():
    judged = judge_difference([0.3, 0.31, 0.29], +1)
    assert judged[0] == "reproduced"
    verdict, why = gate(judged, "fig4-flops-vs-mamba_dense_mlp", "inconclusive")
    assert verdict == "inconclusive" and "fig4-flops-vs-mamba_dense_mlp is inconclusive" in why
    assert gate(judged, "c", "not reproduced")[0] == "inconclusive"
    assert gate(judged, "c", "reproduced") == judged and gate(judged, "c", "direction reproduced") == judged


def test_a_wide_interval_around_the_paper_effect_does_not_upgrade_a_verdict():
    """`sec3-4-softmax-mixer-much-worse`: mean 0.68 against the paper's 0.43 is outside a 50% size
    tolerance; its interval [0.37, 0.99] holds 0.43, which used to earn `reproduced`."""
    wide = [0.55, 0.68, 0.81]
    narrow = [0.67, 0.68, 0.69]
    assert judge_difference(wide, +1, paper_effect=0.43)[0] == "direction reproduced"
    assert judge_difference(narrow, +1, paper_effect=0.43)[0] == "direction reproduced"
    assert judge_difference([0.5, 0.52, 0.48], +1, paper_effect=0.43)[0] == "reproduced"


def spikes(curve, rise=None):
    """A rise of the loss by `rise` (ln 2 unless given) over its lowest so far: the detector the
    tests below feed."""
    rise = math.log(2) if rise is None else rise
    lowest = math.inf
    for value in curve:
        if value - lowest >= rise:
            return True
        lowest = min(lowest, value)
    return False


def test_a_detector_that_cannot_fire_on_its_positive_case_decides_nothing():
    calm = [[3.0, 2.5, 2.2, 2.0], [3.1, 2.6, 2.2, 2.1], [2.9, 2.4, 2.3, 2.0]]
    constructed_spike = [3.0, 2.0, 1.5, 2.5, 1.4]
    assert spikes(constructed_spike)
    fired = [spikes(c) for c in calm]
    assert judge_detector(fired, claimed=False, fires_on_positive=spikes(constructed_spike),
                          what="loss spike")[0] == "reproduced"
    # A detector too blunt to see the constructed spike: its silence on the runs says nothing.
    blunt = lambda c: spikes(c, rise=5.0)  # noqa: E731
    verdict, why = judge_detector([blunt(c) for c in calm], claimed=False,
                                  fires_on_positive=blunt(constructed_spike), what="loss spike")
    assert verdict == "inconclusive" and "positive case" in why
    assert judge_detector([False, True, False], claimed=False, fires_on_positive=True, what="spike")[0] == \
        "not reproduced"


def test_a_count_over_seeds_decides_only_with_enough_seeds():
    """Bimodal outcomes (Manticore's searches) are counted, not averaged: 3 of 3 seeds cannot tell a
    rate above one half from one below at the 2.5% level (1/8); 6 of 6 can (1/64)."""
    assert judge_k_of_n(3, 3)[0] == "inconclusive" and "from 6 seeds" in judge_k_of_n(3, 3)[1]
    assert judge_k_of_n(6, 6)[0] == "reproduced" and judge_k_of_n(0, 6)[0] == "not reproduced"
    assert judge_k_of_n(5, 6)[0] == "inconclusive"  # P(X >= 5 | 1/2) = 7/64
    assert seeds_to_decide(0.5) == 6 and seeds_to_decide(0.8) == 17
    with pytest.raises(ValueError):
        judge_k_of_n(4, 3)


def test_the_margin_is_the_distance_to_the_nearest_boundary_in_half_widths():
    assert margin(0.2, 0.6, boundaries("difference")) == pytest.approx(0.2 / 0.2)
    assert margin(-0.003, 0.187, boundaries("difference")) == pytest.approx(-0.003 / 0.095)  # the knife edge
    assert margin(-0.01, 0.01, boundaries("equivalence", 0.05)) == pytest.approx(0.04 / 0.01)
    assert margin(0.03, 0.07, boundaries("equivalence", 0.05)) == pytest.approx(-0.02 / 0.02)
    assert margin(-0.02, 0.1, boundaries("non_inferiority", 0.05)) == pytest.approx(0.03 / 0.06)
    assert margin(-math.inf, math.inf, (0.0,)) is None
    entry = claim_entry(id="a", paper="p", claim="A beats B", where="T1", metric="loss", profile="tiny",
                        verdict="reproduced", why="w", difference=[0.3, 0.32, 0.31], chance=5.0)
    low, high = entry["difference"]["interval"]
    assert entry["margin"] == pytest.approx(low / ((high - low) / 2))
    edge = dict(entry, margin=0.2)
    assert format_margin(edge) == "+0.20 (knife edge)"
    assert "| margin |" in claims_table({"claims": [entry]}) and f"{entry['margin']:+.2f}" in \
        claims_table({"claims": [entry]})


def test_a_gap_growing_the_papers_way_stays_settled_whatever_its_size_does():
    """The gap 0.5 grows 0.1 a fifth: one more run makes it 1.0, past a 50% size tolerance around the
    paper's 0.45, but the direction has settled, and only a move across a boundary unsettles a row."""
    judge = lambda d: judge_difference(d, +1, paper_effect=0.45)  # noqa: E731
    differences = [0.5, 0.52, 0.48]
    judged = judge(differences)
    assert judged[0] == "reproduced" and judge([d + 0.5 for d in differences])[0] == "direction reproduced"
    assert settle(judged, judge, differences, [0.1, 0.11, 0.09]) == judged


def test_a_gap_whose_curve_has_one_point_cannot_settle():
    """A `smoke` run logs one validation: no change of the gap can be read, so nothing is decided."""
    changes = gap_changes([[(8, 2.0)], [(4, 2.5), (8, 2.1)]], [[(8, 2.5)], [(4, 3.0), (8, 2.6)]])
    assert math.isnan(changes[0]) and changes[1] == pytest.approx(0.0)
    judge = lambda d: judge_difference(d, -1)  # noqa: E731
    verdict, why = settle(judge([-0.5, -0.5, -0.51]), judge, [-0.5, -0.5, -0.51], [*changes, 0.0])
    assert verdict == "inconclusive" and "fewer than two points" in why


@pytest.mark.parametrize(("std", "distance"), [(0.038, 0.092), (0.13, 0.15), (0.2, 0.03), (0.0, 0.01), (0.1, 1.0)])
def test_the_seeds_to_decide_are_the_fewest_whose_interval_clears_the_boundary(std, distance):
    """Brute force over seed counts: the t-interval half-width at n seeds, against the distance."""
    import math

    from scipy import stats

    from common.claims.rules import MIN_SEEDS, SEED_CAP, seeds_to_separate

    def clears(n):
        return stats.t.ppf(0.975, n - 1) * std / math.sqrt(n) < distance

    enough = [n for n in range(MIN_SEEDS, SEED_CAP + 1) if clears(n)]
    assert seeds_to_separate(std, distance) == (enough[0] if enough else None)
    if enough and enough[0] > MIN_SEEDS:
        assert not clears(enough[0] - 1)


def test_the_seed_table_reads_the_distance_to_the_boundary_from_the_ledger():
    """An interval [0.0, 0.2] (mean 0.1, half-width 0.1) with margin -1 has its boundary at the
    mean: no count of seeds separates it; with margin +1 the boundary is 0.2 from the mean."""
    from common.claims.seeds import sized

    entry = {"trained": True, "why": "spans zero", "margin": -1.0,
             "difference": {"interval": [0.0, 0.2], "std": 0.05, "n": 3}}
    assert sized(entry) is None
    assert sized({**entry, "margin": 1.0}) == 3
    assert sized({**entry, "why": "a model is not measurably above chance"}) == "-"


def test_an_interval_spanning_zero_says_how_many_seeds_would_decide_it():
    # mean 0.1, sd 0.1 (by hand): at n seeds the half-width is t(n-1) * 0.1 / sqrt(n); it first falls
    # below 0.1 at n = 7 (t(6) = 2.447: 0.0925), not at n = 6 (t(5) = 2.571: 0.105)
    verdict, why = judge_difference([0.0, 0.1, 0.2], +1)
    assert verdict == "inconclusive" and why.endswith("at this mean and spread 7 seeds would decide it "
                                                      "(`python -m common.claims.seeds`)")
    verdict, why = judge_difference([0.1, -0.1, 0.0], +1)  # mean 0: no count of seeds separates it
    assert verdict == "inconclusive" and "no count up to 10 seeds would decide it: not worth more seeds here" in why
