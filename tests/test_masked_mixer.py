"""Masked mixer blocks: independent reference computations, prefix = padding, heads, causality,
masked-weight gradients, the expansion argument, and the bidirectional leak."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from common.blocks.masked_mixer import (
    BidirectionalMaskedMixer,
    MaskedMix,
    MaskedMixer,
    TwoStreamMLP,
    TwoStreamNorm,
    bidirectional_merge,
    causal_mask,
    two_stream_input,
)
from tests.conftest import position_gradient

D, N_CTX = 8, 10


pytestmark = pytest.mark.usefixtures("one_thread")

VARIANTS = {
    "flat": {},
    "kernel3": {"kernel_size": 3},
    "kernel4": {"kernel_size": 4},
    "heads4": {"n_heads": 4},
    "heads2_kernel4": {"n_heads": 2, "kernel_size": 4},
    "expanded1": {"expanded": True},
    "expanded2": {"expansion": 2},
    "expanded_half": {"expansion": 0.5},
    "softmax_weights": {"softmax": "weights"},
    "softmax_weights_heads2_kernel4": {"softmax": "weights", "n_heads": 2, "kernel_size": 4},
    "softmax_weights_expanded2": {"softmax": "weights", "expansion": 2},
    "softmax_outputs": {"softmax": "outputs"},
    "softmax_outputs_heads2": {"softmax": "outputs", "n_heads": 2},
    "parallel2": {"parallel": 2},
    "parallel3_kernel4": {"parallel": 3, "kernel_size": 4},
}


def make(seed=0, **kwargs) -> MaskedMixer:
    torch.manual_seed(seed)
    return MaskedMixer(D, n_ctx=N_CTX, **kwargs).double()


def reference_weight(conv) -> torch.Tensor:
    """The masked weight `[n_out, n_in, k]`, built here from the raw parameter, not the module's mask."""
    w = conv.weight.detach()
    n_out, n_in, _ = w.shape
    keep = torch.tensor([[1.0 if s <= t else 0.0 for s in range(n_in)] for t in range(n_out)], dtype=w.dtype)
    return w * keep[:, :, None]


@pytest.mark.parametrize("T", [N_CTX, 6])
def test_flat_mixer_is_a_masked_sum_over_earlier_positions(T):
    block = make()
    x = torch.randn(2, T, D, dtype=torch.double)
    W, bias = reference_weight(block.conv)[..., 0], block.conv.bias.detach()
    expected = torch.zeros(2, T, D, dtype=torch.double)
    for b in range(2):
        for t in range(T):
            expected[b, t] = bias[t] + sum(W[t, s] * x[b, s] for s in range(t + 1))
    torch.testing.assert_close(block(x), expected, rtol=1e-12, atol=1e-12)
    # The same again with einsum over the full masked matrix: no entry above the diagonal counts.
    torch.testing.assert_close(block(x), torch.einsum("ts,bsd->btd", W[:T, :T], x) + bias[:T, None])


def lower_triangle(n: int) -> torch.Tensor:
    return torch.tensor([[1.0 if s <= t else 0.0 for s in range(n)] for t in range(n)], dtype=torch.double)


@pytest.mark.parametrize("T", [N_CTX, 6])
def test_softmax_mixers_match_their_definitions(T):
    """The paper's softmax mixer: each output position's weights over all input positions through a
    softmax, then masked. The official code's: a softmax over the features of the masked mix."""
    x = torch.randn(2, T, D, dtype=torch.double)
    block = make(softmax="weights")
    w, bias = block.conv.weight.detach()[..., 0], block.conv.bias.detach()
    soft = torch.exp(w) / torch.exp(w).sum(dim=1, keepdim=True)
    expected = torch.einsum("ts,bsd->btd", (soft * lower_triangle(N_CTX))[:T, :T], x) + bias[:T, None]
    torch.testing.assert_close(block(x), expected, rtol=1e-12, atol=1e-12)

    block = make(seed=1, softmax="outputs")
    w, bias = block.conv.weight.detach()[..., 0], block.conv.bias.detach()
    z = torch.einsum("ts,bsd->btd", (w * lower_triangle(N_CTX))[:T, :T], x) + bias[:T, None]
    expected = torch.exp(z) / torch.exp(z).sum(dim=-1, keepdim=True)
    torch.testing.assert_close(block(x), expected, rtol=1e-12, atol=1e-12)


