"""The stages that train nothing at `tiny` still write every output DVC expects of them (an empty run
directory among them) and results that say so, before reading any input."""

from __future__ import annotations

import importlib
import json

import pytest
import yaml

from tests.conftest import ROOT

# stage: (its paths besides --params, the results key that lists what it trained)
STAGES = {
    "nl_experiments": (("components", "completions", "general", "run-dir", "out", "plot"), "trained"),
    "finetune_tasks": (("components", "general", "stories", "run-dir", "out", "plot"), "trained"),
    "programmed": (("components", "completions", "general", "mad", "run-dir", "out", "plot"), "runs"),
    "projector_budget": (("components", "completions", "general", "run-dir", "out", "plot"), "budgets"),
    "mad_sizing": (("run-dir", "out"), None),
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_a_stage_that_trains_nothing_at_tiny_writes_its_outputs(stage, tmp_path):
    params = yaml.safe_load((ROOT / "papers/manticore/params.yaml").read_text())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({**params, "profile": "tiny"}))
    paths, key = STAGES[stage]
    # Inputs that do not exist: a stage that trains nothing must not read them.
    files = {name: tmp_path / ("out.json" if name == "out" else "plot.png" if name == "plot" else name)
             for name in paths}
    argv = ["--params", str(tmp_path / "params.yaml")] + [arg for name, path in files.items()
                                                          for arg in (f"--{name}", str(path))]
    importlib.import_module(f"papers.manticore.{stage}").main(argv)
    result = json.loads(files["out"].read_text())
    assert result["profile"] == "tiny"
    assert files["run-dir"].is_dir() and not any(files["run-dir"].iterdir())
    if "plot" in files:
        assert files["plot"].stat().st_size > 1000
    if key is not None:
        assert not result[key]
    else:  # mad_sizing: no sizing runs, each task's chance level
        assert result["summary"]["budgets"] == [] and all(0 < t["chance"] < 1 for t in result["tasks"].values())
