"""Figures S1-S2 measured by zero gradients, against counts worked out by hand from the masks; and
the ledger rows built on them."""

from __future__ import annotations

import pytest
import torch

from common.blocks import build_block
from common.claims.build import build_ledger, load_spec
from papers.masked_mixers import evidence
from papers.masked_mixers.expansion import trace_mixer
from tests.conftest import ROOT


def hand_count(n: int, e: float, k: int, heads: int) -> dict:
    """What the tril masks imply for `n -> h -> n` (h = e n), per head and kernel tap:
    - flat (e = 1): one n x n tril conv, n(n+1)/2 weights + n biases, all used;
    - e > 1: conv 1 is h x n, rows i < n tril (n(n+1)/2), rows i >= n full ((h - n) n); conv 2 is
      n x h tril, row t reads hidden 0..t (n(n+1)/2). Conv 2 never reads hidden rows >= n, so conv
      1's rows >= n, weights and biases, are dead: (h - n)(n + 1);
    - e < 1: conv 1 is h x n tril (h(h+1)/2); conv 2 is n x h, row t reads min(t, h-1)+1 hidden
      rows (h(h+1)/2 + (n - h) h). Inputs at positions >= h reach no hidden row: n - h lost."""
    h = round(e * n)
    tri = lambda m: m * (m + 1) // 2  # noqa: E731
    if e == 1:
        weights, biases, dead, lost = tri(n), n, 0, 0
    elif e > 1:
        weights, biases, dead, lost = tri(n) + (h - n) * n + tri(n), h + n, (h - n) * n * k + (h - n), 0
    else:
        weights, biases, dead, lost = tri(h) + tri(h) + (n - h) * h, h + n, 0, n - h
    trainable = (weights * k + biases) * heads
    return {"trainable": trainable, "dead": dead * heads, "lost_positions": lost}


@pytest.mark.parametrize("e", [0.5, 0.25, 1.0, 2.0, 3.0])
@pytest.mark.parametrize(("k", "heads"), [(1, 1), (3, 1), (1, 2)])
def test_zero_gradients_count_exactly_what_the_masks_leave_unused(e, k, heads):
    n, d = 16, 8
    torch.manual_seed(0)
    mixer = build_block("mixer", d, shared={"n_ctx": n}, expansion=e, kernel_size=k, n_heads=heads)
    got = trace_mixer(mixer, d, seed=0)
    assert {key: got[key] for key in ("trainable", "dead", "lost_positions")} == hand_count(n, e, k, heads)
    assert got["first_lost_position"] == (round(e * n) if e < 1 else None)


def _exp(dead: dict[str, float], lost: dict[str, int], rep_flat=(0.6, 0.62, 0.61), rep_exp=(0.9, 0.92, 0.95)) -> dict:
    def rows(between, full):
        return {str(s): {"last_token": {"hamming_top5_earlier": b}, "full": {"hamming_top5": f}}
                for s, (b, f) in enumerate(zip(between, full))}
    expansions = {e: {"dead_fraction": dead[e], "lost_positions": lost[e]} for e in dead}
    return {"profile": "tiny", "d_model": 8, "n_ctx": 16, "expansions": expansions, "representation_size": "d256_l8",
            "n_inputs": 4, "n_tokens": 32,
            "representation": {"mixer_flat": rows(rep_flat, (0, 0, 0)), "mixer_expanded": rows(rep_exp, (0, 0.01, 0))}}


def _verdicts(exp: dict) -> dict[str, str]:
    """The verdicts of the Figure S1-S3 rows of claims.yaml on these results."""
    spec = load_spec(ROOT / "papers/masked_mixers/claims.yaml")
    rows = [claim for claim in spec["claims"] if claim["id"].startswith("fig-s")]
    ledger = build_ledger({**spec, "claims": rows}, {"expansion": exp, "clm": {"vocab_size": 512}}, evidence, "tiny")
    return {entry["id"]: entry["verdict"] for entry in ledger}


def test_both_sides_of_one_are_reproduced_when_the_flat_control_is_clean():
    verdicts = _verdicts(_exp({"0.5": 0, "1.0": 0, "2.0": 0.49}, {"0.5": 8, "1.0": 0, "2.0": 0}))
    assert verdicts == {"fig-s1-expansion-unused-parameters": "reproduced",
                        "fig-s2-contraction-loses-tokens": "reproduced",
                        "fig-s3-flat-passes-more-between-tokens": "reproduced",
                        "fig-s3-self-token-similar": "reproduced"}


def test_a_control_showing_the_effect_or_no_factor_measured_is_inconclusive():
    broken = _verdicts(_exp({"0.5": 0, "1.0": 0.1, "2.0": 0.49}, {"0.5": 8, "1.0": 0, "2.0": 0}))
    assert broken["fig-s1-expansion-unused-parameters"] == "inconclusive"
    assert broken["fig-s2-contraction-loses-tokens"] == "reproduced"
    only_wide = _verdicts(_exp({"1.0": 0, "2.0": 0.49}, {"1.0": 0, "2.0": 0}))
    assert only_wide["fig-s2-contraction-loses-tokens"] == "inconclusive"


def test_an_expanded_mixer_that_uses_every_parameter_is_not_reproduced():
    verdicts = _verdicts(_exp({"1.0": 0, "2.0": 0.0}, {"1.0": 0, "2.0": 0}))
    assert verdicts["fig-s1-expansion-unused-parameters"] == "not reproduced"


def test_the_inter_token_row_follows_the_seeds():
    flat_worse = _verdicts(_exp({"1.0": 0}, {"1.0": 0}, rep_flat=(0.9, 0.92, 0.95), rep_exp=(0.6, 0.62, 0.61)))
    assert flat_worse["fig-s3-flat-passes-more-between-tokens"] == "not reproduced"
    at_chance = _verdicts(_exp({"1.0": 0}, {"1.0": 0}, rep_flat=(1.0, 1.0, 1.0), rep_exp=(1.0, 1.0, 1.0)))
    assert at_chance["fig-s3-flat-passes-more-between-tokens"] == "inconclusive"
