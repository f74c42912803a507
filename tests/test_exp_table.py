"""`make exp-show PAPER=...` (`common.exp_table`): a paper's experiments in a table that fits a screen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from common.exp_table import render

STAGE = {"stages": {"score": {"wdir": "../..", "cmd": "python -m score", "deps": ["score.py"],
                              "params": [{"papers/demo/params.yaml": ["demo"]}, "profile"],
                              "metrics": [{"papers/demo/results/metrics.json": {"cache": False}}]}}}
# A stage that scores its params: loss = lr * steps, a number the test can predict for any override.
SCORE = """import json, yaml
cfg = yaml.safe_load(open("papers/demo/params.yaml"))["demo"]
profile = yaml.safe_load(open("params.yaml"))["profile"]
json.dump({"profile": profile, "claim-a": cfg["lr"] * cfg["steps"], "claim-b": cfg["steps"]},
          open("papers/demo/results/metrics.json", "w"))
"""


def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "DVC_NO_ANALYTICS": "1"}
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{cmd}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done


@pytest.mark.pipeline  # DVC experiments in a throwaway repository, about 20 s
def test_a_column_per_experiment_and_a_row_per_metric_with_the_changed_params(tmp_path):
    (tmp_path / "papers/demo/results").mkdir(parents=True)
    (tmp_path / "papers/demo/dvc.yaml").write_text(yaml.safe_dump(STAGE))
    (tmp_path / "papers/demo/params.yaml").write_text("demo:\n  lr: 0.5\n  steps: 10\n")
    (tmp_path / "params.yaml").write_text("profile: tiny\n")
    (tmp_path / "score.py").write_text(SCORE)
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"],
                [sys.executable, "-m", "dvc", "repro", "papers/demo/dvc.yaml"], ["git", "add", "-A"],
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"],
                [sys.executable, "-m", "dvc", "exp", "run", "-n", "more-steps", "-S",
                 "papers/demo/params.yaml:demo.steps=30", "papers/demo/dvc.yaml"]):
        run(cmd, tmp_path)
    table = run([sys.executable, "-m", "common.exp_table", "demo"], tmp_path).stdout.splitlines()
    # `dvc exp run` leaves the experiment's params and results in the workspace
    assert table[:2] == ["workspace: demo.steps=30", "more-steps: demo.steps=30"]
    header, rule, *rows = table[3:]
    assert header.split() == ["demo", "metrics", "workspace", "master", "more-steps"] or \
        header.split() == ["demo", "metrics", "workspace", "main", "more-steps"]
    assert set(rule) <= {"-", " "}
    assert [row.split() for row in rows] == [["profile", "tiny", "tiny", "tiny"],
                                             ["claim-a", "15", "5", "15"], ["claim-b", "30", "10", "30"]]


def test_values_are_short_and_a_paper_without_metrics_is_one_error():
    from common.errors import DataError

    metrics = {"papers/p/results/metrics.json": {"data": {"x": 0.123456789, "y": None}}}
    shown = [{"rev": "workspace", "name": None, "data": {"metrics": metrics, "params": {}}, "experiments": None}]
    assert render(shown, "p").splitlines()[2:] == ["x          0.1235", "y          -"]  # no commit: no params line
    with pytest.raises(DataError, match=r"^papers/q/results/metrics.json: no metrics in any experiment"):
        render(shown, "q")
    json.dumps(shown)  # the shape `dvc exp show --json` prints