def test_weight_softmax_gradient_reaches_the_parameter():
    """The memory-saving backward composed with the softmax of the weight: gradients equal plain
    autograd through the definition, and masked entries still get some (the softmax couples them)."""
    block = make(softmax="weights")
    x = torch.randn(2, 7, D, dtype=torch.double, requires_grad=True)
    ours = torch.autograd.grad(block(x).pow(2).sum(), [x, block.conv.weight])
    w = block.conv.weight[..., 0]
    y = torch.einsum("ts,bsd->btd", (w.softmax(dim=1) * lower_triangle(N_CTX))[:7, :7], x) + block.conv.bias[:7, None]
    reference = torch.autograd.grad(y.pow(2).sum(), [x, block.conv.weight])
    for a, b in zip(ours, reference):
        torch.testing.assert_close(a, b)
    assert ours[1][0, N_CTX - 1].abs().sum() > 0  # output 0's weight on the last input: masked, yet in the softmax


@pytest.mark.parametrize("k", [3, 4])
def test_multiconv_is_a_masked_sum_per_tap_over_features(k):
    """Kernel taps slide along the feature axis, zero-padded 'same' ((k-1)//2 on the left)."""
    block = make(kernel_size=k)
    T = 7
    x = torch.randn(2, T, D, dtype=torch.double)
    W, bias = reference_weight(block.conv), block.conv.bias.detach()
    left = (k - 1) // 2
    expected = torch.zeros(2, T, D, dtype=torch.double)
    for b in range(2):
        for t in range(T):
            for i in range(D):
                total = bias[t]
                for s in range(t + 1):
                    for j in range(k):
                        f = i + j - left
                        if 0 <= f < D:
                            total = total + W[t, s, j] * x[b, s, f]
                expected[b, t, i] = total
    torch.testing.assert_close(block(x), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_prefix_equals_padding_with_junk_then_slicing(variant):
    block = make(**VARIANTS[variant])
    T = 6
    x = torch.randn(2, T, D, dtype=torch.double)
    junk = 1e3 * torch.randn(2, N_CTX - T, D, dtype=torch.double)
    full = block(torch.cat([x, junk], dim=1))
    torch.testing.assert_close(block(x), full[:, :T], rtol=1e-12, atol=1e-9)


def test_longer_than_n_ctx_is_refused():
    with pytest.raises(ValueError, match="exceeds n_ctx=10"):
        make()(torch.randn(1, N_CTX + 1, D, dtype=torch.double))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_is_causal(variant):
    """Each output position's gradient through a random projection of its features (a plain sum is
    blind to the softmax-over-features variant: see the next test)."""
    block = make(**VARIANTS[variant])
    x = torch.randn(2, N_CTX, D, dtype=torch.double, requires_grad=True)
    y = block(x)
    for t in range(N_CTX):
        grad = position_gradient(y, x, t)
        # Exact: a masked weight is an exact zero, and 0 * g is 0 on every CPU.
        assert grad[:, t + 1:].abs().sum().item() == 0.0, f"output {t} depends on a later input"
        if t < N_CTX // 2:  # the e = 0.5 mixer legitimately drops inputs >= N_CTX / 2
            assert grad[:, t].abs().sum() > 1e-8, f"output {t} ignores its own position"


def test_a_summed_probe_cannot_see_a_softmax_over_features():
    """Why the causality test projects: the single-head block's outputs are a softmax over the
    features, whose sum is 1 whatever the input, so the gradient of that sum is zero up to rounding,
    and `> 0` on it passed or failed with the CPU."""
    block = make(**VARIANTS["softmax_outputs"])
    x = torch.randn(2, N_CTX, D, dtype=torch.double, requires_grad=True)
    (grad,) = torch.autograd.grad(block(x)[:, 0].sum(), x)
    assert grad.abs().max() < 1e-12


def test_heads_are_genuinely_different():
    """The v1 bug made every head the same conv on the same input; here each head has its own
    conv on its own projection, and tying the convs changes the output."""
    block = make(n_heads=4)
    weights = block.conv.weight.detach().reshape(4, N_CTX, N_CTX)
    for a in range(4):
        for b in range(a + 1, 4):
            assert not torch.equal(weights[a], weights[b])
    x = torch.randn(2, N_CTX, D, dtype=torch.double)
    tied = make(n_heads=4)
    tied.load_state_dict(block.state_dict())
    with torch.no_grad():
        tied.conv.weight.copy_(weights[0].repeat(4, 1)[..., None])
        tied.conv.bias.copy_(block.conv.bias[:N_CTX].repeat(4))
    assert (block(x) - tied(x)).abs().max() > 1e-3
    # With tied convs the heads collapse into one conv over the whole projection (the v1 design).
    W0, b0 = reference_weight(block.conv)[:N_CTX, :, 0], block.conv.bias.detach()[:N_CTX]
    collapsed = block.out_proj(torch.einsum("ts,bsd->btd", W0, block.in_proj(x)) + b0[:, None])
    torch.testing.assert_close(tied(x), collapsed)


@pytest.mark.parametrize("T", [N_CTX, 6])
def test_parallel_convolutions_each_read_the_whole_input(T):
    """P masked convolutions of the same input, concatenated along features, then one linear map:
    built here from the raw parameters, one convolution at a time."""
    block = make(parallel=2)
    x = torch.randn(2, T, D, dtype=torch.double)
    W = block.conv.weight.detach().reshape(2, N_CTX, N_CTX) * lower_triangle(N_CTX)
    bias = block.conv.bias.detach().reshape(2, N_CTX)
    outputs = [torch.einsum("ts,bsd->btd", W[p, :T, :T], x) + bias[p, :T, None] for p in range(2)]
    A, a = block.out_proj.weight.detach(), block.out_proj.bias.detach()
    expected = sum(outputs[p] @ A[:, p * D:(p + 1) * D].T for p in range(2)) + a
    torch.testing.assert_close(block(x), expected, rtol=1e-12, atol=1e-12)
    assert not torch.equal(W[0], W[1])  # two convolutions, not one used twice
    assert block.out_proj.in_features == 2 * D and block.in_proj is None


def test_parallel_refuses_heads_and_expansion():
    for options in ({"n_heads": 2}, {"expansion": 2}, {"expanded": True}):
        with pytest.raises(ValueError, match="parallel=2 combines with neither"):
            make(parallel=2, **options)
    with pytest.raises(ValueError, match="at least 1"):
        make(parallel=0)


def test_masked_weights_get_zero_gradient_and_never_move():
    """What is checked: (1) after backward, every masked (upper-triangle) entry of the weight has a
    gradient of exactly 0; (2) an Adam step without weight decay leaves them bit-identical (a zero
    gradient gives zero moments, hence a zero update); (3) whatever they hold never changes the
    output, so decoupled weight decay shrinking them (AdamW) would be harmless too."""
    block = make(kernel_size=3, n_heads=2)
    masked = ~block.conv.mask.repeat(2, 1, 3)  # the bool mask is shared by the 2 heads and 3 taps
    assert masked.any()
    before = block.conv.weight.detach().clone()
    opt = torch.optim.Adam(block.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        block(torch.randn(2, N_CTX, D, dtype=torch.double)).pow(2).mean().backward()
        assert block.conv.weight.grad[masked].abs().max().item() == 0.0
        assert block.conv.weight.grad[~masked].abs().max().item() > 0.0
        opt.step()
    after = block.conv.weight.detach()
    assert torch.equal(after[masked], before[masked])
    assert not torch.equal(after[~masked], before[~masked])
    x = torch.randn(2, N_CTX, D, dtype=torch.double)
    y = block(x)
    with torch.no_grad():
        block.conv.weight[masked] = 1e6
    torch.testing.assert_close(block(x), y, rtol=0, atol=0)


@pytest.mark.parametrize("k", [1, 3])
def test_memory_saving_backward_is_the_true_gradient(k):
    """`MaskedMix` computes its own backward (to avoid keeping the masked weight copy): gradcheck it,
    and compare with plain autograd through `(w * mask)` on a whole block."""
    torch.manual_seed(0)
    G, To, Ti, B, Dx = 2, 5, 6, 3, 4
    w = torch.randn(G, To, Ti, k, dtype=torch.double, requires_grad=True)
    mask = causal_mask(To, Ti).bool()[:, :, None]
    x_shape = (B, G, Ti, Dx) if k == 1 else (B, G * Ti, Dx + k - 1)
    x = torch.randn(*x_shape, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: MaskedMix.apply(x, w, mask), (x, w))

    block = make(kernel_size=k, n_heads=2)
    x = torch.randn(2, 7, D, dtype=torch.double, requires_grad=True)
    ours = torch.autograd.grad(block(x).pow(2).sum(), [x, block.conv.weight, block.conv.bias])
    conv = block.conv
    wm = conv.masked_weight()[:, :7, :7]  # plain autograd through weight * mask
    h = torch.nn.functional.pad(block.in_proj(x).reshape(2, 7, 2, D // 2).transpose(1, 2).reshape(2, 14, D // 2),
                                ((k - 1) // 2, k // 2))
    y = torch.nn.functional.conv1d(h, wm.reshape(14, 7, k), conv.bias.reshape(2, N_CTX)[:, :7].reshape(-1), groups=2)
    y = block.out_proj(y.reshape(2, 2, 7, D // 2).transpose(1, 2).reshape(2, 7, D))
    torch.testing.assert_close(block(x), y)
    reference = torch.autograd.grad(y.pow(2).sum(), [x, conv.weight, conv.bias])
    for a, b in zip(ours, reference):
        torch.testing.assert_close(a, b)


def test_bf16_autocast_trains():
    torch.manual_seed(0)
    block = MaskedMixer(D, n_ctx=N_CTX, kernel_size=3, n_heads=2)
    x = torch.randn(2, N_CTX, D)
    reference = torch.autograd.grad(block(x).pow(2).mean(), block.conv.weight)[0]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = block(x)
    assert y.dtype == torch.bfloat16
    (grad,) = torch.autograd.grad(y.float().pow(2).mean(), block.conv.weight)
    assert grad.dtype == torch.float32
    # Relative to the gradient's own size (its entries are below 0.01, so an absolute tolerance
    # would pass a zero gradient): bf16 keeps 8 bits of mantissa, and the error here is about 1%.
    assert (grad - reference).norm() / reference.norm() < 0.03


def test_only_unit_expansion_is_sensible():
    # e = 2: hidden rows >= n_ctx are never read by the second (tril) conv, so they are dead.
    block = make(expansion=2)
    block(torch.randn(2, N_CTX, D, dtype=torch.double)).pow(2).mean().backward()
    dead_in = block.conv.weight.grad.reshape(2 * N_CTX, N_CTX, -1)[N_CTX:]
    dead_out = block.conv_out.weight.grad.reshape(N_CTX, 2 * N_CTX, -1)[:, N_CTX:]
    assert dead_in.abs().max().item() == 0.0 and dead_out.abs().max().item() == 0.0
    # e = 0.5: inputs at positions >= n_ctx / 2 reach no output at all.
    block = make(expansion=0.5)
    x = torch.randn(2, N_CTX, D, dtype=torch.double, requires_grad=True)
    (grad,) = torch.autograd.grad(block(x).sum(), x)
    assert grad[:, N_CTX // 2:].abs().max().item() == 0.0 and grad[:, : N_CTX // 2].abs().min() > 0


# ---------------------------------------------------------------- bidirectional (two streams)

H = 4  # width of one stream; the blocks see 2 H


def test_bidirectional_block_keeps_streams_apart_and_reads_the_right_positions():
    torch.manual_seed(0)
    block = BidirectionalMaskedMixer(2 * H, n_ctx=N_CTX).double()
    x = torch.randn(2, N_CTX, 2 * H, dtype=torch.double, requires_grad=True)
    y = block(x)
    for t in range(N_CTX):
        (gf,) = torch.autograd.grad(y[:, t, :H].sum(), x, retain_graph=True)
        (gr,) = torch.autograd.grad(y[:, t, H:].sum(), x, retain_graph=True)
        assert gf[..., H:].abs().max() == 0 and gr[..., :H].abs().max() == 0, "a stream read the other one"
        reads_f = (gf[..., :H].abs().sum(dim=(0, 2)) > 0).tolist()
        reads_r = (gr[..., H:].abs().sum(dim=(0, 2)) > 0).tolist()
        assert reads_f == [s <= t for s in range(N_CTX)]
        assert reads_r == [s >= t + 2 for s in range(N_CTX)]


def bidirectional_stack(n_layers, norm, mixing=None, seed=0):
    """embedding -> two streams -> [h + mixer(norm(h)); (mixing); h + mlp(norm(h))] x n -> merge."""
    torch.manual_seed(seed)
    layers = nn.ModuleList()
    for _ in range(n_layers):
        layers.append(nn.ModuleList([norm(), BidirectionalMaskedMixer(2 * H, n_ctx=N_CTX),
                                     norm(), TwoStreamMLP(2 * H, d_ff=16)]))
    mix = mixing() if mixing else None
    model = nn.ModuleList([layers, mix] if mix else [layers]).double()

    def run(e):
        h = two_stream_input(e)
        for i, (n1, mixer, n2, mlp) in enumerate(layers):
            h = h + mixer(n1(h))
            if mix is not None and i == 0:
                h = h + mix(h)
            h = h + mlp(n2(h))
        return bidirectional_merge(h)

    return model, run


def dependence(run, T=N_CTX):
    """`dep[t, s]` = sum of |d merged[:, t] / d e[:, s]| over batch and features."""
    torch.manual_seed(1)
    e = torch.randn(2, T, H, dtype=torch.double, requires_grad=True)
    out = run(e)
    rows = [torch.autograd.grad(out[:, t].sum(), e, retain_graph=True)[0].abs().sum(dim=(0, 2)) for t in range(T)]
    return torch.stack(rows)


def test_mixing_the_streams_leaks_the_next_token():
    """One position-wise Linear(2H, 2H) between two bidirectional blocks leaks token t + 1 into the
    prediction at t, for every t. Two paths: position t + 2's forward stream (which holds token
    t + 1) reaches position t's reverse stream through the second block's triu(2) conv, needing
    t + 2 < T; position t - 1's reverse stream (which holds t + 1 through triu(2)) reaches position
    t's forward stream through the second block's tril conv, needing t >= 1. So position 0 leaks
    only by the first path and position T - 2 only by the second."""
    _, run = bidirectional_stack(2, lambda: TwoStreamNorm(2 * H), mixing=lambda: nn.Linear(2 * H, 2 * H))
    dep = dependence(run)
    for t in range(N_CTX - 1):
        assert dep[t, t + 1] > 1e-8, f"position {t} should leak token {t + 1}"
    # Mixing after the last sequence-mixing step is harmless: the leak needs a conv after the mix.
    _, run_one = bidirectional_stack(1, lambda: TwoStreamNorm(2 * H), mixing=lambda: nn.Linear(2 * H, 2 * H))
    dep = dependence(run_one)
    assert all(dep[t, t + 1] == 0.0 for t in range(N_CTX - 1))


def test_a_norm_over_both_streams_leaks_too():
    """A LayerNorm over all 2H features mixes the streams through its mean and variance, so the
    model's plain per-block norm cannot be used with two-stream blocks: use TwoStreamNorm."""
    _, run = bidirectional_stack(2, lambda: nn.LayerNorm(2 * H))
    dep = dependence(run)
    assert all(dep[t, t + 1] > 1e-10 for t in range(N_CTX - 1))


@pytest.mark.parametrize("shared", [False, True])
def test_streams_kept_apart_never_see_the_next_token(shared):
    torch.manual_seed(0)
    norm = lambda: TwoStreamNorm(2 * H, shared=shared)  # noqa: E731
    _, run = bidirectional_stack(4, norm)
    dep = dependence(run)
    for t in range(N_CTX):
        # Exactly zero from token t + 1, while every token it may read (<= t and >= t + 2) counts.
        assert [bool(dep[t, s] > 0) for s in range(N_CTX)] == [s != t + 1 for s in range(N_CTX)], t


def test_two_stream_mlp_never_mixes_streams():
    torch.manual_seed(0)
    for shared in (True, False):
        mlp = TwoStreamMLP(2 * H, shared=shared).double()
        x = torch.randn(3, 5, 2 * H, dtype=torch.double, requires_grad=True)
        (g,) = torch.autograd.grad(mlp(x)[..., :H].sum(), x)
        assert g[..., H:].abs().max() == 0 and g[..., :H].abs().sum() > 0
    with pytest.raises(ValueError, match="even d_model"):
        BidirectionalMaskedMixer(7, n_ctx=N_CTX)
