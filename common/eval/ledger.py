"""The claims ledger: one entry per claim of a paper, with our evidence and a verdict earned by rules.

A paper's `report` stage writes `results/claims.json`, a list of entries built by `claim_entry`.
Each entry holds the paper's wording, location and number, the metric, our values per seed, their
mean and spread, the chance level, the control, the profile, and one verdict of `VERDICTS`.

How a trained comparison is judged (`judge_difference`), in this order:

1. `inconclusive` when a model is not measurably above chance or the positive control failed: the
   experiment cannot tell the models apart, so neither "reproduced" nor "not reproduced" is earned.
2. `inconclusive` when the 95% interval of the mean difference (a t-interval over seeds, the two
   arms paired by seed) spans zero.
3. `not reproduced` when the interval excludes zero on the side opposite to the paper's claim.
4. On the paper's side: `reproduced` when the paper gives no size, or the interval holds the
   paper's effect, or our mean is within `size_tolerance` (relative) of it; otherwise `direction
   reproduced` when every seed points the paper's way, and `inconclusive` when some seed does not.

A claim of no difference ("the same relative efficiency", "no gain") is judged against a margin
(`judge_equivalence`): `reproduced` when the whole interval lies inside it, `not reproduced` when the
whole interval lies outside it, `inconclusive` otherwise. A claim that one model "matches or beats"
another is one-sided (`judge_non_inferiority`): `reproduced` when the interval of the advantage lies
above minus the margin, `not reproduced` when it lies below it.

`needs paper scale` is never computed: a stage states it, with why and the cheapest evidence it has.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any, Literal

from scipy import stats

VERDICTS = ("reproduced", "direction reproduced", "not reproduced", "inconclusive", "needs paper scale")
MIN_SEEDS = 3
LEVEL = 0.95

Verdict = Literal["reproduced", "direction reproduced", "not reproduced", "inconclusive", "needs paper scale"]


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
                 control_ok: bool | None) -> tuple[Verdict, str] | None:
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
                     paper_effect: float | None = None, size_tolerance: float = 0.5) -> tuple[Verdict, str]:
    """The verdict on a claim that a difference (per seed, ours minus the comparison) has sign
    `claimed_sign` (+1: larger, -1: smaller) and, if given, size about `paper_effect`; with why."""
    if (undecidable := _undecidable(differences, above_chance_ok, control_ok)) is not None:
        return undecidable
    low, high = interval(differences)
    if low <= 0 <= high:
        return "inconclusive", f"the {LEVEL:.0%} interval of the difference [{low:.4g}, {high:.4g}] spans zero"
    if (low > 0) != (claimed_sign > 0):
        return "not reproduced", f"the interval [{low:.4g}, {high:.4g}] excludes zero on the opposite side"
    mean = statistics.fmean(differences)
    if paper_effect is None or low <= paper_effect <= high or \
            abs(mean - paper_effect) <= size_tolerance * abs(paper_effect):
        return "reproduced", f"the interval [{low:.4g}, {high:.4g}] excludes zero on the paper's side"
    if all((d > 0) == (claimed_sign > 0) and d != 0 for d in differences):
        return "direction reproduced", (f"every seed points the paper's way, but the mean {mean:.4g} is not within "
                                        f"{size_tolerance:.0%} of the paper's {paper_effect:.4g}")
    return "inconclusive", "the interval excludes zero, but not every seed points the paper's way"


def judge_equivalence(differences: Sequence[float], margin: float, *, above_chance_ok: bool = True,
                      control_ok: bool | None = None) -> tuple[Verdict, str]:
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
                          control_ok: bool | None = None) -> tuple[Verdict, str]:
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


def claim_entry(*, id: str, paper: str, claim: str, where: str, metric: str, profile: str, verdict: str,
                why: str, paper_value: Any = None, arms: dict[str, Sequence[float]] | None = None,
                difference: Sequence[float] | None = None, chance: float | None = None,
                control: str | None = None, trained: bool = True, evidence: str | None = None) -> dict[str, Any]:
    """One ledger entry. `arms` holds each compared model's value per seed, `difference` the per-seed
    difference the verdict used; both go in with their mean, spread and interval."""
    entry = {"id": id, "paper": paper, "claim": claim, "where": where, "metric": metric, "paper_value": paper_value,
             "profile": profile, "trained": trained, "chance": chance, "control": control,
             "arms": {name: spread(values) for name, values in (arms or {}).items()},
             "difference": None, "verdict": verdict, "why": why, "evidence": evidence}
    if difference is not None:
        entry["difference"] = {**spread(difference), "interval": list(interval(difference))}
    check_entry(entry)
    return entry


REQUIRED = ("id", "paper", "claim", "where", "metric", "profile", "trained", "verdict", "why")


def check_summary(summary: Any, where: str) -> None:
    """An arm or a difference as `summarize` writes it: a number `mean`, a whole `n` of at least 1,
    a number `std`."""
    if not isinstance(summary, dict):
        raise ValueError(f"{where}: not a summary (an object with mean, std and n)")
    for key in ("mean", "std"):
        if isinstance(summary.get(key), bool) or not isinstance(summary.get(key), (int, float)):
            raise ValueError(f"{where}.{key}: not a number, got {summary.get(key)!r}")
    if isinstance(summary.get("n"), bool) or not isinstance(summary.get("n"), int) or summary["n"] < 1:
        raise ValueError(f"{where}.n: not a count of runs, got {summary.get('n')!r}")


def check_entry(entry: dict[str, Any]) -> None:
    """An entry as the ledger's schema wants it; raises ValueError naming the entry and the problem."""
    if not isinstance(entry, dict):
        raise ValueError(f"a claim that is not an object: {str(entry)[:60]!r}")
    name = entry.get("id", "<no id>")
    missing = [key for key in REQUIRED if entry.get(key) in (None, "")]
    if missing:
        raise ValueError(f"claim {name}: missing {', '.join(missing)}")
    if not isinstance(entry["trained"], bool):
        raise ValueError(f"claim {name}: trained must be true or false, got {entry['trained']!r}")
    if not isinstance(entry.get("arms", {}), dict):
        raise ValueError(f"claim {name}: arms must map each arm to its summary")
    for arm, summary in entry.get("arms", {}).items():
        check_summary(summary, f"claim {name}: arms.{arm}")
    if entry.get("difference") is not None:
        check_summary(entry["difference"], f"claim {name}: difference")
    if entry["verdict"] not in VERDICTS:
        raise ValueError(f"claim {name}: verdict {entry['verdict']!r}; allowed: {', '.join(VERDICTS)}")
    if entry["verdict"] == "needs paper scale":
        if not entry.get("evidence"):
            raise ValueError(f"claim {name}: 'needs paper scale' must give the cheapest evidence measured here")
        return
    if entry["trained"]:
        seeds = [arm["n"] for arm in entry["arms"].values()] + \
            ([entry["difference"]["n"]] if entry.get("difference") else [])
        if not seeds or (min(seeds) < MIN_SEEDS and entry["verdict"] != "inconclusive"):
            raise ValueError(f"claim {name}: a verdict on a trained comparison needs at least {MIN_SEEDS} seeds, "
                             f"got {seeds}; with fewer it is inconclusive")
        if entry.get("chance") is None and not entry.get("control"):
            raise ValueError(f"claim {name}: a trained comparison names its chance level or a control")


