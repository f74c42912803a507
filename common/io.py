"""Atomic outputs (a stage either leaves a complete output or none at all), and JSON inputs read
with a one-line error when they are missing or damaged.

In a distributed run every process runs the whole stage, but only global rank zero's outputs are
kept: the other ranks write into scratch files and directories that are removed instead of renamed
into place (`common.distributed`), so no output is ever written by two processes at once."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common.distributed import is_global_zero
from common.errors import DataError

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a scratch directory next to `path`; on success it replaces `path` in one rename.

    On any exception, or in a process other than global rank zero, the scratch directory is removed
    and an existing `path` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    tmp.chmod(0o777 & ~_UMASK)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not is_global_zero():
        shutil.rmtree(tmp, ignore_errors=True)
        return
    if path.is_dir() and not path.is_symlink():
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        path.rename(old)
        tmp.rename(path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        if path.exists() or path.is_symlink():
            path.unlink()
        tmp.rename(path)


@contextlib.contextmanager
def atomic_file(path: str | Path, mode: str = "w") -> Iterator:
    """Open a temporary file next to `path` for writing; rename it over `path` when closed cleanly
    (in global rank zero; other processes of a distributed run remove it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600 files; outputs should be as readable as any other
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
        if is_global_zero():
            os.replace(tmp, path)
        else:
            os.unlink(tmp)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: str | Path, payload: object) -> None:
    """Write `payload` as indented, key-sorted JSON, atomically."""
    with atomic_file(path) as handle:
        json.dump(payload, handle, indent=2, sort_keys=True)
        handle.write("\n")


def load_json(path: str | Path, hint: str) -> Any:
    """The JSON document at `path`; a missing, unreadable or malformed file is a `DataError` ending
    in `hint` (what to run to make it)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: missing; {hint}")
    try:
        return json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: not valid JSON ({type(err).__name__}); {hint}") from None
