"""The sizing tables of `docs/manticore/specialists.md`, generated from the records that
`python -m sizing.manticore_specialists` wrote into sizing/records (and, for the hybrid's own rows,
the `specialists` stage's results), so that no figure on the page is typed:

    python -m sizing.specialists_page

Each table stands between two markers naming the command and the design it shows, e.g.
`<!-- sizing budgets encyclopedia own-embeddings -->`; a design with no record says so.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from common.errors import ArgumentParser, DataError, exit_on_user_error
from common.eval.report import replace_between_markers, write_readme
from common.io import load_json
from papers.manticore.evidence import late_movement

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "sizing" / "records"
PAGE = ROOT / "docs" / "manticore" / "specialists.md"
STAGE_RESULTS = ROOT / "papers" / "manticore" / "results" / "specialists.json"
GENRES = ("mix", "stories", "instructions")
# the stage's design and the earlier one (docs/manticore/specialists.md tells why it changed)
DESIGNS = ({"projector_text": "encyclopedia", "carry_embeddings": False},
           {"projector_text": "genres", "carry_embeddings": True})
MIN_VALIDATIONS = 5  # a fall "over the last fifth" needs a fifth of the run to hold a validation


def design_name(design: dict) -> str:
    carried = "carried-embeddings" if design["carry_embeddings"] else "own-embeddings"
    return f"{design['projector_text']} {carried}"


def markers(which: str, design: str) -> tuple[str, str]:
    return f"<!-- sizing {which} {design} -->", f"<!-- /sizing {which} {design} -->"


def load_records(folder: Path) -> list[dict]:
    hint = "rewrite it with `python -m sizing.manticore_specialists`"
    records = [load_json(path, hint) | {"path": path.name} for path in sorted(folder.glob("*.json"))]
    for record in records:
        if "which" not in record:
            raise DataError(f"{folder / record['path']}: not a sizing record; {hint}")
    mine = [record for record in records if record["which"] in ("budgets", "same-text")]  # not another sizing's
    for record in mine:
        if not {"seed", "design", "components", "runs"} <= record.keys():
            raise DataError(f"{folder / record['path']}: not a sizing record; {hint}")
    return mine


def _losses(loss: dict) -> str:
    return " | ".join(f"{loss[genre]:.3f}" for genre in GENRES)


def _sweep_points(run: dict) -> list[tuple[float, dict]]:
    """(alpha, genre losses) per point; alpha is the second component's weight."""
    return [(point["alpha"] if "alpha" in point else point["alphas"][0][1], point["loss"]) for point in run["sweep"]]


def hybrid_source(record: dict, records: list[dict], stage: dict) -> tuple[str, dict] | None:
    """The sweep whose best interior point is the same-text table's hybrid row: the stage's run of the
    record's seed when the stage ran the record's design, else the `budgets` record of that design and
    seed at the stage's projector steps."""
    steps = next(run["steps"][0] for run in record["runs"] if run["variant"] == "same_steps")
    if all(stage["config"][key] == value for key, value in record["design"].items()):
        run = next((r for r in stage["runs"] if r["pair"] == "specialists" and r["seed"] == record["seed"]), None)
        if run is not None:
            return "the stage", run
    for other in records:
        if other["which"] == "budgets" and other["design"] == record["design"] and other["seed"] == record["seed"]:
            run = next((r for r in other["runs"] if r["budget"] == steps), None)
            if run is not None:
                return f"the `budgets` run at {steps:,} projector steps", run
    return None


def same_text_table(record: dict, source: tuple[str, dict] | None) -> str:
    first, second = record["components"]
    by_run = {(run["component"], run["variant"]): run for run in record["runs"]}
    fine_tuning = by_run[(second, "same_steps")]["steps"][1]
    lines = [f"| seed {record['seed']} | steps (projector text + fine-tuning) | mix | stories | instructions |",
             "|---|---|---|---|---|"]
    points = _sweep_points(source[1]) if source else []
    if points and not record["design"]["carry_embeddings"]:  # then a one-hot alpha is exactly its component
        by_alpha = dict(points)
        for name, loss in ((second, by_alpha[1.0]), (first, by_alpha[0.0])):
            lines.append(f"| {name} alone | 0 + {fine_tuning:,} (the sweep's corner) | {_losses(loss)} |")
    for variant, label in (("same_steps", ""), ("same_compute", ", the hybrid's compute")):
        for name in (second, first):
            run = by_run[(name, variant)]
            steps = f"{run['steps'][0]:,} + {run['steps'][1]:,}"
            lines.append(f"| {name} alone{label} | {steps} | {_losses(run['loss'])} |")
    if points:
        alpha, loss = min(((a, loss) for a, loss in points if 0 < a < 1), key=lambda p: p[1]["mix"])
        steps = by_run[(second, "same_steps")]["steps"]
        lines.append(f"| the hybrid at alpha {alpha:g} ({source[0]}) | {steps[0]:,} + {steps[1]:,} | {_losses(loss)} |")
    return "\n".join(lines)