def check_ledger(entries: list[dict[str, Any]]) -> None:
    """Every entry valid, and ids unique."""
    for entry in entries:
        check_entry(entry)
    ids = [entry["id"] for entry in entries]
    if len(set(ids)) != len(ids):
        raise ValueError(f"claim ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")


def headline_metrics(entries: list[dict[str, Any]]) -> dict[str, float]:
    """One number per claim for `dvc metrics`: the mean difference the verdict used, or the value of
    a claim with a single arm. Claims with neither (a `needs paper scale` row) are left out."""
    metrics = {}
    for entry in entries:
        if entry.get("difference"):
            metrics[entry["id"]] = entry["difference"]["mean"]
        elif len(entry["arms"]) == 1:
            metrics[entry["id"]] = next(iter(entry["arms"].values()))["mean"]
    return metrics


def format_ours(entry: dict[str, Any]) -> str:
    """Our number for a table: the difference's mean and spread, or each arm's; "-" at paper scale."""
    if entry["verdict"] == "needs paper scale":
        return "-"
    if entry.get("difference"):
        d = entry["difference"]
        return f"{d['mean']:.3g} ± {d['std']:.2g} (difference)"
    return "; ".join(f"{name}: {arm['mean']:.3g}" + (f" ± {arm['std']:.2g}" if arm["n"] > 1 else "")
                     for name, arm in entry["arms"].items())


def seed_count(entry: dict[str, Any]) -> str:
    """The fewest seeds behind any arm of a trained claim, for a table; "-" for the others."""
    if not entry["trained"] or entry["verdict"] == "needs paper scale":
        return "-"
    counts = [arm["n"] for arm in entry["arms"].values()]
    if entry.get("difference"):
        counts.append(entry["difference"]["n"])
    return str(min(counts))


def claims_table(ledger: dict[str, Any]) -> str:
    """A `claims.json` as a Markdown table, one row per claim, for a paper's README."""
    lines = ["| claim | where | verdict | ours | 95% interval | seeds | why |", "|---|---|---|---|---|---|---|"]
    for e in ledger["claims"]:
        ours = e["evidence"] if e["verdict"] == "needs paper scale" else format_ours(e)
        low_high = "[{:.3g}, {:.3g}]".format(*e["difference"]["interval"]) if e["difference"] else "-"
        lines.append(f"| `{e['id']}`: {e['claim']} | {e['where']} | **{e['verdict']}** | {ours} | {low_high} | "
                     f"{seed_count(e)} | {e['why']} |")
    return "\n".join(lines)
