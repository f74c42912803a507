"""The record of a claim's earlier run: what a stage measured the last time a profile trained it,
kept for the claims whose stage no longer trains at that profile.

A stage whose runs cannot decide its claims at a profile (too many seeds at the measured spread, a
gap still moving at the affordable steps) trains nothing there (`models: []` in its section's
profile block), and its claims declare where their last run is:

    earlier_run: {commit: 11dee1e, stage: bidirectional}

or, where one model of a stage no longer trains there, `{..., stage: clm, model: transfixer_series}`.
At such a profile `common.claims.build` makes the row `needs paper scale`, its `why` and `evidence`
formatted with the facts of this record: its extractor's facts on the results of that commit, and
`earlier_verdict`, `earlier_why`, `earlier_seeds`, `earlier_to_decide`, `earlier_runs`,
`earlier_minutes` (`-` where the stage records no seconds), ... The record is written from the ledger
and the stage's results as committed at that commit, so it can be rebuilt from the history:

    python -m common.claims.earlier masked_mixers   # papers/masked_mixers/results/earlier_runs.json
"""

from __future__ import annotations

import importlib
import json
import subprocess
from pathlib import Path

from common.claims.build import extract, load_spec, trained_units
from common.claims.seeds import sized
from common.errors import ArgumentParser, ConfigError, exit_on_user_error
from common.io import write_json

RECORD = "earlier_runs.json"


def committed_json(root: Path, commit: str, path: str) -> dict:
    """`path` as committed at `commit`, parsed."""
    shown = subprocess.run(["git", "-C", str(root), "show", f"{commit}:{path}"], capture_output=True, text=True)
    if shown.returncode:
        raise ConfigError(f"{path} at commit {commit}: {shown.stderr.strip() or 'not in the history'}")
    return json.loads(shown.stdout)


def stage_cost(results: dict, model: str | None = None) -> tuple[int, float | None]:
    """The runs of a stage's results (of `model`, or of a retrieval stage's source, only, if given)
    and their training minutes, summed over runs (the stage trains two at a time on 2 cores, so its
    wall time is about half of this)."""
    units = trained_units(results) or {}
    if isinstance(units, list):  # runs or budgets: one run each, no seconds recorded
        return len(units), None
    runs = [run for name, entry in units.items() if model in (None, name) for run in seed_runs(entry)]
    seconds = [run_seconds(run) for run in runs]
    return len(runs), None if None in seconds else sum(seconds) / 60


def seed_runs(entry: dict) -> list[dict]:
    """A trained unit's runs: one per seed where its results keep them by seed (a list of seeds
    without per-seed results, as an LRA task's, counts a run per seed), else the unit itself."""
    seeds = entry.get("seeds")
    if isinstance(seeds, dict):
        return list(seeds.values())
    return [entry] * len(seeds) if isinstance(seeds, list) else [entry]


def run_seconds(run: dict) -> float | None:
    """A run's training seconds, or the sum of its parts' (a retrieval source's model per c); None
    where the stage does not record them."""
    if "train_seconds" in run:
        return run["train_seconds"]
    parts = [part["train_seconds"] for part in run.values() if isinstance(part, dict) and "train_seconds" in part]
    return sum(parts) if parts else None


def earlier_facts(entry: dict, stage: str, results: dict, commit: str, model: str | None = None) -> dict:
    """The facts a row's text reads from its earlier ledger `entry` and its stage's `results`: what
    it showed, the seeds it would need at its spread (`common.claims.seeds`), and what it cost."""
    runs, minutes = stage_cost(results, model)
    seeds = len(results.get("seeds", [])) or 1
    need = sized(entry)
    difference = entry.get("difference") or {}
    return {"earlier_commit": commit, "earlier_stage": stage, "earlier_profile": entry["profile"],
            "earlier_verdict": entry["verdict"], "earlier_why": entry["why"], "earlier_metric": entry["metric"],
            "earlier_seeds": difference.get("n", seeds), "earlier_steps": results.get("steps"),
            "earlier_to_decide": "-" if need == "-" else "more than 10" if need is None else need,
            "earlier_runs": runs, "earlier_minutes": "-" if minutes is None else round(minutes, 1),
            "earlier_minutes_per_seed": "-" if minutes is None else round(minutes / seeds, 1),
            "earlier_minutes_to_decide": round(minutes / seeds * need, 1)
            if minutes is not None and isinstance(need, int) else "-"}


def committed_results(root: Path, paper: str, commit: str, names: list[str]) -> dict[str, dict]:
    """The paper's results named in its claims.yaml as committed at `commit` (those it had then)."""
    results = {}
    for name in names:
        try:
            results[name] = committed_json(root, commit, f"papers/{paper}/results/{name}.json")
        except ConfigError:
            continue  # a results file added after that commit
    return results


def build_record(root: Path, paper: str) -> dict:
    """Every claim of `paper` that declares an `earlier_run`, with its facts."""
    spec = load_spec(root / "papers" / paper / "claims.yaml")
    extractors = importlib.import_module(f"papers.{paper}.evidence")
    claims = {}
    for claim in spec["claims"]:
        if not (where := claim.get("earlier_run")):
            continue
        commit, stage, model = where["commit"], where["stage"], where.get("model")
        ledger = committed_json(root, commit, f"papers/{paper}/results/claims.json")
        entry = next((row for row in ledger["claims"] if row["id"] == claim["id"]), None)
        if entry is None:
            raise ConfigError(f"claim {claim['id']}: earlier_run: no such row in the ledger at {commit}")
        results = committed_results(root, paper, commit, spec["results"])
        if stage not in results:
            raise ConfigError(f"claim {claim['id']}: earlier_run: no results of stage {stage} at {commit}")
        # The extractor's facts on those results too, so that a row's text reads the same facts
        # whether this profile ran its stage or not.
        facts = extract(claim, extractors, results).facts if claim.get("extract") else {}
        claims[claim["id"]] = {**facts, **earlier_facts(entry, stage, results[stage], commit, model)}
    return {"paper": paper, "command": f"python -m common.claims.earlier {paper}", "spans_profiles": True,
            "claims": claims}


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description="Write a paper's record of its claims' earlier runs.")
    parser.add_argument("paper", help="a paper under papers/ whose claims.yaml declares earlier_run")
    parser.add_argument("--root", type=Path, default=Path("."), metavar="PATH", help="the repository")
    args = parser.parse_args(argv)
    record = build_record(args.root, args.paper)
    write_json(args.root / "papers" / args.paper / "results" / RECORD, record)
    print(f"{len(record['claims'])} claims -> papers/{args.paper}/results/{RECORD}")


if __name__ == "__main__":
    main()
