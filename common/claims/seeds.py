"""How many seeds each trained claim needs, sized from the spread its last run measured: the count a
claim declares in its `claims.yaml` before the next run (the evidence standard: seeds are sized
from the measured spread for the effect the claim needs, capped, and never added after reading a
verdict).

    python -m common.claims.seeds            # a table per paper, from the committed ledgers

For a row judged on an interval, the distance from its mean to the nearest decision boundary is
read from the ledger (its interval and margin), and `common.claims.rules.seeds_to_separate` gives
the fewest seeds whose interval, at the measured spread, would lie on one side of it. A row whose
models are not above chance is left out: seeds do not rescue a probe that cannot see its claim.
"""

from __future__ import annotations

import sys
from pathlib import Path

from common.claims.build import load_spec
from common.claims.page import PAPERS, load_ledgers
from common.claims.rules import SEED_CAP, seeds_to_separate
from common.errors import ArgumentParser, exit_on_user_error


def sized(entry: dict) -> int | None | str:
    """The seeds `entry` needs at its measured spread; None beyond the cap, "-" when not sizable."""
    difference, margin = entry.get("difference"), entry.get("margin")
    if not entry["trained"] or difference is None or margin is None or "not measurably above chance" in entry["why"]:
        return "-"
    low, high = difference["interval"]
    half = (high - low) / 2
    return seeds_to_separate(difference["std"], half * (1 + margin))


def table(paper: str, entries: list[dict], declared: dict[str, int | None]) -> str:
    lines = [f"{PAPERS[paper]}:", "", "| claim | verdict | seeds declared | seeds held | seeds to decide |",
             "|---|---|---|---|---|"]
    for entry in entries:
        need = sized(entry)
        if need == "-":
            continue
        held = entry["difference"]["n"]
        lines.append(f"| `{entry['id']}` | {entry['verdict']} | {declared.get(entry['id'])} | {held} | "
                     f"{f'more than {SEED_CAP}' if need is None else need} |")
    return "\n".join(lines)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description="Seeds each trained claim needs at its measured spread.")
    parser.add_argument("--root", type=Path, default=Path("."), metavar="PATH", help="the repository")
    args = parser.parse_args(argv)
    for paper, entries in load_ledgers(args.root).items():
        if entries is None:
            continue
        spec = load_spec(args.root / "papers" / paper / "claims.yaml")
        declared = {claim["id"]: claim.get("seeds") for claim in spec["claims"]}
        sys.stdout.write(table(paper, entries, declared) + "\n\n")


if __name__ == "__main__":
    main()
