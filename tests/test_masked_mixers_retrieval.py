"""Retrieval: Algorithm 1 sampling (distinct negatives, never the positive, labels point to it),
the bidirectional retrieval mixer, the cross-entropy without a second softmax, and InfoNCE."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from papers.masked_mixers.retrieval import (
    RetrievalMixer,
    RetrievalTraining,
    embed_texts,
    infonce_loss,
    make_batch,
    ranking_top1,
    sample_candidates,
    standardized,
    train_retrieval,
)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("n, c", [(5, 5), (40, 8), (300, 128)])
def test_candidates_hold_the_positive_once_and_distinct_negatives(n, c):
    generator = torch.Generator().manual_seed(0)
    queries = torch.arange(min(n, 40))
    candidates, slots = sample_candidates(queries, n, c, generator)
    assert candidates.shape == (len(queries), c) and slots.shape == (len(queries),)
    for query, row, slot in zip(queries.tolist(), candidates, slots.tolist()):
        assert len(set(row.tolist())) == c, "negatives must be distinct"
        assert row[slot] == query
        assert (row == query).sum() == 1, "the positive appears among the negatives"
        assert 0 <= row.min() and row.max() < n
    assert len(set(slots.tolist())) > 1, "the positive's slot must vary"


def test_negatives_are_drawn_uniformly():
    # Every target but the query's own is equally likely to be a negative, whatever the slot.
    generator = torch.Generator().manual_seed(2)
    n, c, draws = 10, 4, 20_000
    candidates, slots = sample_candidates(torch.full((draws,), 3), n, c, generator)
    counts = torch.bincount(candidates.flatten(), minlength=n).double()
    counts[3] -= draws
    expected = draws * (c - 1) / (n - 1)
    assert counts[3] == 0
    others = torch.cat([counts[:3], counts[4:]])
    assert ((others - expected).abs() < 5 * math.sqrt(expected)).all(), others
    slot_counts = torch.bincount(slots, minlength=c).double()
    assert ((slot_counts - draws / c).abs() < 5 * math.sqrt(draws / c)).all(), slot_counts


def test_batches_put_the_matching_target_at_the_label():
    generator = torch.Generator().manual_seed(1)
    n, d, c = 30, 4, 6
    targets = torch.arange(n * d, dtype=torch.float).reshape(n, d)  # every row unique
    queries = -targets
    indices = torch.tensor([0, 7, 29, 7])
    x, labels = make_batch(queries, targets, indices, c, generator)
    assert x.shape == (4, c + 1, d)
    for b, i in enumerate(indices):
        assert torch.equal(x[b, 0], queries[i])
        assert torch.equal(x[b, 1 + labels[b]], targets[i])
        others = torch.cat([x[b, 1: 1 + labels[b]], x[b, 2 + labels[b]:]])
        assert not (others == targets[i]).all(-1).any()


def test_too_few_targets_is_a_config_error():
    from common.errors import ConfigError

    with pytest.raises(ConfigError, match="candidates"):
        sample_candidates(torch.tensor([0]), 4, 5, torch.Generator())


def test_retrieval_mixer_is_bidirectional_over_candidates():
    torch.manual_seed(0)
    model = RetrievalMixer(8, 5, depth=2).double()
    x = torch.randn(1, 5, 8, dtype=torch.double, requires_grad=True)
    scores = model(x)
    assert scores.shape == (1, 4)
    (grad,) = torch.autograd.grad(scores[0, 0], x)
    assert (grad[0].abs().sum(-1) > 0).all(), "the first candidate's score must read the query and every candidate"


def _noisy_copies(n: int = 200, n_test: int = 64, d: int = 8) -> tuple[torch.Tensor, ...]:
    """Train and test pairs whose targets are their queries plus a little noise: an easy match."""
    torch.manual_seed(0)
    queries, test_q = torch.randn(n, d), torch.randn(n_test, d)
    return queries, queries + 0.05 * torch.randn(n, d), test_q, test_q + 0.05 * torch.randn(n_test, d)


def test_retrieval_training_learns_an_easy_task_and_uses_plain_cross_entropy():
    """Targets equal their queries plus a little noise: the model must find the match. With a second
    softmax before the cross-entropy the scores would lie in [0, 1], and the loss could never fall
    below log(e + c - 1) - 1 (the right candidate at 1, the others at 0); ours must go below it."""
    queries, targets, test_q, test_t = _noisy_copies()
    c = 8
    cfg = RetrievalTraining(depth=2, steps=300, batch_size=32, eval_batches=2)
    cfg.optim.lr = 1e-2
    result = train_retrieval(queries, targets, test_q, test_t, c, cfg, seed=0)
    assert result["test_top1"] > 0.7 and result["chance_top1"] == 1 / c
    assert result["train_loss"] < math.log(math.e + c - 1) - 1 - 0.3


def test_standardized_inputs_let_the_model_find_a_match_that_a_shared_offset_hides():
    """The positive case of `standardize`: pairs that match as clearly as `_noisy_copies`' but sit
    on one large shared offset (as a trained mixer's pooled states do). Standardized, the model
    finds the match; as they are, it stays near chance (1/8) in the same steps."""
    pairs = _noisy_copies()
    offset = 20 * torch.randn(8)
    queries, targets, test_q, test_t = (x + offset for x in pairs)
    top1 = {}
    for standardize in (True, False):
        cfg = RetrievalTraining(depth=2, steps=300, batch_size=32, eval_batches=2, standardize=standardize)
        cfg.optim.lr = 1e-2
        top1[standardize] = train_retrieval(queries, targets, test_q, test_t, 8, cfg, seed=0)["test_top1"]
    assert top1[True] > 0.7 and top1[False] < 0.25


def test_standardizing_uses_the_training_pairs_statistics_only():
    torch.manual_seed(0)
    train_q, train_t, test = torch.randn(6, 3) * 5 + 2, torch.randn(4, 3), torch.randn(5, 3)
    rows = [list(map(float, row)) for row in torch.cat([train_q, train_t])]
    for dim in range(3):
        column = [row[dim] for row in rows]
        mean = sum(column) / len(column)
        std = (sum((x - mean) ** 2 for x in column) / (len(column) - 1)) ** 0.5
        out = standardized(train_q, train_t, test)
        torch.testing.assert_close(out[2][:, dim], (test[:, dim] - mean) / std)
        torch.testing.assert_close(out[0][:, dim], (train_q[:, dim] - mean) / std)


def test_the_learning_curve_reads_the_run_without_changing_it():
    """Scoring at `curve_steps` draws from a generator of its own: the run ends exactly where a run
    without a curve ends, and the curve's last point is the final score."""
    queries, targets, test_q, test_t = _noisy_copies()
    c = 8
    plain = RetrievalTraining(depth=1, steps=60, batch_size=16, eval_batches=2)
    plain.optim.lr = 1e-2
    with_curve = RetrievalTraining(depth=1, steps=60, batch_size=16, eval_batches=2, curve_steps=[20, 40, 60, 90],
                                   optim=plain.optim)
    a = train_retrieval(queries, targets, test_q, test_t, c, plain, seed=0)
    b = train_retrieval(queries, targets, test_q, test_t, c, with_curve, seed=0)
    assert (a["train_loss"], a["test_loss"], a["test_top1"]) == (b["train_loss"], b["test_loss"], b["test_top1"])
    assert list(b["top1_curve"]) == ["20", "40", "60"]  # a step past the run is not a point of it
    assert b["top1_curve"]["60"] == b["test_top1"] and a["top1_curve"] == {"60": a["test_top1"]}
    assert b["queries_scored"] == 32


def test_infonce_loss_matches_a_naive_loop():
    torch.manual_seed(0)
    q, d, tau = torch.randn(5, 7), torch.randn(5, 7), 0.1
    expected = 0.0
    for i in range(5):
        sims = [F.cosine_similarity(q[i], d[j], dim=0) / tau for j in range(5)]
        expected += -(sims[i] - torch.logsumexp(torch.stack(sims), 0))
    torch.testing.assert_close(infonce_loss(q, d, tau), expected / 5)


def test_rankings_match_a_loop_over_the_same_candidate_sets():
    """Cosine, L1 and L2 top-1 against plain-Python scores on the candidates a copy of the generator
    draws; the targets are noisy, rescaled queries, so the three rankings disagree."""
    torch.manual_seed(0)
    n, c = 40, 6
    queries = torch.randn(n, 5)
    targets = (queries + 0.8 * torch.randn(n, 5)) * torch.rand(n, 1) * 4
    got = ranking_top1(queries, targets, c, n, torch.Generator().manual_seed(3))
    generator = torch.Generator().manual_seed(3)
    indices = torch.randperm(n, generator=generator)
    candidates, slots = sample_candidates(indices, n, c, generator)
    measures = {
        "cosine": lambda a, b: sum(x * y for x, y in zip(a, b)) / math.hypot(*a) / math.hypot(*b),
        "l1": lambda a, b: -sum(abs(x - y) for x, y in zip(a, b)),
        "l2": lambda a, b: -math.dist(a, b),
    }
    for name, measure in measures.items():
        hits = 0
        for query, row, slot in zip(indices.tolist(), candidates.tolist(), slots.tolist()):
            scores = [measure(queries[query].tolist(), targets[j].tolist()) for j in row]
            hits += scores.index(max(scores)) == slot
        assert got[name] == pytest.approx(hits / n), name
    assert len(set(got.values())) > 1, "the three rankings should differ on these targets"


def test_mean_pooling_averages_the_hidden_states_of_the_tokens_only():
    """The positive control's embedding: the mean of the model's final hidden states over the
    positions that are not padding, checked against a loop over each text's own tokens."""
    from common.models.lm import LanguageModel, LMConfig
    from papers.masked_mixers.models import hidden_states

    torch.manual_seed(0)
    model = LanguageModel(LMConfig(vocab_size=11, d_model=8, pattern="mixer", n_ctx=6))
    pad = 0
    ids = torch.tensor([[3, 4, 5, pad, pad, pad], [7, 8, 9, 10, 2, pad]])
    got = embed_texts(model, ids, position=-2, pooling="mean", pad_id=pad)
    with torch.no_grad():
        states = hidden_states(model, model.embed(ids), final_norm=True)
    for row, n in enumerate((3, 5)):
        torch.testing.assert_close(got[row], states[row, :n].mean(0))
    torch.testing.assert_close(embed_texts(model, ids, position=-2), states[:, -2])


def test_infonce_runs_the_stages_seeds_then_its_own_extra_ones():
    import yaml

    from common.config import stage_config
    from common.errors import ConfigError
    from papers.masked_mixers.retrieval import RetrievalConfig
    from tests.conftest import ROOT

    params = yaml.safe_load((ROOT / "papers/masked_mixers/params.yaml").read_text())
    tiny = stage_config(params, "retrieval", RetrievalConfig, "tiny")
    assert tiny.seeds == [0, 1, 2, 3] and tiny.infonce_seeds() == [0, 1, 2, 3, 4]
    params["retrieval"]["tiny"]["infonce"]["extra_seeds"] = [4, 4]
    with pytest.raises(ConfigError, match="infonce.extra_seeds: give each once"):
        stage_config(params, "retrieval", RetrievalConfig, "tiny")
