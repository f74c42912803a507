"""The real `dvc repro` at the smoke profile, in a throwaway copy of the repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from common.checkout import copy_source, init_repository, set_profile
from tests.conftest import ROOT

pytestmark = pytest.mark.pipeline  # end to end: `make test-pipeline`


def _run(cmd: list[str], cwd: Path, timeout: float = 1800) -> subprocess.CompletedProcess:
    # The timeout catches a hang, not slowness: a smoke pipeline took 5 min alone and over 10 min
    # within `make test` on a slow 2-core machine (2026-11-26).
    # Stage commands call `python`: put this interpreter's directory first on PATH.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "DVC_NO_ANALYTICS": "1", "CI": "true"}
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def copy_checkout(repo: Path, profile: str) -> Path:
    """This checkout's source files (`common.checkout.source_files`), as a fresh git repository
    switched to `profile`."""
    repo.mkdir(parents=True, exist_ok=True)
    copy_source(ROOT, repo)
    set_profile(repo, profile)
    init_repository(repo, commit=True)
    return repo


@pytest.mark.long
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


def committed_outputs(dvc_file: Path) -> list[tuple[str, dict]]:
    """(path, options) of every output that git holds (`cache: false`) in one dvc.yaml."""
    stages = yaml.safe_load(dvc_file.read_text())["stages"]
    return [(path, options) for stage in stages.values()
            for key in ("outs", "metrics", "plots") for entry in stage.get(key, []) if isinstance(entry, dict)
            for path, options in entry.items() if options and options.get("cache") is False]


def test_every_committed_result_persists():
    """DVC deletes a stage's outputs before it runs the command unless they are `persist: true`; the
    stages write every output atomically, so with it a stage that fails leaves the results it would
    have replaced."""
    dvc_files = [ROOT / "dvc.yaml", *sorted(ROOT.glob("papers/*/dvc.yaml"))]
    outputs = [(f.relative_to(ROOT), path, options) for f in dvc_files for path, options in committed_outputs(f)]
    assert len(outputs) > 40
    assert [(str(f), path) for f, path, options in outputs if not options.get("persist")] == []


def test_a_failed_repro_leaves_the_committed_results_in_place(tmp_path):
    repo = copy_checkout(tmp_path / "repo", profile="smoke")
    results = ("results/mad_suite.json", "results/mad_suite.md")
    committed = {name: (repo / name).read_bytes() for name in results}
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["mad_suite"]["smoke"] = {**(params["mad_suite"].get("smoke") or {}), "max_stepz": 1}
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "DVC_NO_ANALYTICS": "1"}
    failed = subprocess.run([sys.executable, "-m", "dvc", "repro", "--single-item", "mad_suite"], cwd=repo, env=env,
                            capture_output=True, text=True, timeout=300)
    assert failed.returncode != 0 and "max_stepz" in failed.stdout + failed.stderr, failed.stderr[-2000:]
    assert {name: (repo / name).read_bytes() for name in results} == committed
