"""Result tables generated into a paper's README (and the docs pages it names) from its results JSON.

Each table sits between `<!-- table:NAME -->` and `<!-- /table -->`, in exactly one of the pages;
text outside the markers is hand-written and kept. `NAME` is the key of the function that renders
it and, unless the key maps to a (results name, function) pair, also its results file
(`results/NAME.json`). No table computes a verdict: the claims table renders the ledger that
`common.claims.build` wrote, which `write_ledger_report` writes beside the metrics and the pages,
all or nothing.
"""

from __future__ import annotations

import json
import logging
import re
from argparse import Namespace
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from common.claims.ledger import headline_metrics
from common.errors import ConfigError, DataError
from common.io import atomic_file, load_json, write_json
from common.logs import configure_logging

# A table renderer, or (results file name, renderer) for a table read from another table's file.
Table = Callable[[dict], str] | tuple[str, Callable[[dict], str]]
T = TypeVar("T")


def table_blocks(readme: str, tables: dict[str, Table]) -> dict[str, re.Pattern]:
    """Each table's block in the README text; a missing block is a one-line error, raised before
    anything is written."""
    blocks = {}
    for name in tables:
        blocks[name] = re.compile(rf"(<!-- table:{name} -->\n)(?:(?!<!-- /table -->).)*(<!-- /table -->)", re.S)
        if not blocks[name].search(readme):
            raise DataError(f"README: no <!-- table:{name} --> ... <!-- /table --> block")
    return blocks


def tables_by_page(texts: dict[Path, str], tables: dict[str, Table]) -> dict[Path, dict[str, Table]]:
    """The tables each page holds; a table in no page, or in two, is a one-line error."""
    held: dict[Path, dict[str, Table]] = {page: {} for page in texts}
    for name, table in tables.items():
        pattern = re.compile(rf"<!-- table:{name} -->\n")
        pages = [page for page, text in texts.items() if pattern.search(text)]
        if not pages:
            raise DataError(f"table {name!r}: no <!-- table:{name} --> ... <!-- /table --> block in "
                            f"{' or '.join(map(str, texts))}; put it in one of them")
        if len(pages) > 1:
            raise DataError(f"table {name!r}: a <!-- table:{name} --> block in each of "
                            f"{' and '.join(map(str, pages))}; keep one")
        held[pages[0]][name] = table
    return held


def read_readme(readme: Path) -> str:
    if not readme.is_file():
        raise DataError(f"{readme}: no such page (the report writes its tables into it)")
    return readme.read_text()


def render(readme: str, results_dir: Path, tables: dict[str, Table], rerun_hint: str,
           written: dict[str, dict] | None = None) -> str:
    """The README with every table rendered; `written`: results by name that this run is about to
    write, read from here instead of their (older) files."""
    for name, pattern in table_blocks(readme, tables).items():
        source, make = tables[name] if isinstance(tables[name], tuple) else (name, tables[name])
        data = (written or {}).get(source) or load_json(results_dir / f"{source}.json", rerun_hint)
        body = f"_Profile `{data['profile']}`; generated from `results/{source}.json`._\n\n{make(data)}\n"
        readme = pattern.sub(lambda m, body=body: m.group(1) + body + m.group(2), readme)
    return readme


def render_pages(texts: dict[Path, str], results_dir: Path, tables: dict[str, Table], rerun_hint: str,
                 written: dict[str, dict] | None = None) -> dict[Path, str]:
    """Each page's text with the tables it holds rendered (`render`); every table is in one page."""
    held = tables_by_page(texts, tables)
    return {page: render(text, results_dir, held[page], rerun_hint, written) for page, text in texts.items()}


def replace_between_markers(text: str, begin: str, end: str, body: str) -> str:
    """`text` with whatever stands between the `begin` and `end` markers replaced by `body`."""
    if begin not in text or end not in text:
        raise DataError(f"README: markers {begin} and {end} not found")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def write_readme(readme: Path, text: str) -> None:
    with atomic_file(readme, "w") as handle:
        handle.write(text)


