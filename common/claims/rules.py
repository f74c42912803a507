"""The one judge's rules. Every verdict of every ledger comes from the functions here; a paper's code
extracts numbers and hands them over, and never sets or overrides a verdict.

A trained comparison is judged on the t-interval of the per-seed paired difference (ours minus the
comparison), in this order:

1. `inconclusive` when fewer than `MIN_SEEDS` seeds, a value that is not finite, a model not
   measurably above chance, or a positive control that failed: the experiment cannot tell the
   models apart, so neither "reproduced" nor "not reproduced" is earned.
2. The judge on the interval. `judge_difference` (a claimed sign): `inconclusive` when the interval
   spans zero, `not reproduced` when it excludes zero on the opposite side; on the paper's side,
   `reproduced` when the paper's size is not comparable with ours (the row judges direction only)
   or our mean is within `size_tolerance` of it in the same unit, else `direction reproduced` when
   every seed points the paper's way. A wider interval never upgrades a verdict: the size is judged
   on the mean, never on "the interval holds the paper's effect". `judge_equivalence` (no
   difference, within a margin) and `judge_non_inferiority` ("matches or beats", one-sided).
3. `settle`: a decided verdict stands only if the gap has settled. Each seed's change of the gap over
   the last fifth of its curve (`gap_changes`) has its own interval; when that interval excludes zero
   and the same judge, given the gaps projected one more run length ahead at that rate, would decide
   otherwise (another side of a boundary; the two size classes on the paper's side count as one),
   the row is `inconclusive` (still moving). Each model's own fall does not matter: two curves that
   fall together leave a settled gap.
4. `gate`: a named control gates its row; unless it is reproduced (or its direction is), a decided
   row is `inconclusive`. `require` does the same for a computed check (a precondition of the
   experiment that failed). A comparison that only gives context is not a control.

A value claimed to lie in a band (`judge_within`: "near 0") is judged on its interval, clipped to
the metric's range. Outcomes counted over seeds (`judge_k_of_n`) use an exact binomial test, so that
a bimodal outcome is judged as the count it is. A detector (`judge_detector`: a loss spike, an imbalance) decides only
when it fired on a constructed positive case. `margin` says how far a decided interval lies from the
nearest decision boundary, in units of its half-width, so that knife edges show.

`needs paper scale` is never computed: a claim states it, with why and the cheapest evidence.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any, Literal

from scipy import stats

VERDICTS = ("reproduced", "direction reproduced", "not reproduced", "inconclusive", "needs paper scale")
MIN_SEEDS = 3
LEVEL = 0.95
LATE_FRACTION = 0.2  # the settling rule's window: the last fifth of a curve
HORIZON = 1 / LATE_FRACTION  # ... projected over one more run of the same length
PASSING = ("reproduced", "direction reproduced")  # a control in one of these has shown its effect
SEED_CAP = 10  # the most seeds a claim declares at `tiny`: a claim that needs more is not worth the CPU there

Verdict = Literal["reproduced", "direction reproduced", "not reproduced", "inconclusive", "needs paper scale"]
Judgement = tuple[Verdict, str]


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Mean, sample standard deviation (0 for one value), count and the values themselves; a value
    that is not finite (a diverged run, a missing score) makes the mean and the std NaN."""
    values = [float(v) for v in values]
    if not all(map(math.isfinite, values)):
        return {"mean": math.nan, "std": math.nan, "n": len(values), "values": values}
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "n": len(values), "values": values}


def interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """Two-sided t-interval of the mean of `values` (independent draws, e.g. one per seed); NaN at
    both ends when a value is not finite, so that no comparison with it holds."""
    n = len(values)
    if not all(math.isfinite(float(v)) for v in values):
        return (math.nan, math.nan)
    if n < 2:
        return (-math.inf, math.inf)
    mean, sd = statistics.fmean(values), statistics.stdev(values)
    half = stats.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return (mean - half, mean + half)


