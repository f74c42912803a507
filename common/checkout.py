"""Copies of this checkout's source, for runs that must leave the checkout alone: smoke trials
(`common.smoke`), rehearsals (`rehearsal.run`) and the tests' throwaway repositories."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path


def source_files(src: Path) -> list[str]:
    """The files git would hand a fresh clone, plus new files it does not ignore, except those under
    data/: an untracked file there is a pipeline's output, possibly half-written by a run in progress."""
    def listed(*options: str) -> list[str]:
        out = subprocess.run(["git", "ls-files", "-z", *options], cwd=src, check=True, capture_output=True).stdout
        return list(filter(None, out.decode().split("\0")))

    new = [name for name in listed("--others", "--exclude-standard") if not name.startswith("data/")]
    return [name for name in listed() + new if (src / name).is_file()]


def copy_source(src: Path, dst: Path, skip: Iterable[Path] = ()) -> None:
    """Copy `source_files(src)` into `dst`, leaving out any under a path of `skip` (relative to `src`)."""
    skip = set(skip)
    for name in source_files(src):
        if any(Path(name) == out or out in Path(name).parents for out in skip):
            continue
        (dst / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / name, dst / name)


def init_repository(path: Path, commit: bool = False) -> None:
    """Make `path` a git repository of its own: under this checkout's ignored data/, DVC would
    otherwise refuse its dvc.yaml files. With `commit`, its files become the first commit."""
    subprocess.run(["git", "init", "--quiet"], cwd=path, check=True)
    if commit:
        for cmd in (["git", "add", "-A"], ["git", "-c", "user.name=trial", "-c", "user.email=trial@localhost",
                                          "commit", "--quiet", "-m", "copy of the checkout"]):
            subprocess.run(cmd, cwd=path, check=True, capture_output=True)


def set_profile(repo: Path, profile: str) -> None:
    """Switch the copy's `params.yaml` to `profile`, keeping its comments."""
    path = repo / "params.yaml"
    text, found = re.subn(r"^profile: *\S+", f"profile: {profile}", path.read_text(), count=1, flags=re.M)
    if not found:
        raise ValueError(f"{path}: no top-level `profile:` line")
    path.write_text(text)
