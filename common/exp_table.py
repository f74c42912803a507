"""One paper's experiments as a table that fits a screen: `make exp-show PAPER=blackmamba`.

    python -m common.exp_table blackmamba

`dvc exp show` gives every param and every metric of every pipeline a column: over a thousand
here. This reads `dvc exp show --json` and prints, for one paper, one column per experiment (the
workspace, the commit, and each `dvc exp run` made on it) and one row per headline number of the
paper's ledger (`papers/<paper>/results/metrics.json`: each claim's own number, and its profile).
Above the table, a line per experiment (and for the workspace) names the params it changed against
its commit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from common.errors import ArgumentParser, DataError, exit_on_user_error


def flatten(tree: dict, prefix: str = "") -> dict[str, object]:
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def file_data(data: dict, kind: str, path: str) -> dict[str, object]:
    """The flattened contents of one params or metrics file in an experiment's `data`."""
    return flatten(((data.get(kind) or {}).get(path) or {}).get("data") or {})


def columns(exp_show: list[dict]) -> list[tuple[str, dict, dict | None]]:
    """(name, data, the data of the commit it stands on, or None for a commit) for every column. The
    workspace stands on the commit checked out, which follows it in the list."""
    commits = [baseline for baseline in exp_show if baseline["rev"] != "workspace"]
    found = []
    for baseline in exp_show:
        if baseline["rev"] == "workspace":
            found.append(("workspace", baseline["data"], commits[0]["data"] if commits else None))
            continue
        found.append((baseline.get("name") or baseline["rev"][:7], baseline["data"], None))
        for experiment in baseline.get("experiments") or []:
            for rev in experiment.get("revs") or []:
                found.append((rev.get("name") or rev["rev"][:7], rev["data"], baseline["data"]))
    return found


def cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def render(exp_show: list[dict], paper: str) -> str:
    metrics_file, params_files = f"papers/{paper}/results/metrics.json", ("params.yaml", f"papers/{paper}/params.yaml")
    cols = columns(exp_show)
    lines = []
    for name, data, base in cols:
        if base is None:
            continue
        changed = [f"{key}={cell(value)}" for path in params_files
                   for key, value in file_data(data, "params", path).items()
                   if file_data(base, "params", path).get(key) != value]
        lines.append(f"{name}: {', '.join(changed) or 'no params changed'}")
    values = [file_data(data, "metrics", metrics_file) for _, data, _ in cols]
    rows = list(dict.fromkeys(key for column in values for key in column))
    if not rows:
        raise DataError(f"{metrics_file}: no metrics in any experiment; run `dvc repro papers/{paper}/dvc.yaml` first")
    table = [[f"{paper} metrics", *(name for name, _, _ in cols)]]
    table += [[row, *(cell(column.get(row)) for column in values)] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    formatted = ["  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip() for line in table]
    return "\n".join([*lines, *([""] if lines else []), formatted[0], "  ".join("-" * w for w in widths),
                      *formatted[1:]])


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(prog="python -m common.exp_table", description=__doc__.split("\n\n")[0])
    # Run from the repository root, as `dvc` is.
    parser.add_argument("paper", choices=sorted(path.parent.name for path in Path("papers").glob("*/dvc.yaml")),
                        help="whose experiments to show")
    args = parser.parse_args(argv)
    shown = subprocess.run([sys.executable, "-m", "dvc", "exp", "show", "--json"], capture_output=True, text=True)
    if shown.returncode != 0:
        raise DataError(f"`dvc exp show --json` failed: {shown.stderr.strip().splitlines()[-1:]}")
    print(render(json.loads(shown.stdout), args.paper))


if __name__ == "__main__":
    main()
