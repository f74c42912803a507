"""Try a paper's pipeline at the `smoke` profile in a throwaway copy; the checkout is never touched.

    make smoke PAPER=blackmamba            # or: python -m common.smoke blackmamba
    rm -rf data/smoke                      # undo: nothing else was written

It copies the checkout (`common.checkout.copy_source`: what a fresh clone has, plus new files of
yours outside data/) into `data/smoke/<paper>/`, a git repository of its own, switches that copy to
`profile: smoke` and runs `dvc repro` of the paper's pipeline there (the root data stages first, as
its inputs). Results, plots, the paper README's tables and the locks are written in the copy, under
the same paths as in the checkout; the committed ones stay as they are. The copy starts as one git
commit, so `git -C data/smoke/<paper> diff --stat` lists what the trial rewrote. A second trial of
the same paper starts from a fresh copy. `root` tries the root pipeline alone (data, tokenizer, baseline).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from common.checkout import copy_source, init_repository, set_profile
from common.errors import ArgumentParser, UserError, exit_on_user_error

log = logging.getLogger("smoke")
ROOT = Path(__file__).resolve().parent.parent
PIPELINES = {"root": Path("dvc.yaml"), **{path.parent.name: path.relative_to(ROOT)
                                          for path in sorted((ROOT / "papers").glob("*/dvc.yaml"))}}
MARKER = ".smoke_trial"  # marks a directory as a trial copy, which a new trial may delete


def prepare(work: Path) -> None:
    """A fresh copy of the checkout in `work`, at `profile: smoke`."""
    if work.exists():
        if any(work.iterdir()) and not (work / MARKER).is_file():
            raise UserError(f"{work}: exists and is not a smoke trial's copy (no {MARKER}); move it away or "
                            f"choose another --work")
        shutil.rmtree(work)
    work.mkdir(parents=True)  # an empty directory of the user's is taken as it is, and made anew
    copy_source(ROOT, work)
    set_profile(work, "smoke")
    (work / MARKER).write_text("a copy of the checkout made by `python -m common.smoke`; safe to delete\n")
    init_repository(work, commit=True)  # so that `git diff` there shows what the trial rewrote


@exit_on_user_error
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m common.smoke", description=__doc__.split("\n\n")[0])
    parser.add_argument("paper", choices=list(PIPELINES), help="whose pipeline to try")
    parser.add_argument("--work", type=Path, default=None,
                        help="where the copy goes (default: data/smoke/<paper> in this checkout)")
    args = parser.parse_args(argv)
    work = (args.work or ROOT / "data" / "smoke" / args.paper).resolve()
    if work == ROOT or work in ROOT.parents:
        raise UserError(f"--work {work}: holds this checkout; name a directory of its own")

    started = time.monotonic()
    prepare(work)
    pipeline = PIPELINES[args.paper]
    log.info("running `dvc repro %s` at profile smoke in %s", pipeline, work)
    # Stage commands call `python`: this interpreter's, as under `make`.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "dvc", "repro", str(pipeline)], cwd=work, env=env)
    if done.returncode != 0:
        log.error("`dvc repro %s` failed in %s (its output is above)", pipeline, work)
        return done.returncode
    results = work / pipeline.parent / "results"
    log.info("smoke trial of %s done in %.0f s; its results and plots are in %s; `rm -rf %s` removes the trial",
             args.paper, time.monotonic() - started, results, work)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
