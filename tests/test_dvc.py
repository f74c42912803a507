"""The real `dvc repro` at the smoke profile, in a throwaway copy of the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import ROOT


def _run(cmd: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    # Stage commands call `python`: put this interpreter's directory first on PATH.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "DVC_NO_ANALYTICS": "1", "CI": "true"}
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def copy_checkout(repo: Path, profile: str) -> Path:
    """This checkout's source files (tracked, and new ones not yet added), as a fresh git repository
    switched to `profile`. Untracked files under data/ are pipeline outputs, possibly half-written by
    a run in progress, and are left out."""
    repo.mkdir(parents=True, exist_ok=True)
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    new = subprocess.run(["git", "ls-files", "-z", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    names = [*tracked.stdout.split("\0"), *(n for n in new.stdout.split("\0") if not n.startswith("data/"))]
    for name in filter(None, names):
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["profile"] = profile
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "smoke"]):
        subprocess.run(cmd, cwd=repo, check=True, capture_output=True)
    return repo


def test_repro_runs_every_root_stage_then_nothing(smoke_root_repro):
    smoke_repo, first = smoke_root_repro
    for stage in ("generate_stories", "train_tokenizer", "tokenize", "lm_baseline", "mad_suite", "lra_generate"):
        assert f"Running stage '{stage}'" in first, first[-2000:]
    for out in ("data/stories/manifest.json", "data/tokenizer/tokenizer.json",
                "data/tokenized/padded/manifest.json", "results/lm_baseline.json", "results/lm_baseline_loss.png"):
        assert (smoke_repo / out).is_file(), out
    second = _run([sys.executable, "-m", "dvc", "repro"], smoke_repo)
    assert "Running stage" not in second.stdout
    # The root pipeline only: the papers' pipelines have not run here.
    status = _run([sys.executable, "-m", "dvc", "status", "dvc.yaml"], smoke_repo)
    assert "up to date" in status.stdout