def _mean_cell(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def budgets_table(records: list[dict]) -> str:
    """Per projector budget: the sweep's mix loss at each alpha (mean ± sample std over the records'
    seeds; the lowest mean in bold), and per seed the best alpha, its gain over the better corner (0
    when a corner is best) and the projector loss's fall over the last fifth of its pretraining."""
    records = sorted(records, key=lambda r: r["seed"])
    runs = [{run["budget"]: run for run in record["runs"]} for record in records]
    alphas = [alpha for alpha, _ in _sweep_points(records[0]["runs"][0])]
    header = " | ".join(f"alpha {a:g}" if k == 0 else f"{a:g}" for k, a in enumerate(alphas))
    lines = [f"| projector steps | {header} | best alpha per seed | gain per seed | "
             "projector fall over the last fifth, per seed |", "|---" * (len(alphas) + 4) + "|"]
    for budget in sorted(runs[0]):
        per_seed = [dict(_sweep_points(seed_runs[budget])) for seed_runs in runs]
        means = {a: statistics.mean(seed[a]["mix"] for seed in per_seed) for a in alphas}
        cells = [_mean_cell([seed[a]["mix"] for seed in per_seed]) for a in alphas]
        best = min(alphas, key=means.get)
        cells[alphas.index(best)] = f"**{cells[alphas.index(best)]}**"
        best_alphas, gains, falls = [], [], []
        for seed, seed_runs in zip(per_seed, runs):
            best_alpha = min(alphas, key=lambda a: seed[a]["mix"])
            best_alphas.append(f"{best_alpha:g}")
            gains.append(f"{min(seed[alphas[0]]['mix'], seed[alphas[-1]]['mix']) - seed[best_alpha]['mix']:.3f}")
            curve = seed_runs[budget]["projector_curve"]
            falls.append(f"{late_movement(curve) / curve[-1][1]:.2%}" if len(curve) >= MIN_VALIDATIONS else "-")
        lines.append(f"| {budget:,} | {' | '.join(cells)} | {', '.join(best_alphas)} | {', '.join(gains)} | "
                     f"{', '.join(falls)} |")
    return "\n".join(lines)


def caption(records: list[dict], command: str) -> str:
    seeds = ", ".join(str(r["seed"]) for r in sorted(records, key=lambda r: r["seed"]))
    cpus = sorted({f"{r['machine']['cpu']} ({r['machine']['torch_cpu_capability']})" for r in records})
    minutes = sum(run["seconds"] for r in records for run in r["runs"]) / 60
    return (f"_{'Seeds' if len(records) > 1 else 'Seed'} {seeds}; `{command}`; "
            f"{', '.join(sorted('sizing/records/' + r['path'] for r in records))} from {'; '.join(cpus)}; "
            f"{minutes:.0f} minutes of runs, one core each. Alpha is the weight of {records[0]['components'][1]}._")


def tables(page: str, records: list[dict], stage: dict) -> str:
    """`page` with every sizing table between its markers regenerated from `records`."""
    for which in ("budgets", "same-text"):
        for design in DESIGNS:
            begin, end = markers(which, design_name(design))
            mine = [r for r in records if r["which"] == which and r["design"] == design]
            carry = "--carry-embeddings" if design["carry_embeddings"] else "--no-carry-embeddings"
            command = (f"python -m sizing.manticore_specialists {which} --projector-text {design['projector_text']} "
                       f"{carry} --seed S --out FILE")
            if not mine:
                body = f"_No record yet: `{command}` into sizing/records, then `python -m sizing.specialists_page`._"
            elif which == "budgets":
                body = caption(mine, command) + "\n\n" + budgets_table(mine)
            else:
                record = min(mine, key=lambda r: r["seed"])
                body = caption([record], command) + "\n\n" + same_text_table(
                    record, hybrid_source(record, records, stage))
            page = replace_between_markers(page, begin, end, body)
    return page


@exit_on_user_error
def main(argv: list[str] | None = None) -> int:
    ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    stage = load_json(STAGE_RESULTS, "run `dvc repro papers/manticore/dvc.yaml:specialists`")
    write_readme(PAGE, tables(PAGE.read_text(), load_records(RECORDS), stage))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
