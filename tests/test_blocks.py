"""Every registered block, looped over the registry (as mad-lab's tests do)."""

from __future__ import annotations

import io

import pytest
import torch

from common.blocks import BLOCKS, build_block
from tests.conftest import position_gradient

D, T, N_CTX = 16, 12, 32
# Blocks whose defaults describe a full-size model get small settings here.
KWARGS = {"hf_decoder": {"family": "llama", "config": {"num_attention_heads": 4, "intermediate_size": 32}}}


def make(name: str, seed: int = 0):
    torch.manual_seed(seed)
    return build_block(name, D, layer_idx=1, shared={"n_ctx": N_CTX}, **KWARGS.get(name, {}))


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_shape_dtype_finite(name):
    block = make(name)
    x = torch.randn(3, T, D)
    y = block(x)
    assert y.shape == x.shape and y.dtype == x.dtype and torch.isfinite(y).all()
    y.float().pow(2).mean().backward()
    grads = [p.grad for p in block.parameters() if p.requires_grad]
    assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_state_dict_round_trip(name):
    block, twin = make(name, seed=0), make(name, seed=1)
    buffer = io.BytesIO()
    torch.save(block.state_dict(), buffer)
    buffer.seek(0)
    twin.load_state_dict(torch.load(buffer, weights_only=True))
    x = torch.randn(2, T, D)
    block.eval(), twin.eval()
    torch.testing.assert_close(block(x), twin(x), rtol=0, atol=0)


@pytest.mark.parametrize("name", sorted(n for n, cls in BLOCKS.items() if cls.causal))
def test_causal_blocks_never_see_the_future(name):
    """d y_t / d x_s is exactly zero for every s > t."""
    block = make(name).double()
    x = torch.randn(2, T, D, dtype=torch.double, requires_grad=True)
    y = block(x)
    for t in range(T - 1):
        grad = position_gradient(y, x, t)
        assert grad[:, t + 1:].abs().max().item() == 0.0, f"{name}: output {t} depends on a later input"
        assert grad[:, t].abs().sum() > 1e-8, f"{name}: output {t} ignores its own input"


@pytest.mark.parametrize("name", sorted(n for n, cls in BLOCKS.items() if not cls.causal))
def test_non_causal_blocks_are_marked_honestly(name):
    block = make(name).double()
    x = torch.randn(1, T, D, dtype=torch.double, requires_grad=True)
    (grad,) = torch.autograd.grad(block(x)[:, 0].sum(), x)
    assert grad[:, 1:].abs().sum() > 0, f"{name} is marked non-causal but never looks ahead"


@pytest.mark.parametrize("name", sorted(n for n, cls in BLOCKS.items() if cls.supports_step))
def test_step_matches_forward(name):
    """Prefill half the sequence through `forward(x, cache)`, then `step` one position at a time."""
    block = make(name).double().eval()
    x = torch.randn(2, T, D, dtype=torch.double)
    full = block(x)
    cache = block.allocate_cache(2, T, dtype=torch.double)
    outputs = [block(x[:, : T // 2], cache)]
    outputs += [block.step(x[:, t: t + 1], cache) for t in range(T // 2, T)]
    torch.testing.assert_close(torch.cat(outputs, dim=1), full, rtol=1e-9, atol=1e-9)
