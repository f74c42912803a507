"""The claims pages: the front page's counts, `docs/claims.md`'s every claim and
`docs/verdict-history.md`'s verdicts moved since each recorded commit, from the ledgers.

    python -m common.claims.page            # rewrite the pages between their markers
    python -m common.claims.page --check    # exit 1 if one is out of date

Each paper's `report` stage writes `papers/<paper>/results/claims.json` (`common.claims.ledger`).
`README.md` gets the counts per verdict class; `docs/claims.md` one row per claim with its verdict,
our number with its spread, its margin from the nearest decision boundary, and the number of seeds;
`docs/verdict-history.md` the ledgers beside the records that `python -m common.claims.since COMMIT`
keeps of an earlier commit's verdicts. It is not a DVC stage on purpose: a root stage that depends on
the three ledgers would make `dvc repro` of the root pipeline run all three papers.
`tests/test_claims_page.py` fails when the committed pages and the committed ledgers disagree.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common.claims.ledger import check_ledger, format_margin, format_ours, seed_count
from common.claims.rules import VERDICTS
from common.errors import ArgumentParser, DataError, UserError
from common.eval.report import replace_between_markers
from common.io import atomic_file, load_json

PAPERS = {"manticore": "Manticore", "blackmamba": "BlackMamba", "masked_mixers": "Masked Mixers"}
BEGIN, END = "<!-- claims-page:begin -->", "<!-- claims-page:end -->"
RECORDS = Path(__file__).resolve().parent / "records"  # earlier commits' verdicts (common.claims.since)


def load_ledgers(root: Path) -> dict[str, list[dict] | None]:
    """{paper: its claims, or None when the paper has no ledger yet}, each ledger validated."""
    ledgers = {}
    for paper in PAPERS:
        path = root / "papers" / paper / "results" / "claims.json"
        if not path.is_file():
            ledgers[paper] = None
            continue
        ledger = load_json(path, f"rerun `dvc repro papers/{paper}/dvc.yaml:report`")
        if not isinstance(ledger, dict) or not isinstance(ledger.get("claims"), list):
            raise DataError(f"{path}: not a claims ledger (an object with a list of claims); rerun "
                            f"`dvc repro papers/{paper}/dvc.yaml:report`")
        ledgers[paper] = ledger["claims"]
        try:
            check_ledger(ledgers[paper])
        except (ValueError, KeyError, TypeError) as err:
            raise DataError(f"{path}: {err}") from None
    return ledgers


def counts(ledgers: dict[str, list[dict] | None]) -> str:
    lines = ["| paper | " + " | ".join(VERDICTS) + " | claims |", "|---|" + "---|" * (len(VERDICTS) + 1)]
    for paper, claims in ledgers.items():
        if claims is None:
            lines.append(f"| {PAPERS[paper]} | " + " | ".join("-" for _ in VERDICTS) + " | no ledger yet |")
            continue
        tally = [sum(entry["verdict"] == verdict for entry in claims) for verdict in VERDICTS]
        lines.append(f"| {PAPERS[paper]} | " + " | ".join(map(str, tally)) + f" | {len(claims)} |")
    return "\n".join(lines)


def every_claim(ledgers: dict[str, list[dict] | None]) -> str:
    lines = ["| paper | claim | verdict | ours | margin | seeds |", "|---|---|---|---|---|---|"]
    for paper, claims in ledgers.items():
        for entry in claims or []:
            lines.append(f"| {PAPERS[paper]} | `{entry['id']}`: {entry['claim']} ({entry['where']}) | "
                         f"{entry['verdict']} | {format_ours(entry)} | {format_margin(entry)} | {seed_count(entry)} |")
    return "\n".join(lines)


def history(ledgers: dict[str, list[dict] | None]) -> str:
    """Per recorded commit: each paper's counts per verdict class then and now, and every row whose
    verdict moved (or that is new), with the reason its row gives now."""
    parts = []
    for path in sorted(RECORDS.glob("verdicts-*.json")):
        record = load_json(path, f"rewrite it with `python -m common.claims.since {path.stem.split('-', 1)[1]}`")
        then, commit = record["verdicts"], record["commit"]
        lines = [f"### Since {commit} ({record['date']})", "",
                 "| paper | when | " + " | ".join(VERDICTS) + " | claims |", "|---|---|" + "---|" * (len(VERDICTS) + 1)]
        moved = []
        for paper, claims in ledgers.items():
            now = {entry["id"]: entry for entry in claims or []}
            for when, verdicts in ((commit, then.get(paper, {})), ("now", {i: e["verdict"] for i, e in now.items()})):
                tally = [sum(v == verdict for v in verdicts.values()) for verdict in VERDICTS]
                lines.append(f"| {PAPERS[paper]} | {when} | " + " | ".join(map(str, tally)) + f" | {len(verdicts)} |")
            moved += [f"| {PAPERS[paper]} | `{i}` | {then.get(paper, {}).get(i, 'new')} | {e['verdict']} | "
                      f"{e['why'].replace('|', '/')} |"
                      for i, e in now.items() if then.get(paper, {}).get(i) != e["verdict"]]
            moved += [f"| {PAPERS[paper]} | `{i}` | {v} | removed | |"
                      for i, v in then.get(paper, {}).items() if i not in now]
        lines += ["", f"{len(moved)} rows moved or new:", "", f"| paper | claim | {commit} | now | why, now |",
                  "|---|---|---|---|---|", *moved]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) or "No earlier commit's verdicts are recorded (`python -m common.claims.since COMMIT`)."


# Each page, relative to the repository root, and the table it holds between the markers.
PAGES = {"README.md": counts, "docs/claims.md": every_claim, "docs/verdict-history.md": history}


def render(text: str, table, ledgers: dict[str, list[dict] | None]) -> str:
    return replace_between_markers(text, BEGIN, END, table(ledgers))


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is out of date")
    args = parser.parse_args(argv)
    root = Path.cwd()
    try:
        ledgers = load_ledgers(root)
        pages = {root / name: (text := (root / name).read_text(), render(text, table, ledgers))
                 for name, table in PAGES.items()}
    except (OSError, ValueError, KeyError, UserError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    stale = [path for path, (old, new) in pages.items() if old != new]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(root)}: the claims page is out of date; run `python -m common.claims.page`",
                  file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        with atomic_file(path, "w") as handle:
            handle.write(pages[path][1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
