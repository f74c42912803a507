"""The Figure 2 (right) and Figure 4 stages' inputs and settings: programming from MAD's searched
alphas refuses a layout that differs from the hybrid's, and bad settings are one-line errors."""

from __future__ import annotations

import json

import pytest

from common.config import from_dict
from common.errors import ConfigError, DataError
from papers.manticore.programmed import ProgrammedConfig, completions_chance, corner, mad_alphas
from papers.manticore.projector_budget import ProjectorBudgetConfig


def write_mad(path, components, n_blocks, programming=True):
    """A mad_experiments result whose Table 2 search (one block) differs from its programming search."""
    def row(alpha):
        return {"manticore": {"alphas": [[0.9, 0.1]], "trajectory": [[[0.5, 0.5]]]},
                "programming": {"alphas": [[1 - alpha, alpha]] * n_blocks, "trajectory": [[[0.5, 0.5]] * n_blocks]}}

    # seeds listed 1 first: the first seed is the stage's first, not the smallest
    path.write_text(json.dumps({"components": components, "n_blocks": 1, "seeds": [1, 0],
                                "programming": {"n_blocks": n_blocks} if programming else None,
                                "tasks": {"mad/a": {"seeds": {"1": row(0.75), "0": row(0.5)}}}}))


def test_programming_reads_each_tasks_alphas(tmp_path):
    """The first seed's search of each task, as the paper ran one per task."""
    write_mad(tmp_path / "mad.json", ["gpt_neo", "mamba"], 2)
    searched = mad_alphas(tmp_path / "mad.json", ProgrammedConfig())
    assert searched == {"mad/a": {"alphas": [[0.25, 0.75]] * 2, "trajectory": [[[0.5, 0.5]] * 2]}}


@pytest.mark.parametrize("components, n_blocks", [(["mamba", "gpt_neo"], 2), (["gpt_neo", "mamba"], 1)])
def test_programming_refuses_another_layout(tmp_path, components, n_blocks):
    write_mad(tmp_path / "mad.json", components, n_blocks)
    with pytest.raises(ConfigError, match="same components in the same order"):
        mad_alphas(tmp_path / "mad.json", ProgrammedConfig())


def test_programming_needs_the_programming_search(tmp_path):
    write_mad(tmp_path / "mad.json", ["gpt_neo", "mamba"], 2, programming=False)
    with pytest.raises(ConfigError, match="set mad_experiments.programming"):
        mad_alphas(tmp_path / "mad.json", ProgrammedConfig())


def test_programming_refuses_mad_searches_of_another_profile(tmp_path):
    write_mad(tmp_path / "mad.json", ["gpt_neo", "mamba"], 2)
    mad = json.loads((tmp_path / "mad.json").read_text())
    (tmp_path / "mad.json").write_text(json.dumps({**mad, "profile": "tiny"}))
    assert mad_alphas(tmp_path / "mad.json", ProgrammedConfig(), "tiny")
    with pytest.raises(DataError, match="mad_experiments ran at profile tiny, this stage at smoke"):
        mad_alphas(tmp_path / "mad.json", ProgrammedConfig(), "smoke")


def test_programming_needs_the_mad_results(tmp_path):
    with pytest.raises(DataError, match="mad_experiments"):
        mad_alphas(tmp_path / "missing.json", ProgrammedConfig())


def test_corner_finds_a_grid_point():
    sweep = [{"alphas": [[1.0, 0.0], [0.0, 1.0]], "val_loss": 2.0},
             {"alphas": [[0.0, 1.0], [1.0, 0.0]], "val_loss": 3.0}]
    assert corner(sweep, (0.0, 1.0)) == 2.0 and corner(sweep, (1.0, 0.0)) == 3.0


@pytest.mark.parametrize("cls, raw, match", [
    (ProgrammedConfig, {"sweep_points": [0.0, 0.5]}, "must include 0 and 1"),
    (ProgrammedConfig, {"n_blocks": 3}, "need 2"),
    (ProgrammedConfig, {"components": ["gpt_neo"]}, "exactly two"),
    (ProgrammedConfig, {"seeds": [0, 0]}, "seeds: give each once"),
    (ProgrammedConfig, {"components": ["gpt_neo", "gpt_neo"]}, r"components: give at least 1, each once"),
    (ProgrammedConfig, {"seed": 3}, "list 3 there instead"),
    (ProjectorBudgetConfig, {"budgets": [30, 0]}, "increasing order"),
    (ProjectorBudgetConfig, {"n_blocks": 2}, "one block"),
])
def test_bad_settings_are_one_line_errors(cls, raw, match):
    with pytest.raises(ConfigError, match=match):
        from_dict(cls, raw, where="stage").check()


def test_the_completions_chance_is_the_unigram_loss_of_the_scored_labels(tmp_path):
    """Worked by hand: training tokens 0,0,1 (pad excluded) give add-one probabilities over 3 ids of
    3/6, 2/6, 1/6; the scored validation labels are each row's tokens but its first, padding out."""
    import math

    import datasets

    from common.data.manifest import write_manifest

    splits = {"train": {"input_ids": [[0, 0, 1, 2]], "attention_mask": [[1, 1, 1, 0]]},
              "validation": {"input_ids": [[2, 1, 2, 0], [0, 0, 0, 0]], "attention_mask": [[1, 1, 1, 0], [1, 1, 0, 0]]}}
    path = tmp_path / "completions"
    datasets.DatasetDict({s: datasets.Dataset.from_dict(r) for s, r in splits.items()}).save_to_disk(path)
    write_manifest(path, stage="test", params={}, counts={})
    # scored labels: 1, 2 from the first row, 0 from the second
    expected = -(math.log(2 / 6) + math.log(1 / 6) + math.log(3 / 6)) / 3
    assert abs(completions_chance(path, 3) - expected) < 1e-12
