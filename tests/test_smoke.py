"""`make smoke PAPER=...` (`common.smoke`): a pipeline at `smoke` in a copy, the checkout untouched."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from common import smoke
from tests.conftest import ROOT


def digest(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


@pytest.mark.pipeline  # the root pipeline under DVC, about a minute
def test_a_trial_runs_in_its_copy_and_leaves_the_checkout_alone(tmp_path):
    watched = [ROOT / "params.yaml", ROOT / "dvc.lock", *sorted((ROOT / "results").glob("*"))]
    before = digest(watched)
    work = tmp_path / "trial"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "common.smoke", "root", "--work", str(work)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "profile: smoke" in (work / "params.yaml").read_text().splitlines()
    assert "Running stage 'lm_baseline'" in done.stdout
    assert (work / "results" / "lm_baseline.json").is_file() and (work / "dvc.lock").is_file()
    assert f"rm -rf {work.resolve()}" in done.stderr  # the log says how to undo it
    rewritten = subprocess.run(["git", "diff", "--name-only"], cwd=work, capture_output=True, text=True).stdout
    assert "results/lm_baseline.json" in rewritten.split()
    assert digest(watched) == before


def test_a_directory_that_is_not_a_trial_is_never_deleted(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    done = subprocess.run([sys.executable, "-m", "common.smoke", "root", "--work", str(tmp_path / "mine")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "is not a smoke trial's copy" in done.stderr
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


@pytest.mark.parametrize("argv, message", [([], "the following arguments are required: paper"),
                                           (["nopaper"], "invalid choice: 'nopaper'"),
                                           (["root", "--work", str(ROOT)], "holds this checkout")])
def test_bad_arguments_are_one_line_and_status_2(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        smoke.main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_the_copy_holds_the_checkout_source_at_profile_smoke(tmp_path):
    (tmp_path / "copy").mkdir()  # an empty directory is taken
    smoke.prepare(tmp_path / "copy")
    copy = tmp_path / "copy"
    assert (copy / "papers" / "blackmamba" / "dvc.yaml").read_bytes() == \
        (ROOT / "papers" / "blackmamba" / "dvc.yaml").read_bytes()
    assert "profile: smoke" in (copy / "params.yaml").read_text().splitlines()
    assert (copy / "params.yaml").read_text().startswith("#")  # the comments stay
    assert not (copy / "data" / "stories").exists()  # outputs are remade there, never copied
    assert (copy / smoke.MARKER).is_file()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=copy, capture_output=True, text=True, check=True)
    assert status.stdout == ""  # one commit of everything, so `git diff` shows what a trial rewrites
    smoke.prepare(copy)  # a second trial starts from a fresh copy
    assert (copy / smoke.MARKER).is_file()