def paired_differences(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """a - b per seed; both arms must hold one value per seed, in the same seed order."""
    if len(a) != len(b):
        raise ValueError(f"paired arms need one value per seed each, got {len(a)} and {len(b)}")
    return [float(x) - float(y) for x, y in zip(a, b)]


def above_chance(values: Sequence[float], chance: float, higher_is_better: bool = True) -> bool:
    """Measurably better than `chance`: the interval of the mean excludes it on the good side."""
    low, high = interval(values)
    return low > chance if higher_is_better else high < chance


def run_above_chance(accuracy: float, trials: int, chance: float, alpha: float = 0.01) -> bool:
    """One run's accuracy over `trials` independent trials measurably above `chance`: the exact
    one-sided binomial test rejects chance at `alpha`. For single runs (a sizing curve), not for
    claims, which need seeds."""
    return stats.binomtest(round(accuracy * trials), trials, chance, alternative="greater").pvalue < alpha


def _undecidable(differences: Sequence[float], above_chance_ok: bool,
                 control_ok: bool | None) -> Judgement | None:
    """`inconclusive` and why, when the experiment cannot decide whatever the difference; else None."""
    if len(differences) < MIN_SEEDS:  # a `paper` run with fewer seeds, or the rehearsal's one
        return "inconclusive", f"{len(differences)} seed(s); a verdict needs at least {MIN_SEEDS}"
    if not all(math.isfinite(float(d)) for d in differences):
        return "inconclusive", "a seed's value is not finite (a diverged run or a missing score)"
    if not above_chance_ok:
        return "inconclusive", "a model is not measurably above chance"
    if control_ok is False:
        return "inconclusive", "the positive control failed"
    return None


def judge_difference(differences: Sequence[float], claimed_sign: Literal[1, -1], *,
                     above_chance_ok: bool = True, control_ok: bool | None = None,
                     paper_effect: float | None = None, size_tolerance: float = 0.5) -> Judgement:
    """The verdict on a claim that a difference (per seed, ours minus the comparison) has sign
    `claimed_sign` (+1: larger, -1: smaller) and, where the paper's size is comparable with ours (in
    the same unit: pass None where it is not, and the row judges direction only), size about
    `paper_effect`; with why."""
    if (undecidable := _undecidable(differences, above_chance_ok, control_ok)) is not None:
        return undecidable
    low, high = interval(differences)
    if low <= 0 <= high:
        return "inconclusive", (f"the {LEVEL:.0%} interval of the difference [{low:.4g}, {high:.4g}] spans zero; "
                                f"{_seeds_needed(differences)}")
    if (low > 0) != (claimed_sign > 0):
        return "not reproduced", f"the interval [{low:.4g}, {high:.4g}] excludes zero on the opposite side"
    mean = statistics.fmean(differences)
    if paper_effect is None:
        return "reproduced", f"the interval [{low:.4g}, {high:.4g}] excludes zero on the paper's side"
    if abs(mean - paper_effect) <= size_tolerance * abs(paper_effect):
        return "reproduced", (f"the interval [{low:.4g}, {high:.4g}] excludes zero on the paper's side, and the "
                              f"mean {mean:.4g} is within {size_tolerance:.0%} of the paper's {paper_effect:.4g}")
    if all((d > 0) == (claimed_sign > 0) and d != 0 for d in differences):
        return "direction reproduced", (f"every seed points the paper's way, but the mean {mean:.4g} is not within "
                                        f"{size_tolerance:.0%} of the paper's {paper_effect:.4g}")
    return "inconclusive", "the interval excludes zero, but not every seed points the paper's way"


def judge_equivalence(differences: Sequence[float], margin: float, *, above_chance_ok: bool = True,
                      control_ok: bool | None = None) -> Judgement:
    """The verdict on a claim of no difference, within +-`margin`; with why."""
    if margin < 0:
        raise ValueError(f"an equivalence margin must be at least 0, got {margin}")
    if (undecidable := _undecidable(differences, above_chance_ok, control_ok)) is not None:
        return undecidable
    low, high = interval(differences)
    if -margin <= low and high <= margin:
        return "reproduced", f"the interval [{low:.4g}, {high:.4g}] lies within +-{margin:g}"
    if low > margin or high < -margin:
        return "not reproduced", f"the interval [{low:.4g}, {high:.4g}] lies outside +-{margin:g}"
    return "inconclusive", f"the interval [{low:.4g}, {high:.4g}] crosses the margin +-{margin:g}"


def judge_non_inferiority(differences: Sequence[float], margin: float, *, above_chance_ok: bool = True,
                          control_ok: bool | None = None) -> Judgement:
    """The verdict on a claim that ours "matches or beats" a reference: per-seed differences (ours'
    advantage, positive when ours is better) no worse than -`margin`; with why."""
    if (undecidable := _undecidable(differences, above_chance_ok, control_ok)) is not None:
        return undecidable
    low, high = interval(differences)
    if low > -margin:
        return "reproduced", f"the interval [{low:.4g}, {high:.4g}] lies above -{margin:.4g}"
    if high < -margin:
        return "not reproduced", f"the interval [{low:.4g}, {high:.4g}] lies below -{margin:.4g}"
    return "inconclusive", f"the interval [{low:.4g}, {high:.4g}] crosses -{margin:.4g}"


def judge_within(values: Sequence[float], band: tuple[float, float],
                 scale: tuple[float, float] = (-math.inf, math.inf)) -> Judgement:
    """The verdict on a claim that a measured value lies in `band` ("near 0" on a metric of [0, 1]),
    from its values over seeds: their interval, clipped to the metric's `scale`, within the band,
    wholly outside it, or across its edge (`inconclusive`)."""
    if (undecidable := _undecidable(values, True, None)) is not None:
        return undecidable
    low, high = clipped_interval(values, scale)
    if band[0] <= low and high <= band[1]:
        return "reproduced", f"the interval [{low:.3g}, {high:.3g}] lies within [{band[0]:g}, {band[1]:g}]"
    if high < band[0] or low > band[1]:
        return "not reproduced", f"the interval [{low:.3g}, {high:.3g}] lies outside [{band[0]:g}, {band[1]:g}]"
    return "inconclusive", f"the interval [{low:.3g}, {high:.3g}] crosses an edge of [{band[0]:g}, {band[1]:g}]"


def clipped_interval(values: Sequence[float], scale: tuple[float, float]) -> tuple[float, float]:
    """The interval of the mean of `values`, within the metric's range `scale`."""
    low, high = interval(values)
    return max(low, scale[0]), min(high, scale[1])


# ---------------------------------------------------------------------------------------------
# Settling, controls, counts, detectors, margins


def gap_changes(curves_a: Sequence[Sequence[Sequence[float]]], curves_b: Sequence[Sequence[Sequence[float]]],
                fraction: float = LATE_FRACTION) -> list[float]:
    """Per seed, how much the gap a - b changed over the last `fraction` of its curve: curves are
    `[(step, value), ...]`, one per seed and arm, and the gap is read at the steps both arms logged,
    from the last such step at or before `(1 - fraction)` of the final one (the first, if none);
    NaN for a seed whose arms share fewer than two steps."""
    if len(curves_a) != len(curves_b):
        raise ValueError(f"paired curves need one per seed each, got {len(curves_a)} and {len(curves_b)}")
    changes = []
    for a, b in zip(curves_a, curves_b):
        a = dict(a)
        gaps = sorted((step, a[step] - value) for step, value in b if step in a)
        if len(gaps) < 2:  # a curve of one point (a `smoke` run): no change can be read
            changes.append(math.nan)
            continue
        final_step, final_gap = gaps[-1]
        then = next((gap for step, gap in reversed(gaps) if step <= (1 - fraction) * final_step), gaps[0][1])
        changes.append(final_gap - then)
    return changes


def settle(judgement: Judgement, judge: Callable[[list[float]], Judgement], differences: Sequence[float],
           changes: Sequence[float]) -> Judgement:
    """`judgement` (what `judge` said of `differences`), unless the gap is still moving: the interval
    of its per-seed `changes` over the last fifth excludes zero, and `judge` on the gaps projected
    at that rate, a fifth at a time up to one more run length, gives another decision somewhere.
    Then `inconclusive`."""
    verdict, why = judgement
    if verdict in ("inconclusive", "needs paper scale"):
        return judgement
    if not all(math.isfinite(c) for c in changes):
        return "inconclusive", f"a gap's curve has fewer than two points, so whether it settled cannot be read; {why}"
    low, high = interval(changes)
    if not (low > 0 or high < 0):
        return judgement
    # Size classes on the paper's side (reproduced, direction reproduced) are one decision here: a
    # gap that grows the paper's way has settled its direction, whatever its size does next. Each
    # fifth is checked, so that a gap that would cross a margin band whole still counts as moving.
    for fifths in range(1, round(HORIZON) + 1):
        later, _ = judge([d + fifths * c for d, c in zip(differences, changes)])
        if later != verdict and not {later, verdict} <= set(PASSING):
            return "inconclusive", (f"still moving: the gap changed by {statistics.fmean(changes):+.3g} over the last "
                                    f"fifth (interval [{low:.3g}, {high:.3g}]), and {fifths} more fifth(s) at that "
                                    f"rate would make it {later}; the rules alone say {verdict}: {why}")
    return judgement


def require(judgement: Judgement, failure: str | None) -> Judgement:
    """A row gated by a computed check (a precondition of the experiment): decided only when the
    check found no `failure` (None), else `inconclusive` with the failure and what the rules said."""
    verdict, why = judgement
    if failure is None or verdict in ("inconclusive", "needs paper scale"):
        return judgement
    return "inconclusive", f"{failure}; the rules alone would say {verdict}: {why}"


def gate(judgement: Judgement, control: str, control_verdict: str) -> Judgement:
    """A row gated by its named control (another claim): decided only when the control has shown its
    effect."""
    return require(judgement, None if control_verdict in PASSING else f"the control {control} is {control_verdict}")


def seeds_to_separate(std: float, distance: float, level: float = LEVEL, cap: int = SEED_CAP) -> int | None:
    """The fewest seeds (from MIN_SEEDS to `cap`) whose t-interval, at the measured spread `std`, would
    lie wholly on one side of a boundary `distance` from the mean: the seed count a claim declares for
    its next run. None when even `cap` seeds would not separate them."""
    for n in range(MIN_SEEDS, cap + 1):
        if stats.t.ppf(0.5 + level / 2, n - 1) * std / math.sqrt(n) < distance:
            return n
    return None


def _seeds_needed(differences: Sequence[float]) -> str:
    """What more seeds would buy an interval that spans zero, were its mean and spread to hold; a row
    that would need more than SEED_CAP says it is not worth them."""
    need = seeds_to_separate(statistics.stdev(differences), abs(statistics.fmean(differences)))
    if need is None:
        return f"at this mean and spread no count up to {SEED_CAP} seeds would decide it: not worth more seeds here"
    return f"at this mean and spread {need} seeds would decide it (`python -m common.claims.seeds`)"


def seeds_to_decide(share: float, level: float = LEVEL) -> int:
    """The fewest seeds with which a unanimous count can decide a claim about `share` (see below)."""
    return math.ceil(math.log((1 - level) / 2) / math.log(max(share, 1 - share)))


def judge_k_of_n(hits: int, n: int, share: float = 0.5, level: float = LEVEL) -> Judgement:
    """A claim that an outcome happens in more than `share` of runs ("most seeds land there"), from
    `hits` of `n` seeds: `reproduced` when the exact one-sided binomial test rejects a rate of at most
    `share` at (1 - level) / 2, `not reproduced` when it rejects a rate of at least `share`, else
    `inconclusive`, with how many seeds a unanimous count would need."""
    if not 0 <= hits <= n:
        raise ValueError(f"hits must be between 0 and n={n}, got {hits}")
    alpha = (1 - level) / 2
    if stats.binomtest(hits, n, share, alternative="greater").pvalue < alpha:
        return "reproduced", f"{hits} of {n} seeds: more than {share:.0%} (exact binomial test at {alpha:g})"
    if stats.binomtest(hits, n, share, alternative="less").pvalue < alpha:
        return "not reproduced", f"{hits} of {n} seeds: fewer than {share:.0%} (exact binomial test at {alpha:g})"
    return "inconclusive", (f"{hits} of {n} seeds cannot tell a rate above {share:.0%} from one below; "
                            f"a unanimous count decides from {seeds_to_decide(share, level)} seeds")


def judge_detector(fires: Sequence[bool], claimed: bool, fires_on_positive: bool, what: str, *,
                   above_chance_ok: bool = True) -> Judgement:
    """A claim that `what` happens (`claimed` true) or never happens (false) in every run, read by a
    detector that fired (`fires`) or not on each run. Its silence means something only when it fired
    on a constructed positive case (`fires_on_positive`, shown in a test)."""
    if not fires_on_positive:
        return "inconclusive", f"the {what} detector did not fire on its constructed positive case"
    if len(fires) < MIN_SEEDS:
        return "inconclusive", f"{len(fires)} run(s); a verdict needs at least {MIN_SEEDS}"
    if not above_chance_ok:
        return "inconclusive", "a model is not measurably above chance"
    count = sum(map(bool, fires))
    holds = count == len(fires) if claimed else count == 0
    return ("reproduced" if holds else "not reproduced"), f"the {what} detector fired in {count} of {len(fires)} runs"


def boundaries(judge: str, margin: float | None = None) -> tuple[float, ...]:
    """The decision boundaries of a judge on the difference's interval: zero for a difference, the
    margin's two ends for equivalence, minus the margin for non-inferiority."""
    if judge == "difference":
        return (0.0,)
    if judge == "equivalence":
        return (-margin, margin)
    if judge == "non_inferiority":
        return (-margin,)
    raise ValueError(f"judge must be difference, equivalence or non_inferiority, got {judge!r}")


def margin(low: float, high: float, bounds: Sequence[float]) -> float | None:
    """How far the interval [low, high] lies from the nearest decision boundary, in units of its
    half-width: above 0 when it lies wholly on one side of every boundary (a decided row; near 0 is
    a knife edge), below 0 when a boundary falls inside it (how far inside). None without a finite
    interval of some width."""
    half = (high - low) / 2
    if not (math.isfinite(low) and math.isfinite(high)) or half <= 0:
        return None
    distances = [low - b if low > b else b - high if high < b else -min(b - low, high - b) for b in bounds]
    return min(distances) / half
