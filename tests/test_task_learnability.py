"""The issue's learnability check (slow): a small Llama-style model and a small Mamba, both from the
block library, beat chance on in-context recall (MAD, `tiny` settings of `params.yaml`) and on
ListOps (`tiny` block of `lra_generate`), through the functions whose numbers
`python -m benchmarks.task_learnability` records for docs/blocks-and-tasks.md. About a minute per
run on one core."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import task_learnability
from common.config import load_yaml, stage_config
from common.data.lra import lra_splits
from common.stages.lra_generate import LRAGenerateConfig
from tests.conftest import ROOT


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("model", task_learnability.MODELS)
def test_in_context_recall_beats_chance(tmp_path, model):
    score = task_learnability.recall(model, tmp_path)
    assert score["chance"] == 1 / 8  # vocabulary 16, multi-query: keys 0-7, values 8-15
    assert score["accuracy"] > 2 * score["chance"], score


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("model", task_learnability.MODELS)
def test_listops_beats_majority_class(tmp_path, model):
    score = task_learnability.listops(model, tmp_path)
    task = stage_config(load_yaml(ROOT / "params.yaml"), "lra_generate", LRAGenerateConfig, profile="tiny")
    labels = lra_splits(task.tasks["listops"])["validation"]["label"]
    majority = np.bincount(labels).max() / len(labels)  # chance computed here from the labels themselves
    assert score["chance"] == pytest.approx(majority)
    assert score["accuracy"] > majority + 0.1, score
