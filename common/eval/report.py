"""Result tables generated into a paper's README from its results JSON.

Each table sits between `<!-- table:NAME -->` and `<!-- /table -->`; text outside the markers is
hand-written and kept. `NAME` is both the results file (`results/NAME.json`) and the key of the
function that renders it. Verdicts are computed by those functions from the numbers, never typed.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from pathlib import Path

from common.errors import DataError, exit_on_user_error
from common.io import atomic_file
from common.stages import stage_args


def render(readme: str, results_dir: Path, tables: dict[str, Callable[[dict], str]], rerun_hint: str) -> str:
    for name, make in tables.items():
        path = results_dir / f"{name}.json"
        if not path.is_file():
            raise DataError(f"{path}: missing; {rerun_hint}")
        data = json.loads(path.read_text())
        pattern = re.compile(rf"(<!-- table:{name} -->\n)(?:(?!<!-- /table -->).)*(<!-- /table -->)", re.S)
        if not pattern.search(readme):
            raise DataError(f"README: no <!-- table:{name} --> ... <!-- /table --> block")
        body = f"_Profile `{data['profile']}`; generated from `results/{name}.json`._\n\n{make(data)}\n"
        readme = pattern.sub(lambda m, body=body: m.group(1) + body + m.group(2), readme)
    return readme


def replace_between_markers(text: str, begin: str, end: str, body: str) -> str:
    """`text` with whatever stands between the `begin` and `end` markers replaced by `body`."""
    if begin not in text or end not in text:
        raise DataError(f"README: markers {begin} and {end} not found")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def update_readme(readme: Path, results_dir: Path, tables: dict[str, Callable[[dict], str]], rerun_hint: str) -> None:
    text = render(readme.read_text(), results_dir, tables, rerun_hint)
    with atomic_file(readme, "w") as handle:
        handle.write(text)


def report_main(paper: str, tables: dict[str, Callable[[dict], str]], argv: list[str] | None = None) -> None:
    """The `report` stage of `papers/<paper>`: regenerate its README's tables in place."""

    @exit_on_user_error
    def run() -> None:
        args = stage_args(argv, f"Regenerate the result tables of papers/{paper}/README.md from its results JSON.",
                          "results", "readme", params=False)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
        update_readme(args.readme, args.results, tables, f"run `dvc repro papers/{paper}/dvc.yaml` first")
        logging.getLogger("report").info("updated %s", args.readme)

    run()
