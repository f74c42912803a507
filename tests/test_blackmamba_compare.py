"""The measurements of the BlackMamba training comparison, against hand computations."""

from __future__ import annotations

import math

import pytest

from common.eval.chance import unigram_loss
from papers.blackmamba.train_compare import compare_flops, flops_to_reach


def test_flops_to_reach_interpolates_between_validations_and_takes_the_first_crossing():
    curve = [(10.0, 3.0), (20.0, 2.0), (30.0, 2.5), (40.0, 1.0)]
    assert flops_to_reach(curve, 2.5) == pytest.approx(15.0)  # half way from 3.0 to 2.0
    assert flops_to_reach(curve, 2.0) == 20.0
    assert flops_to_reach(curve, 3.5) == 10.0  # already below at the first validation
    assert flops_to_reach(curve, 0.5) is None


def test_unigram_loss_is_the_smoothed_cross_entropy():
    train, val = [[0, 0, 1], [0, 2]], [[1, 0]]
    counts = [3 + 1, 1 + 1, 1 + 1, 0 + 1]  # vocabulary 4, add-one
    p = [c / sum(counts) for c in counts]
    assert unigram_loss(train, val, 4) == pytest.approx(-(math.log(p[1]) + math.log(p[0])) / 2)


def _run(points):
    return {"final_val_loss": points[-1][1],
            "history": [{"train_flops": x, "val/loss": y} for x, y in points]}


def test_the_target_is_the_pair_s_worse_final_loss_and_both_reach_it_every_seed():
    models = {"blackmamba": {"seeds": {"0": _run([(1, 3.0), (2, 1.0)]), "1": _run([(1, 3.0), (2, 1.2)])}},
              "mamba": {"seeds": {"0": _run([(1, 3.0), (2, 2.0), (4, 1.4)]), "1": _run([(1, 3.0), (4, 1.5)])}}}
    result = compare_flops(models, "mamba")
    assert result["target_val_loss"] == 1.5
    # Seed 0: BlackMamba crosses 1.5 at 1 + (3 - 1.5) / 2 = 1.75; Mamba at 2 + 2 * 0.5 / 0.6.
    assert result["flops_to_target"]["blackmamba"][0] == pytest.approx(1.75)
    assert result["flops_to_target"]["mamba"][0] == pytest.approx(2 + 2 * 0.5 / 0.6)
    assert result["flops_to_target"]["mamba"][1] == 4
    assert result["ratio_over_blackmamba"][1] == pytest.approx(4 / (1 + 1.5 / 1.8))


def test_a_pair_is_compared_on_the_seeds_both_trained():
    """BlackMamba's extra seed is left out of the pair with a model that did not train it: neither
    its target nor its ratio."""
    models = {"blackmamba": {"seeds": {"0": _run([(1, 3.0), (2, 1.0)]), "1": _run([(1, 3.0), (2, 1.2)]),
                                       "3": _run([(1, 3.0), (2, 2.9)])}},
              "mamba": {"seeds": {"0": _run([(1, 3.0), (4, 1.4)]), "1": _run([(1, 3.0), (4, 1.5)])}}}
    result = compare_flops(models, "mamba")
    assert result["seeds"] == ["0", "1"] and result["target_val_loss"] == 1.5
    assert len(result["ratio_over_blackmamba"]) == 2


def test_lr_check_reads_a_section_whose_extra_seeds_name_the_routing_model():
    """lr_check trains only the compared models, but `train_compare.extra_seeds` at `tiny` also names
    the routing model that train_compare trains beside them: both stages accept the section, and a
    name that is neither is still refused."""
    from dataclasses import replace

    from common.errors import ConfigError
    from common.stages import load_stage
    from papers.blackmamba.compared_models import TRAIN_COMPARE, check_model_names, model_configs
    from papers.blackmamba.lr_check import LRCheckConfig
    from papers.blackmamba.model import ROUTING_MODEL
    from tests.conftest import ROOT

    cfg, profile, _ = load_stage(ROOT / "papers/blackmamba/params.yaml", "lr_check", LRCheckConfig,
                                 shared=TRAIN_COMPARE)
    assert profile == "tiny"
    assert ROUTING_MODEL in cfg.extra_seeds  # the case this guards
    compared = model_configs(cfg, 64, 16)
    check_model_names(cfg, compared)  # lr_check
    check_model_names(cfg, {**compared, ROUTING_MODEL: None})  # train_compare
    with pytest.raises(ConfigError, match="extra_seeds.blackmamba_shallow: no such model"):
        check_model_names(replace(cfg, extra_seeds={"blackmamba_shallow": [3]}), compared)
    with pytest.raises(ConfigError, match=f"extra_seeds.{ROUTING_MODEL}: no such model"):
        check_model_names(replace(cfg, routing_model=None), compared)
