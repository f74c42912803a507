"""The verdicts of an earlier commit, kept as a record so that the ledgers can be compared with them
without the git history (a shallow clone has none):

    python -m common.claims.since 62fe98e     # common/claims/records/verdicts-62fe98e.json

`python -m common.claims.page` then writes docs/verdict-history.md from every such record and the
committed ledgers: the counts per verdict class then and now, and every row whose verdict moved,
with the reason its row gives now.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from common import stage_times
from common.claims.earlier import committed_json
from common.claims.page import PAPERS, RECORDS
from common.claims.rules import VERDICTS
from common.errors import ArgumentParser, DataError, exit_on_user_error
from common.io import write_json

ROOT = Path(__file__).resolve().parents[2]


def git(*args: str) -> str:
    try:
        return stage_times.git(*args, cwd=ROOT)
    except subprocess.CalledProcessError as error:
        raise DataError(f"git {' '.join(args)}: {error.stderr.strip() or 'failed'}") from None


def verdicts_at(commit: str) -> dict:
    """{paper: {claim: verdict}} from the ledgers committed at `commit` (a paper without one is left out)."""
    verdicts = {}
    for paper in PAPERS:
        path = f"papers/{paper}/results/claims.json"
        if path not in git("ls-tree", "-r", "--name-only", commit, f"papers/{paper}/results").splitlines():
            continue
        claims = committed_json(ROOT, commit, path)["claims"]
        verdicts[paper] = {claim["id"]: claim["verdict"] for claim in claims}
        unknown = set(verdicts[paper].values()) - set(VERDICTS)
        if unknown:
            raise DataError(f"{commit}:{path}: verdicts outside the classes {', '.join(VERDICTS)}: {sorted(unknown)}")
    return verdicts


@exit_on_user_error
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commit", help="the commit whose ledgers to record")
    args = parser.parse_args(argv)
    commit = git("rev-parse", "--short", f"{args.commit}^{{commit}}")
    verdicts = verdicts_at(commit)
    if not verdicts:
        raise DataError(f"{commit}: no paper's ledger (papers/<paper>/results/claims.json) at that commit")
    date = git("show", "-s", "--format=%cs", commit)
    write_json(RECORDS / f"verdicts-{commit}.json", {"commit": commit, "date": date, "verdicts": verdicts})
    return 0


if __name__ == "__main__":
    sys.exit(main())
