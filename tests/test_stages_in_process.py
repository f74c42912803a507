"""Every stage of every pipeline runs at the smoke profile: each stage's `main` is called in this
process, in dependency order, with its `dvc.yaml` arguments, in a throwaway copy of the checkout.

This is `make test-pipeline`'s check that the stage code runs end to end. A stage run by DVC is a new process
that spends about 10 s importing torch and Lightning before its first step (and as much again in
each worker process); here they are imported once, and every stage runs its jobs in this process
(`workers: 1`). The DVC runs of the paper pipelines, with their checks on the results, are the
`slow` tests `tests/test_<paper>_pipeline.py`, run by `make test-slow`."""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from common import parallel
from tests.conftest import ROOT
from tests.test_dvc import copy_checkout
from tests.test_readme_commands import examples

pytestmark = pytest.mark.pipeline  # end to end: `make test-pipeline`

PIPELINES = [Path("dvc.yaml"), *sorted(p.relative_to(ROOT) for p in (ROOT / "papers").glob("*/dvc.yaml"))]


def _outs(stage: dict) -> list[str]:
    return [next(iter(entry)) if isinstance(entry, dict) else entry
            for key in ("outs", "metrics", "plots") for entry in stage.get(key, [])]


def stages_in_order() -> list[tuple[str, str, list[str], list[str]]]:
    """(label, module, argv, outputs) of every stage of every pipeline, each after the stages whose
    outputs it reads. Every pipeline runs from the repository root (papers' `wdir: ../..`)."""
    stages = {}
    for path in PIPELINES:
        for name, stage in yaml.safe_load((ROOT / path).read_text())["stages"].items():
            words = shlex.split(stage["cmd"])
            stages[f"{path}:{name}"] = (words[2], words[3:], stage.get("deps", []), _outs(stage))
    producer = {out: label for label, (*_, outs) in stages.items() for out in outs}

    def upstream(label: str) -> set[str]:
        deps = stages[label][2]
        return {producer[out] for out in producer for dep in deps if dep == out or dep.startswith(f"{out}/")}

    ordered: list[str] = []
    while len(ordered) < len(stages):
        ready = [label for label in stages if label not in ordered and upstream(label) <= set(ordered)]
        assert ready, f"dependency cycle among {set(stages) - set(ordered)}"
        ordered += ready
    return [(label, stages[label][0], stages[label][1], stages[label][3]) for label in ordered]


def one_worker(repo: Path, monkeypatch) -> None:
    """Every stage runs its jobs in the calling process: sections that set `workers` get 1 at smoke,
    and those that leave it to the core count (`default_workers`) get one core."""
    monkeypatch.setattr(parallel, "default_workers", lambda: 1)
    for path in [repo / "params.yaml", *sorted((repo / "papers").glob("*/params.yaml"))]:
        params = yaml.safe_load(path.read_text())
        for section in params.values():
            if isinstance(section, dict) and any("workers" in (block or {}) for block in section.values()):
                section["smoke"] = {**(section.get("smoke") or {}), "workers": 1}
        path.write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.mark.long
def test_every_stage_of_every_pipeline_runs_and_writes_its_outputs(tmp_path, monkeypatch):
    repo = copy_checkout(tmp_path / "repo", profile="smoke")
    one_worker(repo, monkeypatch)
    monkeypatch.chdir(repo)
    ran = []
    for label, module, argv, outs in stages_in_order():
        try:
            importlib.import_module(module).main(argv)
        except SystemExit as stop:
            pytest.fail(f"{label} exited with status {stop.code} (its log is above)")
        missing = [out for out in outs if not (repo / out).exists()]
        assert not missing, f"{label} did not write {missing}"
        ran.append(label)
    assert len(ran) == sum(len(yaml.safe_load((ROOT / p).read_text())["stages"]) for p in PIPELINES)

    run_the_documented_evaluations(repo, tmp_path)


EVALUATIONS = ROOT / "docs" / "gpu-and-export.md"
EVALUATION_MODULES = ("common.eval.lm_eval_cli", "common.models.hf_causal_lm", "lm_eval")


def run_the_documented_evaluations(repo: Path, scratch: Path) -> None:
    """The lm-eval commands of docs/gpu-and-export.md, as written, on the BlackMamba models and story
    tasks this smoke run made: the `hybrid-lm` model, then the export and lm-eval's own `hf` model (a
    story line longer than a smoke model's 64 tokens once failed it with a bare AssertionError)."""
    commands = [e.text for e in examples(EVALUATIONS) if e.language == "bash"
                and shlex.split(e.text)[:3][-1] in EVALUATION_MODULES]
    assert len(commands) == 3, commands
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(scratch / "hf_modules")}
    for command in commands:
        done = subprocess.run(command, shell=True, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
        if "lm_eval" in command:  # the harness's table, with a score for each story task
            assert all(re.search(rf"\|{task} *\|.*\| *[01]\.\d{{4}}\|", done.stdout)
                       for task in ("stories_cloze", "stories_next_line")), done.stdout[-2000:]