def read_results(build: Callable[[], T], results_dir: Path, rerun_hint: str) -> T:
    """`build()`, which reads the stages' results: a result of the wrong shape (a key missing, a
    string where a number goes, too few seeds for a claim), from a stage of another version or an
    edited file, is one line naming the results and what broke, not a traceback."""
    try:
        return build()
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as err:
        logging.getLogger("report").debug("reading the results failed", exc_info=True)
        raise DataError(f"{results_dir}: results of a shape this report does not read ({type(err).__name__}: "
                        f"{err}); {rerun_hint}") from None


def load_results(results_dir: Path, names: tuple[str, ...], paper: str) -> dict[str, dict]:
    """`results/<name>.json` of a paper, each by name; a missing one, or results from different
    profiles, is a one-line error."""
    loaded = {}
    for name in names:
        loaded[name] = load_json(results_dir / f"{name}.json", f"run `dvc repro papers/{paper}/dvc.yaml` first")
        if not isinstance(loaded[name], dict):
            raise DataError(f"{results_dir / f'{name}.json'}: not a stage's results (a JSON object); run "
                            f"`dvc repro papers/{paper}/dvc.yaml` first")
    # A stage rerun at another profile while the others were not (`dvc repro -s`) would put, say,
    # paper-scale MAD searches beside tiny-scale retrainings in one claim.
    by_profile: dict[str, list[str]] = {}
    for name, result in loaded.items():
        if not result.get("spans_profiles"):  # a record of earlier runs (common.claims.earlier) is of no one profile
            by_profile.setdefault(str(result.get("profile")), []).append(name)
    if len(by_profile) > 1:
        mixed = "; ".join(f"{profile}: {', '.join(names)}" for profile, names in sorted(by_profile.items()))
        raise DataError(f"{results_dir}: the results come from different profiles ({mixed}); "
                        f"rerun them at one profile with `dvc repro papers/{paper}/dvc.yaml`")
    return loaded


def profile_of(results: dict[str, dict]) -> str:
    return str(next(result for result in results.values() if not result.get("spans_profiles"))["profile"])


def write_ledger_report(args: Namespace, paper: str, result_names: tuple[str, ...],
                        build: Callable[[dict[str, dict]], list[dict]], tables: dict[str, Table]) -> None:
    """`claims.json` from `build` over the results, its headline numbers as `metrics.json` (`dvc
    metrics`), then the tables of the README and of `args.pages`; nothing is written unless all can be."""
    rerun_hint = f"run `dvc repro papers/{paper}/dvc.yaml` first"
    configure_logging()
    if args.claims.resolve() != (args.results / "claims.json").resolve():
        raise ConfigError(f"--claims: must be {args.results / 'claims.json'}, where the README's claims table "
                          f"reads it; got {args.claims}")
    texts = {page: read_readme(page) for page in [args.readme, *args.pages]}
    held = tables_by_page(texts, tables)
    for page, text in texts.items():
        table_blocks(text, held[page])  # before anything is written
    results = load_results(args.results, result_names, paper)
    ledger = read_results(lambda: build(results), args.results, rerun_hint)
    # The profile too, so that `dvc metrics diff` and `make exp-show` never set a smoke number beside a tiny one.
    metrics = {"profile": profile_of(results), **headline_metrics(ledger)}
    # The pages' tables read the ledger written here: rendered from it before any output is
    # written, so that a result they cannot read leaves everything as it was.
    # As the file will read back (tuples as lists), which is what the claims table renders.
    claims = json.loads(json.dumps({"profile": profile_of(results), "paper": paper, "claims": ledger},
                                   sort_keys=True))
    rendered = read_results(lambda: render_pages(texts, args.results, tables, rerun_hint, written={"claims": claims}),
                            args.results, rerun_hint)
    write_json(args.claims, claims)
    write_json(args.metrics, metrics)
    for page, text in rendered.items():
        write_readme(page, text)
    logging.getLogger("report").info("wrote %s, %s and %s", args.claims, args.metrics,
                                     ", ".join(map(str, rendered)))
