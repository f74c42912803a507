"""Hyena: FFT long convolution against a direct loop, whole-block references, causality, prefixes."""

from __future__ import annotations

import pytest
import torch
from einops import rearrange

from common.blocks.hyena import Hyena, causal_long_conv, direct_causal_conv, fft_causal_conv
from tests.conftest import position_gradient

D, N_CTX = 16, 24
VARIANTS = {"single": {}, "heads4": {"n_heads": 4}, "order3": {"order": 3}}


pytestmark = pytest.mark.usefixtures("one_thread")


def make(seed=0, **kwargs) -> Hyena:
    torch.manual_seed(seed)
    return Hyena(D, n_ctx=N_CTX, filter_dim=16, **kwargs).double()


def loop_causal_conv(u, h):
    """y[..., t] = sum_{s <= t} h[..., t - s] u[..., s], one output at a time."""
    T = u.shape[-1]
    y = torch.zeros_like(u)
    for t in range(T):
        for s in range(t + 1):
            y[..., t] = y[..., t] + h[..., t - s] * u[..., s]
    return y


@pytest.mark.parametrize("T", [1, 7, 17])
def test_fft_long_conv_equals_direct_causal_conv(T):
    torch.manual_seed(0)
    u = torch.randn(2, 3, T, dtype=torch.double)
    h = torch.randn(3, T, dtype=torch.double)
    y = fft_causal_conv(u, h)
    expected = loop_causal_conv(u, h.expand_as(u))
    torch.testing.assert_close(y, expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(direct_causal_conv(u, h), expected, rtol=1e-10, atol=1e-10)
    assert y.dtype == u.dtype
    # Half precision goes through fp32 and comes back in its own dtype.
    half = fft_causal_conv(u.bfloat16(), h.bfloat16())
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(half.double(), expected, rtol=0.05, atol=0.05)
    # Without the 2T zero-padding the FFT would wrap around: the last inputs would leak into t = 0.
    wrapped = torch.fft.irfft(torch.fft.rfft(u, n=T) * torch.fft.rfft(h, n=T), n=T)
    if T > 1:
        assert not torch.allclose(wrapped, y)


def gated_inputs(block, x):
    """The block's own projections up to the split: (gates..., v), each [B, d, T]."""
    T = x.shape[1]
    u = block.short_conv(rearrange(block.in_proj(x), "b t c -> b c t"))[..., :T]
    return u.split(D, dim=1)


def test_single_head_block_equals_a_direct_recurrence():
    block = make()
    x = torch.randn(2, 9, D, dtype=torch.double)
    x0, x1, v = gated_inputs(block, x)
    h = block.filter(9)  # [d, T]: one filter per channel
    z = x1 * v
    y = x0 * (loop_causal_conv(z, h.expand_as(z)) + block.skip[:, None] * z)
    torch.testing.assert_close(block(x), block.out_proj(rearrange(y, "b c t -> b t c")))


def test_multi_head_block_is_linear_attention_with_a_long_conv_decay():
    """y_t[j] = sum_i q_t[i] (sum_{s<=t} h(t-s) k_s[i] v_s[j] + D k_t[i] v_t[j]), per head."""
    block, H, T = make(n_heads=4), 4, 9
    dh = D // H
    x = torch.randn(2, T, D, dtype=torch.double)
    q, k, v = (rearrange(g, "b (h d) t -> b h d t", h=H) for g in gated_inputs(block, x))
    h = block.filter(T)  # [H, T]: one filter per head
    assert h.shape == (H, T)
    y = torch.zeros(2, H, dh, T, dtype=torch.double)
    for b in range(2):
        for head in range(H):
            for t in range(T):
                state = block.skip[head] * torch.outer(k[b, head, :, t], v[b, head, :, t])
                for s in range(t + 1):
                    state = state + h[head, t - s] * torch.outer(k[b, head, :, s], v[b, head, :, s])
                y[b, head, :, t] = q[b, head, :, t] @ state
    expected = block.out_proj(rearrange(y, "b h d t -> b t (h d)"))
    torch.testing.assert_close(block(x), expected)


@pytest.mark.parametrize("fft", [False, True])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_causal_and_reads_its_own_position(variant, fft):
    """Direct path: d y_t / d x_s is exactly 0 for s > t. FFT path: 0 up to fp64 rounding."""
    block = make(**VARIANTS[variant], fft_threshold=0 if fft else N_CTX)
    x = torch.randn(2, N_CTX, D, dtype=torch.double, requires_grad=True)
    y = block(x)
    for t in range(N_CTX):
        grad = position_gradient(y, x, t)
        future, past = grad[:, t + 1:].abs().sum().item(), grad[:, : t + 1].abs().sum().item()
        if fft:
            assert future <= 1e-12 * past, f"output {t} depends on a later input"
        else:
            assert future == 0.0, f"output {t} depends on a later input"
        assert grad[:, t].abs().sum() > 1e-8
        if t >= 5:  # the long filter reaches far back, beyond the short conv's 3 taps
            assert grad[:, 0].abs().sum() > 1e-8


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_fft_and_direct_paths_agree(variant):
    x = torch.randn(2, N_CTX, D, dtype=torch.double)
    torch.testing.assert_close(make(**VARIANTS[variant], fft_threshold=0)(x),
                               make(**VARIANTS[variant], fft_threshold=N_CTX)(x), rtol=1e-10, atol=1e-10)
    assert causal_long_conv(x.mT, x.mT[0], fft_threshold=0).shape == x.mT.shape


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_shapes_and_shorter_inputs_are_prefixes(variant):
    block = make(**VARIANTS[variant])
    x = torch.randn(3, N_CTX, D, dtype=torch.double)
    full = block(x)
    assert full.shape == x.shape and torch.isfinite(full).all()
    for T in (1, 5, 13):
        torch.testing.assert_close(block(x[:, :T]), full[:, :T])
    with pytest.raises(ValueError, match="exceeds n_ctx"):
        block(torch.randn(1, N_CTX + 1, D, dtype=torch.double))


def test_filter_is_the_sine_mlp_over_positions_times_a_decaying_window():
    block = make()
    t = torch.arange(N_CTX, dtype=torch.double)[:, None] / N_CTX
    bands = 2 * torch.pi * t * torch.tensor([1.0, 2.0], dtype=torch.double)  # filter_emb_dim 5: 2 bands
    features = torch.cat([t, bands.cos(), bands.sin()], dim=-1)
    window = torch.exp(-t * block.filter.rates)  # [T, d]
    torch.testing.assert_close(block.filter(N_CTX), (block.filter.mlp(features) * window).T)
    # Fastest channel at 1 % by 30 % of the context, slowest only by 150 % (filter_decay defaults).
    assert window[round(0.3 * N_CTX), 0].item() == pytest.approx(0.01, rel=0.2)
    assert window[-1, -1].item() > 0.04
    # Shorter inputs use the first taps of the same filter.
    torch.testing.assert_close(block.filter(7), block.filter(N_CTX)[:, :7])


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="order 2 only"):
        Hyena(D, n_ctx=N_CTX, n_heads=4, order=3)
    with pytest.raises(ValueError, match="must divide"):
        Hyena(D, n_ctx=N_CTX, n_heads=3)
    with pytest.raises(ValueError, match="odd"):
        Hyena(D, n_ctx=N_CTX, filter_emb_dim=4)
