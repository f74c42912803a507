"""The table of docs/pipelines.md's "Results across CPUs", generated from the record that
`python -m sizing.cpu_paths` wrote (sizing/records/cpu_paths.json), so that no figure in it is typed:

    python -m sizing.cpu_paths_page

The table stands between `<!-- sizing cpu_paths -->` and `<!-- /sizing cpu_paths -->`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common.errors import ArgumentParser, exit_on_user_error
from common.eval.report import read_results, replace_between_markers, write_readme
from common.io import load_json
from sizing.cpu_paths import CAPABILITIES, RECORD

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "pipelines.md"
BEGIN, END = "<!-- sizing cpu_paths -->", "<!-- /sizing cpu_paths -->"
COLUMNS = 6  # logged steps shown between the first and the last


def gap(value: float) -> str:
    return "0" if value == 0 else f"{value:.1e}"


def training_table(record: dict) -> str:
    """Per model: the first logged step whose training losses differ between the two kernel levels,
    their gap at evenly spaced logged steps, and the final losses."""
    first_model = next(iter(record["training"].values()))
    logged = sorted(int(step) for step in first_model["gap_by_step"])
    stride = max(1, len(logged) // COLUMNS)
    shown = logged[stride - 1::stride]
    if shown[-1] != logged[-1]:
        shown.append(logged[-1])
    a, b = CAPABILITIES
    lines = [f"| model | first logged step that differs | {' | '.join(f'gap at {s}' for s in shown)} | "
             f"final loss, `{a}` / `{b}` |", "| --- " * (len(shown) + 3) + "|"]
    for model, run in record["training"].items():
        gaps = {int(step): value for step, value in run["gap_by_step"].items()}
        first = run["first_step_that_differs"]
        lines.append(f"| {model} | {'none' if first is None else first} | "
                     f"{' | '.join(gap(gaps[s]) for s in shown)} | "
                     f"{run['final_loss'][a]:.5f} / {run['final_loss'][b]:.5f} |")
    return "\n".join(lines)


def routing_text(routing: dict) -> str:
    iterations = "; ".join(f"`{c}` {', '.join(map(str, its))}" for c, its in routing["sinkhorn_iterations"].items())
    bounds = sorted(routing["eval_margins_below"].items(), key=lambda item: float(item[0].split()[0]))
    margins = ", ".join(f"{n:,} within {bound}" for bound, n in bounds)
    return (f"Routing the same trained BlackMamba (its `{CAPABILITIES[0]}` weights) on the same batches under "
            f"both kernel levels: {routing['train_decisions_that_differ']:,} of {routing['train_decisions']:,} "
            f"training (Sinkhorn) decisions and {routing['eval_decisions_that_differ']:,} of "
            f"{routing['eval_decisions']:,} evaluation (top-1) decisions differ; Sinkhorn's iterations per call: "
            f"{iterations}. Top-two margins of the {routing['eval_tokens']:,} evaluation tokens: {margins}.")


def body(record: dict) -> str:
    m = record["machine"]
    caption = (f"_`python -m sizing.cpu_paths --steps {record['steps']}` (BlackMamba's `train_compare` models at "
               f"`tiny`, seed 0, one thread each, trained once under each of `{'` and `'.join(CAPABILITIES)}`): "
               f"{record['date']}, {record['commit']}, {m['cpu']} ({m['torch_cpu_capability']} native), "
               f"{record['seconds'] / 60:.0f} min; sizing/records/cpu_paths.json._")
    text = caption + "\n\n" + training_table(record)
    if record.get("routing"):
        text += "\n\n" + routing_text(record["routing"])
    return text


@exit_on_user_error
def main(argv: list[str] | None = None) -> int:
    ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    record = load_json(RECORD, "run `python -m sizing.cpu_paths --steps 300`")
    text = read_results(lambda: replace_between_markers(PAGE.read_text(), BEGIN, END, body(record)), RECORD.parent,
                        "rerun `python -m sizing.cpu_paths --steps 300`")
    write_readme(PAGE, text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
