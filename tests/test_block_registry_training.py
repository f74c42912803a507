"""Every registered block, looped over the registry (as mad-lab's `test_train_layers` loops over its
layers):

1. it trains inside a `LanguageModel` on a small synthetic task that only a working block solves,
   and the same model with the block's forward broken stays far above the threshold;
2. a two-component Manticore hybrid with one-hot mixture weights computes exactly the chosen
   component, and with mixed weights it does not.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from common.blocks import BLOCKS
from common.models.lm import LanguageModel, LMConfig
from papers.manticore.hybrid import Manticore, ManticoreConfig

pytestmark = pytest.mark.usefixtures("one_thread")

V = 16  # vocabulary
CHANCE = math.log(V)  # 2.77 nats: a uniform guess over the vocabulary
K = 4  # copy task: segments of K random tokens followed by the same K again
T = 16  # tokens per sequence (the inputs are the first T - 1), also the model's n_ctx
BATCH = 32

# --- the two tasks ------------------------------------------------------------------------------
#
# "copy" (token mixers): each sequence is [a b c d a b c d e f g h e f g h]; the loss is taken only
# where the target is a repeat, so predicting it needs the token K positions back moved to the
# current position. Tokens are uniform, so a model whose block does nothing stays at chance there.
# Within Mamba's default conv window (d_conv = 4 reaches 3 positions back): a single Mamba layer
# learns copies from further back only slowly (lag 7: loss 1.5-2.8 after 80-150 steps).
#
# Honest for the non-causal block (`mixer_bidirectional`, whose reverse stream at position t reads
# positions >= t + 2): a target x[t+1] = x[t+1-K] is independent of every later token of its
# sequence (the rest of its segment repeats *other* random tokens, later segments are fresh), so
# looking ahead cannot help and only the causal forward stream can solve it. Measured: with the
# forward stream's output zeroed the loss stays at chance (2.77-2.79). The first half of each
# segment, whose tokens do reappear later and could be read off the future, is left out of the loss.
# (A plain periodic sequence would not do: x[t+1+K] = x[t+1] would sit in view.)
#
# "chain" (channel mixers, which move nothing between positions and so cannot copy): x[t+1] =
# PERM[x[t]] from a random start, PERM one cycle through the whole vocabulary. The target is a
# function of the current token alone, but not one the model can learn without the block: with tied
# embeddings and no block the logits are a symmetric form of two embeddings, score(a, b) =
# score(b, a), so a token scores its predecessor as high as its successor (about log 2 at best;
# measured 1.45 after the steps used here with the block's forward returning zeros).


def copy_batch(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    first = torch.randint(0, V, (BATCH, T // (2 * K), K), generator=gen)
    ids = torch.cat([first, first], dim=2).flatten(1)
    targets = ids[:, 1:].clone()
    targets[:, (torch.arange(1, T) % (2 * K)) < K] = -100  # the random halves: no loss
    return ids[:, :-1], targets


def one_cycle(n: int, seed: int) -> torch.Tensor:
    """A permutation of range(n) that is a single n-cycle (no fixed points, no 2-cycles)."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    perm = torch.empty(n, dtype=torch.long)
    perm[order] = order.roll(-1)
    return perm


PERM = one_cycle(V, seed=3)


