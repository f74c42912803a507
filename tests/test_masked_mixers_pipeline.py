"""The real `dvc repro papers/masked_mixers/dvc.yaml` at the smoke profile, in a throwaway copy of
the repository; then the notebook runs on what it produced, and a second repro has nothing to do."""

from __future__ import annotations

import json
import sys

import nbformat
from nbclient import NotebookClient

from tests.test_dvc import _run, copy_checkout

STAGES = ("clm", "representation", "generation", "autoencoders", "bidirectional", "summaries", "retrieval", "memory",
          "report")
RESULTS = "papers/masked_mixers/results"


def test_smoke_pipeline_runs_every_stage_and_the_notebook_reads_it(tmp_path):
    repo = copy_checkout(tmp_path / "repo", profile="smoke")
    first = _run([sys.executable, "-m", "dvc", "repro", "papers/masked_mixers/dvc.yaml"], repo, timeout=600)
    for stage in STAGES:
        assert f"Running stage 'papers/masked_mixers/dvc.yaml:{stage}'" in first.stdout, first.stdout[-2000:]
    results = repo / RESULTS
    for name in ("clm_loss_vs_time.png", "clm_loss_vs_steps.png", "autoencoders_loss.png", "bidirectional_loss.png",
                 "claims.md"):
        assert (results / name).stat().st_size > 0, name

    clm = json.loads((results / "clm.json").read_text())
    assert clm["profile"] == "smoke"
    for name, run in clm["models"].items():
        assert run["steps"]["steps"] == clm["steps"], f"{name}: the step run must stop at exactly {clm['steps']}"
        assert run["time"]["steps"] >= 1 and run["time"]["val_loss"] > 0
    rep = json.loads((results / "representation.json").read_text())["results"]
    assert {f"{m}/{s}/{t}" for m in ("mixer_flat", "llama_h4") for s in ("untrained", "trained")
            for t in ("full", "last_token")} <= set(rep)
    summaries = json.loads((results / "summaries.json").read_text())
    assert summaries["source"] == "corpus" and summaries["empty_summaries"] == 0
    retrieval = json.loads((results / "retrieval.json").read_text())
    assert summaries["counts"] == {"train": retrieval["n_train"], "validation": retrieval["n_test"]}
    for source in retrieval["sources"].values():
        for c in retrieval["candidates"]:
            assert 0 <= source[f"c{c}"]["test_top1"] <= 1
    assert retrieval["infonce"]["texts_per_s"] > 0
    memory = json.loads((results / "memory.json").read_text())
    assert memory["rows"] and not memory["failed"]
    readme = (repo / "papers/masked_mixers/README.md").read_text()
    assert "| claim | paper | ours | profile | verdict |" in readme and "| smoke |" in readme

    notebook_path = repo / "notebooks" / "masked_mixers.ipynb"
    notebook = nbformat.read(notebook_path, as_version=4)
    NotebookClient(notebook, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(notebook_path.parent)}}).execute()
    outputs = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.get("outputs", [])]
    assert not [out for out in outputs if out.get("output_type") == "error"]

    second = _run([sys.executable, "-m", "dvc", "repro", "papers/masked_mixers/dvc.yaml"], repo)
    assert "Running stage" not in second.stdout, second.stdout[-2000:]
