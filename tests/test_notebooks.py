"""Every notebook in notebooks/ runs top to bottom on the committed results, and is committed as it
runs: with every cell's id and outputs (`make notebooks` writes them)."""

from __future__ import annotations

import copy
import re

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def shown(cell) -> list[tuple[str, str, bool]]:
    """What a reader sees of a code cell: each output's kind, its text, and whether it has a figure.
    Figures are compared by presence only: their pixels are matplotlib's business."""
    seen = []
    for out in cell.get("outputs", []):
        text = out.get("text") or out.get("data", {}).get("text/plain") or out.get("evalue", "")
        text = re.sub(r" at 0x[0-9a-f]+", "", "".join(text))  # an object's address changes every run
        seen.append((out["output_type"], text, "image/png" in out.get("data", {})))
    return seen


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_to_its_committed_outputs(path):
    committed = nbformat.read(path, as_version=4)
    assert all(cell.get("id") for cell in committed.cells), f"{path.name}: a cell without an id; run `make notebooks`"
    notebook = copy.deepcopy(committed)
    resources = {"metadata": {"path": str(path.parent)}}
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources=resources).execute()
    errors = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
              if out.get("output_type") == "error"]
    assert not errors
    for fresh, saved in zip(notebook.cells, committed.cells):
        if fresh.cell_type == "code":
            assert shown(saved) == shown(fresh), f"{path.name}, cell {saved.id}: run `make notebooks`"
