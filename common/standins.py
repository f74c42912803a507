"""Local stand-ins for the Hugging Face Hub, so the `paper` profile can be rehearsed offline.

`make rehearse` (the `rehearsal` package) writes a directory of stand-ins and sets the environment
variable `HYBRID_STANDINS` to it. While it is set, every Hub load of the project reads from there
and never from the Hub:

    <root>/datasets/<source>/<hub split>.parquet   a data set of `common.data.hub`, in the Hub's schema
    <root>/models/<org>/<name>/                    a checkpoint and tokenizer, as `save_pretrained` writes
    <root>/datasets/<path>/<config>/<split>.parquet  an lm-eval task's data set (`harness_datasets`)

A stand-in that is missing is an error naming the file the rehearsal should have written: falling
back to the Hub would hide exactly the plumbing the rehearsal exists to test. A local directory
given where a Hub id is expected is used as it is, as without stand-ins.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from common.errors import DataError

ENV = "HYBRID_STANDINS"
REWRITE = "rewrite the stand-ins with `python -m rehearsal.standins`"
log = logging.getLogger(__name__)
_announced: set[str] = set()


def standin_root() -> Path | None:
    """The stand-in directory, or None when the Hub is the real one. Read at call time."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None
    root = Path(value)
    if not root.is_dir():
        raise DataError(f"{ENV}={value}: not a directory; unset it to load from the Hugging Face Hub")
    return root


def _announce(hub_id: str, path: Path) -> None:
    if hub_id not in _announced:
        _announced.add(hub_id)
        log.info("stand-in for %s: %s (random weights or generated rows, not the Hub's)", hub_id, path)


def model_source(repo: str) -> str:
    """Where to load checkpoint or tokenizer `repo` (a Hub id or a local directory) from."""
    root = standin_root()
    if root is None or Path(repo).is_dir():
        return repo
    path = root / "models" / repo
    if not (path / "config.json").is_file():
        raise DataError(f"{ENV}: no stand-in for {repo} (expected {path}/config.json); {REWRITE}")
    _announce(repo, path)
    return str(path)


def dataset_file(source: str, split: str) -> str | None:
    """The stand-in parquet file for split `split` of Hub data set `source`, or None without stand-ins."""
    root = standin_root()
    if root is None:
        return None
    path = root / "datasets" / source / f"{split}.parquet"
    if not path.is_file():
        raise DataError(f"{ENV}: no stand-in for the {source} data set's {split} split (expected {path}); {REWRITE}")
    _announce(f"{source}/{split}", path)
    return str(path)


@contextmanager
def harness_datasets() -> Iterator[None]:
    """While open, with stand-ins on, lm-eval's downloads read the stand-ins instead.

    The harness loads each task's data itself, through `datasets.load_dataset(path, name)`; there
    is no id to map before the call, so the call is replaced: `path` and `name` (`default` when
    the task names none) select `<root>/datasets/<path>/<name>/`, and each parquet file there is
    the split of its name. Without stand-ins this changes nothing."""
    root = standin_root()
    if root is None:
        yield
        return
    import datasets

    real = datasets.load_dataset

    def load_standin(path: str, name: str | None = None, **_ignored):
        directory = root / "datasets" / path / (name or "default")
        files = sorted(directory.glob("*.parquet"))
        if not files:
            raise DataError(f"{ENV}: no stand-in for the harness data set {path} ({name or 'default'}); "
                            f"expected {directory}/<split>.parquet; {REWRITE}")
        _announce(f"{path}/{name or 'default'}", directory)
        return real("parquet", data_files={f.stem: str(f) for f in files})

    datasets.load_dataset = load_standin
    try:
        yield
    finally:
        datasets.load_dataset = real
