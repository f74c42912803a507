"""The default `tiny` profile end to end, as `make repro` runs it (minutes: marked slow)."""

from __future__ import annotations

import pytest
import yaml

from tests.test_dvc import _run, copy_checkout


@pytest.mark.slow
def test_tiny_pipeline_reproduces_and_settles(tmp_path, pytestconfig):
    import sys

    repo = copy_checkout(tmp_path / "repo", profile="tiny")
    first = _run([sys.executable, "-m", "dvc", "repro"], repo, timeout=1800)
    assert "Running stage 'lm_baseline'" in first.stdout
    metrics = yaml.safe_load((repo / "results" / "lm_baseline.json").read_text())
    assert metrics["profile"] == "tiny" and metrics["final"]["step"] == 360
    assert metrics["final"]["val/loss"] < 2.0  # far below the uniform 8.1 nats of a 3.4k vocabulary
    assert "Running stage" not in _run([sys.executable, "-m", "dvc", "repro"], repo).stdout