def chain_batch(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    ids = [torch.randint(0, V, (BATCH,), generator=gen)]
    for _ in range(T - 1):
        ids.append(PERM[ids[-1]])
    ids = torch.stack(ids, dim=1)
    return ids[:, :-1], ids[:, 1:]


TASKS = {"copy": copy_batch, "chain": chain_batch}

# --- one small model per block ------------------------------------------------------------------
#
# Each model is the block alone (one layer), so the task fails when the block is broken. Only options
# a block's constructor declares are given; `n_ctx` comes from `LMConfig.n_ctx`.
#
# - RoPE attention (`attn`, the Llama layer in `hf_decoder`) attends by offset only once the
#   embeddings grow a token-independent query direction, which one layer at this size finds slowly
#   and erratically (copy loss anywhere from 0.001 to 1.9 over seeds after 60-150 steps); learned
#   positions give it that direction at once. The block still has to move the token (broken: loss
#   2.77-2.80).
# - `transfixer` (series: `a + mix(a)`, a = attention) likewise, and takes learned positions too.
# - `moe`: the Sinkhorn router balances experts over the batch while training and routes by plain
#   top-1 in eval, so early in training eval routing can send a token to an expert that never saw
#   it; at lr 1e-2 the eval loss after 60 steps ranged 0.009-0.9 over 8 seeds, while the training
#   loss was <= 0.02 in all of them. At lr 3e-3 for 100 steps the routing settles: 0.034-0.047 over
#   16 seeds.
# - Two-stream blocks take the two-stream norm (per-stream statistics, `norms.TwoStreamNorm`: a norm
#   over both streams would leak the next token) and an even width.
#
# `threshold`: the eval loss after training must be below it. Chosen from the worst of 8 seeds at
# these settings (in brackets; the test runs seed 0, and `-rP` prints its losses), with margin, and
# far below both chance (2.77) and `BROKEN`, under what the same model reaches with its block broken.

TWO_STREAM = {"norm": "layernorm_two_stream"}
LLAMA_LAYER = {"family": "llama", "config": {"num_attention_heads": 2, "num_key_value_heads": 2,
                                             "intermediate_size": 64}}
LEARNED_POSITIONS = {"pos_embedding": "learned"}
SPECS: dict[str, dict] = {  # [worst eval loss over 8 seeds]
    "attn": dict(task="copy", threshold=0.1,  # [0.009]
                 lm=dict(LEARNED_POSITIONS, blocks={"attn": {"n_heads": 2}})),
    "attn_neo": dict(task="copy", threshold=0.3,  # [0.054]
                     lm=dict(LEARNED_POSITIONS, blocks={"attn_neo": {"n_heads": 2}})),
    "hf_decoder": dict(task="copy", threshold=0.1,  # [0.010]
                       lm=dict(LEARNED_POSITIONS, blocks={"hf_decoder": LLAMA_LAYER})),
    "hyena": dict(task="copy", threshold=0.1, lm=dict()),  # [0.014]
    "mamba": dict(task="copy", threshold=0.1, lm=dict()),  # [0.008]
    "mixer": dict(task="copy", threshold=0.1, lm=dict()),  # [0.014]
    "mixer_bidirectional": dict(task="copy", threshold=0.1, lm=dict(TWO_STREAM)),  # [0.010]
    "transfixer": dict(task="copy", threshold=0.1,  # [0.011]
                       lm=dict(LEARNED_POSITIONS, blocks={"transfixer": {"n_heads": 2}})),
    "mlp": dict(task="chain", threshold=0.1, lm=dict()),  # [0.004]
    "swiglu": dict(task="chain", threshold=0.1, lm=dict()),  # [0.004]
    "mlp_two_stream": dict(task="chain", threshold=0.1, lm=dict(TWO_STREAM)),  # [0.005]
    "moe": dict(task="chain", threshold=0.3, lr=3e-3, steps=100, lm=dict()),  # [0.046]
}
STEPS, LR = 60, 1e-2  # defaults; Adam at a constant rate
BROKEN = 1.0  # a broken block stays above this (measured: copy 2.77-2.80, chain 1.45-1.47)


def test_every_registered_block_has_a_training_spec():
    assert sorted(SPECS) == sorted(BLOCKS), "add the new block to SPECS (a task, its model, a threshold)"
    assert all(spec["threshold"] <= BROKEN / 3 for spec in SPECS.values())  # and so far below chance


def lm_config(name: str, d_model: int = 32, **overrides) -> LMConfig:
    kwargs = dict(vocab_size=V, d_model=d_model, pattern=name, n_ctx=T, **SPECS[name]["lm"])
    return LMConfig(**{**kwargs, **overrides})


def lm_loss(model: LanguageModel, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(ids).flatten(0, 1), targets.flatten(), ignore_index=-100)


@torch.no_grad()
def eval_loss(model: LanguageModel, batch) -> float:
    model.eval()
    loss = lm_loss(model, *batch).item()
    model.train()
    return loss


def train(name: str, seed: int = 0) -> tuple[float, float]:
    """Loss before and after training, both in eval mode on the same held-out batch."""
    spec = SPECS[name]
    torch.manual_seed(seed)
    model = LanguageModel(lm_config(name))
    make_batch = TASKS[spec["task"]]
    held_out = make_batch(torch.Generator().manual_seed(seed + 1000))
    gen = torch.Generator().manual_seed(seed)
    before = eval_loss(model, held_out)
    opt = torch.optim.Adam(model.parameters(), lr=spec.get("lr", LR))
    for _ in range(spec.get("steps", STEPS)):
        loss = lm_loss(model, *make_batch(gen))
        if (aux := model.aux_loss()) is not None:
            loss = loss + aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return before, eval_loss(model, held_out)


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_every_block_trains_in_a_language_model(name):
    before, after = train(name)
    threshold = SPECS[name]["threshold"]
    print(f"{name}: {SPECS[name]['task']} loss {before:.3f} -> {after:.4f} (threshold {threshold})")
    assert before > 0.9 * CHANCE, f"{name}: starts at {before:.3f}, expected near chance {CHANCE:.3f}"
    assert after < threshold, f"{name}: loss {before:.3f} -> {after:.4f}, threshold {threshold}"


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_a_broken_block_does_not_reach_the_threshold(name, monkeypatch):
    """The same training with the block's forward returning nothing (zeros to add to the residual
    stream, or the stream unchanged for a block that wraps it): so the threshold above can fail."""
    cls = BLOCKS[name]

    def broken(self, x, cache=None):
        # `0 * sum(params)` keeps every parameter in the graph, so the optimizer runs as before.
        zero = 0 * sum(p.sum() for p in self.parameters())
        return x + zero if cls.wraps_residual else torch.zeros_like(x) + zero

    monkeypatch.setattr(cls, "forward", broken)
    _, after = train(name)
    assert after > BROKEN, f"{name}: with its block broken the model still reaches {after:.4f}"


# --- one-hot mixture weights --------------------------------------------------------------------


def other_component() -> LanguageModel:
    """A Llama-style model of another width: Manticore pads it to the wider component."""
    return LanguageModel(LMConfig(vocab_size=V, d_model=24, pattern="attn,swiglu", n_ctx=T,
                                  blocks={"attn": {"n_heads": 2}}))


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_one_hot_alphas_reproduce_a_component_alone(name):
    torch.manual_seed(0)
    # Two blocks of `name` and two of the other model, cut into two Manticore blocks of one layer each.
    components = [LanguageModel(lm_config(name, repeat=2)).eval(), other_component().eval()]
    ids = torch.randint(0, V, (3, T), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():  # each component by itself, before any hybrid exists
        alone = [component(ids) for component in components]

    # Same vocabulary, so the hybrid's embeddings (its tied heads) start as copies of the components'.
    hybrid = Manticore(components, ManticoreConfig(n_blocks=2, vocab_size=V, alpha_mode="fixed")).eval()
    tol = dict(rtol=1e-5, atol=1e-6)  # logits are O(1) here; the match is in fact bitwise
    with torch.no_grad():
        for m in range(2):
            one_hot = F.one_hot(torch.full((2,), m), 2).float()
            hybrid.set_alphas(one_hot)
            torch.testing.assert_close(hybrid(ids), alone[m], **tol, msg=lambda s, m=m: f"{name}, component {m}: {s}")

        # The test can fail: mixing in the other component (and its projectors) changes the logits.
        for m in range(2):
            weights = torch.tensor([[0.9, 0.1], [0.9, 0.1]])
            hybrid.set_alphas(weights if m == 0 else weights.flip(-1))
            gap = (hybrid(ids) - alone[m]).abs().max().item()
            assert gap > 1e3 * tol["atol"], f"{name}: alphas 0.9/0.1 give component {m}'s logits (gap {gap:.2e})"
