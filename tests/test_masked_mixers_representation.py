"""Representation accuracy: the Hamming metric on a hand-built case, the learning-rate schedule,
and exact recovery of the input through identity-like models."""

from __future__ import annotations

import pytest
import torch

from papers.masked_mixers.input_representation import (
    decode_topk,
    hamming_metric,
    lr_at,
    recover_input,
    representation_accuracy,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_hamming_metric_hand_built():
    reference = torch.tensor([[3, 1, 4, 1, 5]])
    top = torch.tensor([[[3, 9], [2, 1], [0, 0], [7, 8], [5, 5]]])  # hit, hit at rank 2, miss, miss, hit
    mask = torch.tensor([[True, True, True, False, True]])          # position 3 is padding
    assert hamming_metric(reference, top[..., :1], mask) == pytest.approx(2 / 4)  # top-1 misses: 1, 2
    assert hamming_metric(reference, top, mask) == pytest.approx(1 / 4)            # top-2 misses: 2
    assert hamming_metric(reference, top, torch.zeros_like(mask)) == 0.0


def test_learning_rate_falls_linearly_from_start_to_end():
    assert lr_at(0, 500, 0.02, 0.002) == pytest.approx(0.02)
    assert lr_at(250, 500, 0.02, 0.002) == pytest.approx(0.011)
    assert lr_at(500, 500, 0.02, 0.002) == pytest.approx(0.002)


def test_pseudo_inverse_decoding_is_exact_for_a_full_rank_embedding():
    torch.manual_seed(0)
    E = torch.randn(10, 16, dtype=torch.double)  # V <= D: E @ pinv(E) is the identity
    ids = torch.randint(0, 10, (3, 7))
    assert torch.equal(decode_topk(E[ids], E, 1)[..., 0], ids)


@pytest.mark.parametrize("body", ["identity", "invertible_linear"])
def test_recovery_through_an_identity_like_model_is_exact(body):
    torch.manual_seed(0)
    V, D = 12, 16
    E = torch.randn(V, D, dtype=torch.double)
    A = torch.eye(D, dtype=torch.double) + 0.1 * torch.randn(D, D, dtype=torch.double)
    f = (lambda x: x) if body == "identity" else (lambda x: x @ A)
    ids = torch.randint(0, V, (2, 9))
    x = recover_input(f, f(E[ids]), (2, 9, D), steps=500, lr_start=0.02, lr_end=0.002, seed=0)
    assert (x - E[ids]).abs().max() < 0.05  # within a few of the final steps of the true embedding
    top5 = decode_topk(x, E, 5)
    assert torch.equal(top5[..., 0], ids)
    assert hamming_metric(ids, top5[..., :1], torch.ones_like(ids, dtype=torch.bool)) == 0.0


def test_model_level_metric_on_an_identity_model():
    """A LanguageModel whose one MLP block outputs zero is the identity on its input embedding: the
    stage's function must report exactly 0. With the last token as the only target, just the last
    position is constrained, so the metric lies strictly between 0 and 1."""
    from common.models.lm import LanguageModel, LMConfig

    torch.manual_seed(0)
    model = LanguageModel(LMConfig(vocab_size=12, d_model=16, pattern="mlp", n_ctx=8, final_norm="none",
                                   tie_embeddings=False)).double()
    torch.nn.init.zeros_(model.blocks[0].proj.weight)
    torch.nn.init.zeros_(model.blocks[0].proj.bias)
    torch.nn.init.normal_(model.embed.weight, std=1.0)
    ids = torch.randint(0, 12, (2, 8))
    mask = torch.ones_like(ids, dtype=torch.bool)
    full = representation_accuracy(model, ids, mask, steps=500, lr_start=0.02, lr_end=0.002, seed=0,
                                   last_token_only=False)
    assert full == {"hamming_top1": 0.0, "hamming_top5": 0.0, "hamming_top5_earlier": 0.0, "decode_round_trip": 1.0}
    last = representation_accuracy(model, ids, mask, steps=500, lr_start=0.02, lr_end=0.002, seed=0,
                                   last_token_only=True)
    assert 0 < last["hamming_top1"] < 1
