"""`mad_sizing`: the chance level of a MAD task, and the budget from which a network stays above it."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from common.data.mad import IGNORE_INDEX, MADTaskConfig, generate
from papers.manticore.mad_sizing import target_chance
from papers.manticore.sizing import smallest


@pytest.mark.parametrize("task", ["in-context-recall", "selective-copying", "memorization"])
def test_chance_is_the_majority_rate_and_the_unigram_loss_of_the_scored_test_targets(task):
    cfg = MADTaskConfig(task=task, vocab_size=16, seq_len=64, num_train_examples=32, num_test_examples=24, seed=1)
    scored = [int(t) for row in generate(cfg)["test_targets"] for t in row if t != IGNORE_INDEX]
    counts = Counter(scored)
    got = target_chance(cfg)
    assert got["scored_positions"] == len(scored)
    assert got["chance"] == pytest.approx(max(counts.values()) / len(scored))
    assert got["chance_loss"] == pytest.approx(-sum(c / len(scored) * math.log(c / len(scored))
                                                    for c in counts.values()))


def test_a_network_is_above_chance_from_the_smallest_budget_whose_larger_ones_all_are():
    budgets = [80, 300, 1000]
    assert smallest(budgets, {80: False, 300: True, 1000: True}) == 300
    assert smallest(budgets, {80: True, 300: False, 1000: True}) == 1000, "a lucky short run does not count"
    assert smallest(budgets, {80: True, 300: True, 1000: False}) is None
    assert smallest(budgets, {80: True, 300: True, 1000: True}) == 80
