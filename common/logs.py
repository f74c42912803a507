"""The logging of every stage, its worker processes and the reports: the project's INFO lines, and
only the warnings of the libraries under it.

Left alone, lm-eval's INFO lines were 126 of the 323 lines of a BlackMamba smoke trial's log (a line
per task, per file, per request batch), and `datasets` drew progress bars whose `\\r` redraws a log
file keeps as one long line per bar. On a terminal the bars stay; in a log they are off.
"""

from __future__ import annotations

import logging
import os
import sys

from common.distributed import RANK_VARIABLES, is_global_zero

FORMAT = "%(asctime)s %(name)s: %(message)s"
# Loggers that report routine work at INFO; their warnings and errors still show.
LIBRARIES = ("lm_eval", "lm-eval", "datasets", "transformers", "huggingface_hub", "filelock", "fsspec", "urllib3",
             "httpx", "lightning.pytorch", "lightning.fabric")


def on_a_terminal() -> bool:
    """Whether bars would be seen as bars: both streams (Lightning draws on stdout, tqdm on stderr)
    go to a terminal."""
    return sys.stdout.isatty() and sys.stderr.isatty()


def configure_logging() -> None:
    # The other processes of a distributed run log the same lines as rank zero: each says whose it is.
    named = [f"{variable.lower()} {os.environ[variable]}" for variable in RANK_VARIABLES if os.environ.get(variable)]
    rank = "" if is_global_zero() else f"[{', '.join(named)}] "
    logging.basicConfig(level=logging.INFO, format=FORMAT.replace("%(name)s", f"{rank}%(name)s"))
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
    if not on_a_terminal():
        # Read by `datasets` when it is imported, and by tqdm for every bar a caller does not switch
        # on or off itself; inherited by worker processes.
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TQDM_DISABLE", "1")
        if "datasets" in sys.modules:
            sys.modules["datasets"].disable_progress_bars()
