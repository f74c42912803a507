"""The claims ledger: one entry per claim of a paper, with our evidence and the verdict that the
rules of `common.claims.rules` gave it.

A paper's `report` stage writes `results/claims.json`, a list of entries built by `claim_entry`.
Each entry holds the paper's wording, location and number, the metric, our values per seed, their
mean and spread, the chance level, the control that gates it or the context beside it, the profile,
one verdict of `VERDICTS`, and, for a row judged on an interval, its margin from the nearest
decision boundary (`common.claims.rules.margin`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from common.claims.rules import MIN_SEEDS, VERDICTS, interval, margin, spread


def claim_entry(*, id: str, paper: str, claim: str, where: str, metric: str, profile: str, verdict: str,
                why: str, paper_value: Any = None, arms: dict[str, Sequence[float]] | None = None,
                difference: Sequence[float] | None = None, bounds: Sequence[float] = (0.0,),
                chance: float | None = None, control: str | None = None, context: str | None = None,
                trained: bool = True, evidence: str | None = None, margin_value: float | None = None,
                seeds_declared: int | None = None) -> dict[str, Any]:
    """One ledger entry. `arms` holds each compared model's value per seed, `difference` the per-seed
    difference the verdict used; both go in with their mean, spread and interval, and the interval's
    margin from `bounds`, the judge's decision boundaries (`common.claims.rules.boundaries`).
    `control` names what gates the verdict, `context` a comparison that only stands beside it.
    `margin_value`, when given, is the margin the judge computed (over several intervals, say);
    `seeds_declared`, the count the claim declared before the run."""
    entry = {"id": id, "paper": paper, "claim": claim, "where": where, "metric": metric, "paper_value": paper_value,
             "profile": profile, "trained": trained, "chance": chance, "control": control, "context": context,
             "arms": {name: spread(values) for name, values in (arms or {}).items()},
             "difference": None, "margin": margin_value, "verdict": verdict, "why": why, "evidence": evidence}
    if seeds_declared is not None:
        entry["seeds_declared"] = seeds_declared
    if difference is not None:
        low_high = interval(difference)
        entry["difference"] = {**spread(difference), "interval": list(low_high)}
        if margin_value is None:
            entry["margin"] = margin(*low_high, bounds)
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
        if entry["verdict"] != "inconclusive" and (not seeds or min(seeds) < MIN_SEEDS):
            raise ValueError(f"claim {name}: a verdict on a trained comparison needs at least {MIN_SEEDS} seeds, "
                             f"got {seeds}; with fewer it is inconclusive")
        if entry["verdict"] != "inconclusive" and entry.get("chance") is None and not entry.get("control"):
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
    """The fewest seeds behind any arm of a trained claim, for a table, and the count it declared
    where that differs ("3 of 4"); "-" for the others."""
    if not entry["trained"] or entry["verdict"] == "needs paper scale":
        return "-"
    counts = [arm["n"] for arm in entry["arms"].values()]
    if entry.get("difference"):
        counts.append(entry["difference"]["n"])
    if not counts:
        return "-"
    declared = entry.get("seeds_declared")
    return f"{min(counts)} of {declared}" if declared and declared != min(counts) else str(min(counts))


KNIFE_EDGE = 0.5  # an interval within half its half-width of a boundary: another CPU or seed may move it


def format_margin(entry: dict[str, Any]) -> str:
    """The interval's margin from the nearest decision boundary, in half-widths, for a table; "-"
    for a row not judged on an interval. Below 0.5 it is a knife edge: marked so."""
    value = entry.get("margin")
    if value is None or entry["verdict"] == "needs paper scale":
        return "-"
    return f"{value:+.2f}" + (" (knife edge)" if abs(value) < KNIFE_EDGE else "")


def claims_table(ledger: dict[str, Any]) -> str:
    """A `claims.json` as a Markdown table, one row per claim, for a paper's README."""
    lines = ["| claim | where | verdict | ours | 95% interval | margin | seeds | why |",
             "|---|---|---|---|---|---|---|---|"]
    for e in ledger["claims"]:
        ours = e["evidence"] if e["verdict"] == "needs paper scale" else format_ours(e)
        low_high = "[{:.3g}, {:.3g}]".format(*e["difference"]["interval"]) if e["difference"] else "-"
        lines.append(f"| `{e['id']}`: {e['claim']} | {e['where']} | **{e['verdict']}** | {ours} | {low_high} | "
                     f"{format_margin(e)} | {seed_count(e)} | {e['why']} |")
    return "\n".join(lines)
