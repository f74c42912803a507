"""Masked mixers (Badger 2024, "Masked Mixers for Language Generation and Retrieval", arXiv 2409.01482).

The token-mixing part of a masked mixer is a 1-D convolution whose *channels are sequence
positions*: weight `[n_ctx, n_ctx, k]` maps the `n_ctx` input positions to the `n_ctx` output
positions, and the kernel (size k) slides over the feature axis. Causality comes from a
lower-triangular mask (diagonal included; the next-token shift happens in the loss).

Blocks registered here (token mixing only: `LanguageModel` adds the pre-norm and the residual,
and the feed-forward is its own block, e.g. pattern `"mixer,mlp"`):

- `"mixer"`: the causal masked mixer, flat (one conv), expanded (conv, GELU, conv) or multi-head.
- `"mixer_bidirectional"`: the two-stream block of "Masked Mixers II" (forward and reverse
  streams side by side in the feature axis, never mixed), with `"mlp_two_stream"` as its
  feed-forward, `TwoStreamNorm` as the norm it needs, and `bidirectional_merge` for the head.

Differences from the official code, on purpose:

- The mask is applied in the computation (`weight * mask`) at every forward, instead of
  overwriting `conv.weight.data`. The outputs are the same; the difference is that masked entries
  now get an exactly zero gradient, so optimizers without weight decay never move them (with
  decoupled weight decay they shrink towards zero, which is harmless: they are never read). A
  small autograd function (`MaskedMix`) re-applies the mask in backward rather than keeping the
  masked copy of the weight, so memory matches the official in-place masking.
- The multi-head mixer is the 2025 fixed design (a projection and a separate conv per head). The
  v1 code reused a stale loop index and convolved `x` rather than each projection, so all its
  heads were the same conv.
- "Two parallel convolutions" (§3.4) are not defined in the paper. Here they are the v1
  `MixerHead` as its loop meant it: each of P masked convolutions reads the whole (normed) input,
  the P outputs are concatenated along features and `Linear(P * d, d)` maps them back. (Summing
  two convolutions of the same input instead would be one convolution reparameterised, with no
  more inter-token freedom than the flat mixer.)
- The softmax mixer of §3.4 and Table S5 comes in two forms, because the paper and the official
  code disagree: `softmax="weights"` is the paper's ("Softmax-transforming the 1D convolutional
  weights before re-masking": each output position's weights over the input positions, then the
  mask), `softmax="outputs"` is the official `softmax_mixer*.py` (a softmax over the features of
  the convolution's output, before the residual). Under `"weights"` the masked entries do get a
  gradient: the softmax normalises over every input position, later ones included, before the mask.
- Inputs shorter than `n_ctx` are allowed: the top-left `T x T` block of the masked weight is used.
  Because output t only reads inputs <= t, this is exactly what right-padding to `n_ctx` (with
  anything) and slicing the first T outputs would give, minus the wasted work.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from common.blocks.norms import TwoStreamNorm, check_two_stream_width  # noqa: F401  (re-exported)
from common.blocks.registry import Block, register


def causal_mask(n_out: int, n_in: int) -> torch.Tensor:
    """Output position t reads input positions s <= t (diagonal included). Rectangular for the
    expanded mixer, as the official `torch.tril` on a non-square weight."""
    return torch.ones(n_out, n_in).tril()


def reverse_mask(n_out: int, n_in: int) -> torch.Tensor:
    """Output position t reads input positions s >= t + 2 (Masked Mixers II). Not t + 1: the
    prediction at t is the token at t + 1, so the reverse stream must not see it."""
    return torch.ones(n_out, n_in).triu(diagonal=2)


_MASKS: dict[tuple, torch.Tensor] = {}


def shared_mask(kind: str, n_out: int, n_in: int) -> torch.Tensor:
    """The bool mask `[n_out, n_in, 1]`, one tensor for every layer of the same shape (at n_ctx 4096
    it is 16 MiB, so a copy per layer would add up). Constant: nothing may write to it."""
    key = (kind, n_out, n_in, torch.empty(0).device)  # the default device the model is built on
    if key not in _MASKS:
        _MASKS[key] = {"causal": causal_mask, "reverse": reverse_mask}[kind](n_out, n_in).bool()[:, :, None]
    return _MASKS[key]


class MaskedMix(torch.autograd.Function):
    """`y = (w * mask)` applied over positions, saving only `w` (the parameter itself), the bool
    mask and `x` for backward.

    Plain autograd on `(w * mask) @ x` would also keep the masked copy of the weight until backward:
    as large as the weight (16 MiB per layer at n_ctx 2048, fp32), memory the official code, which
    masks `.data` in place, never needed. Backward re-applies the mask instead (a cheap elementwise
    product) and masks the weight gradient, so masked entries get exactly zero, as with autograd.
    Backward computes in the dtype of the incoming gradient (the forward's autocast dtype).

    `w` may be a function of the parameter (the softmax mixer's softmax of it): autograd then
    carries the weight gradient on to the parameter.

    Shapes: w `[G, T_out, T_in, k]`, mask `[T_out, T_in, 1]`. For k = 1, x `[B, G, T_in, D]` and a
    matmul over positions; for k > 1, x `[B, G * T_in, D + k - 1]` (already padded along features)
    and a grouped conv whose length axis is the feature axis.
    """

    @staticmethod
    def forward(ctx, x, w, mask):
        ctx.save_for_backward(x, w, mask)
        return MaskedMix.apply_weight(x, w * mask)

    @staticmethod
    def apply_weight(x, wm):
        if wm.shape[-1] == 1:
            return torch.matmul(wm[..., 0], x)  # [G, To, Ti] @ [B, G, Ti, D]
        return F.conv1d(x, rearrange(wm, "g o i k -> (g o) i k"), groups=wm.shape[0])

    @staticmethod
    def backward(ctx, grad_y):
        x, w, mask = ctx.saved_tensors
        dtype = grad_y.dtype
        wm = (w * mask).to(dtype)
        G, k = w.shape[0], w.shape[-1]
        grad_x = grad_w = None
        if k == 1:
            if ctx.needs_input_grad[0]:
                grad_x = torch.matmul(wm[..., 0].mT, grad_y).to(x.dtype)
            if ctx.needs_input_grad[1]:
                grad_w = torch.einsum("bgtd,bgsd->gts", grad_y, x.to(dtype))[..., None]
        else:
            flat = rearrange(wm, "g o i k -> (g o) i k")
            if ctx.needs_input_grad[0]:
                grad_x = torch.nn.grad.conv1d_input(x.shape, flat, grad_y, groups=G).to(x.dtype)
            if ctx.needs_input_grad[1]:
                grad_w = torch.nn.grad.conv1d_weight(x.to(dtype), flat.shape, grad_y, groups=G)
                grad_w = rearrange(grad_w, "(g o) i k -> g o i k", g=G)
        if grad_w is not None:
            grad_w = grad_w.mul_(mask).to(w.dtype)
        return grad_x, grad_w, None


class MaskedSeqConv(nn.Module):
    """`groups` independent masked convolutions over positions, one per head.

    The weight is stored in `nn.Conv1d`'s layout `[groups * n_out, n_in, k]`, so for one group it is
    exactly the official `Conv1d(n_ctx, n_ctx, k)` weight. Input `[B, groups, T_in, D]` (positions
    as channels, features as length), output `[B, groups, T_out, D]`. `weight_softmax=True` uses,
    instead of the weight, its softmax over the input positions (all `n_in` of them, then masked).
    """

    def __init__(self, n_in: int, n_out: int, kernel_size: int = 1, groups: int = 1, bias: bool = True,
                 mask: str = "causal", weight_softmax: bool = False):
        super().__init__()
        self.n_in, self.n_out, self.kernel_size, self.groups = n_in, n_out, kernel_size, groups
        self.weight_softmax = weight_softmax
        # nn.Conv1d's default init (uniform in +-1/sqrt(fan_in), fan_in = n_in * k), as the paper used.
        bound = 1 / math.sqrt(n_in * kernel_size)
        self.weight = nn.Parameter(torch.empty(groups * n_out, n_in, kernel_size).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(groups * n_out).uniform_(-bound, bound)) if bias else None
        # Bool, shared by the groups and by all layers of this shape: a float mask per layer would
        # cost as much memory as the weight itself. Not persistent: it is a function of the shape.
        self.register_buffer("mask", shared_mask(mask, n_out, n_in), persistent=False)

    def effective_weight(self) -> torch.Tensor:
        """`[groups, n_out, n_in, k]`, before the mask: the weight, or its softmax over the inputs."""
        w = rearrange(self.weight, "(g o) i k -> g o i k", g=self.groups)
        return w.softmax(dim=2) if self.weight_softmax else w

    def masked_weight(self) -> torch.Tensor:
        """`[groups, n_out, n_in, k]` with the masked entries zeroed (for inspection and export)."""
        return self.effective_weight() * self.mask

    def forward(self, x: torch.Tensor, t_out: int) -> torch.Tensor:
        B, G, t_in, D = x.shape
        # Slicing after the softmax: output t reads inputs <= t < t_in, so the cut columns are masked anyway.
        w = self.effective_weight()[:, :t_out, :t_in]
        mask = self.mask[:t_out, :t_in]
        if self.kernel_size == 1:
            y = MaskedMix.apply(x, w, mask)
        else:
            # Feature axis as the conv's length axis, padded as Conv1d's padding='same' does (the
            # extra zero on the right for even k), so D features come out.
            x = F.pad(rearrange(x, "b g t d -> b (g t) d"), ((self.kernel_size - 1) // 2, self.kernel_size // 2))
            y = rearrange(MaskedMix.apply(x, w, mask), "b (g t) d -> b g t d", g=G)
        if self.bias is None:
            return y
        return y + rearrange(self.bias, "(g o) -> g o", g=G)[:, :t_out, None].to(y.dtype)


@register("mixer")
class MaskedMixer(Block):
    """Causal token mixing by masked convolution over positions.

    - `kernel_size > 1`: the paper's "multiconv": k taps along the feature axis ('same' padding),
      each tap its own masked `n_ctx x n_ctx` matrix.
    - `expansion` / `expanded`: the expanded mixer, conv `L -> eL`, GELU, conv `eL -> L`, both with
      the rectangular tril mask. Used when `expanded=True` or `expansion != 1`. The blog's point,
      which the tests check: only e = 1 is sensible. With e > 1 the hidden rows >= L are never read
      by the second (tril) conv, so they are dead parameters; with e < 1 the inputs at positions
      >= eL reach no output at all.
    - `n_heads = H > 1`: per head a projection `Linear(d, d/H)` (one `Linear(d, d)` split in H
      slices), its own masked conv on that projection, heads concatenated back to d, then
      `Linear(d, d)`. H = 1 is the flat mixer with no projections, as in the paper.
    - `parallel = P > 1`: P masked convs side by side, each on the whole input (no projection in),
      outputs concatenated to P * d features, then `Linear(P * d, d)`: the paper's "parallel
      convolutions" (§3.4). Not combined with heads or expansion.
    - `softmax`: `"weights"` (the paper's softmax mixer: every conv's weights, softmax over input
      positions, then masked) or `"outputs"` (the official code's: softmax over the features of the
      mixing output, heads concatenated, before `out_proj`); `"none"` by default.

    Generation recomputes the whole window (`supports_step = False`): there is no recurrent state.
    """

    supports_step = False
    position_weights = True

    option_bounds = {"kernel_size": {"ge": 1}, "expansion": {"gt": 0}, "n_heads": {"ge": 1}, "parallel": {"ge": 1}}

    def __init__(self, d_model: int, layer_idx: int = 0, n_ctx: int = 512, kernel_size: int = 1,
                 expansion: float = 1, n_heads: int = 1, bias: bool = True, expanded: bool | None = None,
                 softmax: Literal["none", "weights", "outputs"] = "none", parallel: int = 1):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} must divide d_model={d_model}")
        self.n_ctx, self.n_heads, self.softmax, self.parallel = n_ctx, n_heads, softmax, parallel
        self.expanded = expansion != 1 if expanded is None else expanded
        if parallel < 1:
            raise ValueError(f"parallel={parallel}: the number of parallel convolutions must be at least 1")
        if parallel > 1 and (n_heads > 1 or self.expanded):
            raise ValueError(f"parallel={parallel} combines with neither n_heads > 1 nor expansion: "
                             "parallel convolutions each read the whole flat input")
        self.hidden = max(1, round(expansion * n_ctx)) if self.expanded else n_ctx
        self.in_proj = nn.Linear(d_model, d_model, bias=bias) if n_heads > 1 else None
        self.out_proj = nn.Linear(parallel * d_model, d_model, bias=bias) if n_heads > 1 or parallel > 1 else None
        groups = n_heads * parallel  # one of the two is 1
        on_weights = softmax == "weights"
        self.conv = MaskedSeqConv(n_ctx, self.hidden, kernel_size, groups, bias, weight_softmax=on_weights)
        self.conv_out = (MaskedSeqConv(self.hidden, n_ctx, kernel_size, groups, bias, weight_softmax=on_weights)
                         if self.expanded else None)

    def forward(self, x: torch.Tensor, cache=None) -> torch.Tensor:
        T = x.shape[1]
        if T > self.n_ctx:
            raise ValueError(f"masked mixer: sequence length {T} exceeds n_ctx={self.n_ctx}")
        if self.in_proj is not None:
            x = self.in_proj(x)
        h = rearrange(x, "b t (h d) -> b h t d", h=self.n_heads)
        if self.parallel > 1:
            h = h.expand(-1, self.parallel, -1, -1)  # every convolution reads the same input
        if self.expanded:
            # Hidden rows >= T are only read by outputs >= T (tril), so they can be dropped too.
            h = self.conv_out(F.gelu(self.conv(h, min(T, self.hidden))), T)
        else:
            h = self.conv(h, T)
        y = rearrange(h, "b h t d -> b t (h d)")
        if self.softmax == "outputs":
            y = y.softmax(dim=-1)
        return y if self.out_proj is None else self.out_proj(y)


# ----------------------------------------------------------------------------------------------
# Bidirectional (two-stream) mixer, "Masked Mixers II".
#
# Layout: a hidden state of width d_model = 2 D' holds two streams side by side,
# `[..., :D']` the forward stream and `[..., D':]` the reverse stream. Position t of the forward
# stream may depend on tokens <= t, position t of the reverse stream on tokens t and >= t + 2;
# their sum predicts token t + 1, which neither may see.
#
# The streams must stay apart in every sequence-mixing step. One position-wise op that mixes
# them (a Linear over 2 D', or a LayerNorm/RMSNorm whose statistics span both halves) followed by
# another mixer block leaks token t + 1 into position t: position t + 2's forward stream (tokens
# <= t + 2) reaches position t's reverse stream through the reverse conv, and position t - 1's
# reverse stream (tokens >= t + 1) reaches position t's forward stream through the forward conv.
# The blog reports the loss collapsing below 0.1 within half an epoch when that happens.
#
# How to build a bidirectional LM out of these pieces:
#     h = two_stream_input(embed(ids))            # or an embedding of width 2 D' (one per stream)
#     for each layer:  h = h + mixer_bidirectional(TwoStreamNorm(h))
#                      h = h + mlp_two_stream(TwoStreamNorm(h))
#     logits = head(final_norm(bidirectional_merge(h)))     # standard shift in the loss
# The residual is elementwise, so it never mixes the streams. The per-block norms MUST be
# `TwoStreamNorm` (per-stream statistics): `LanguageModel` with its plain `rmsnorm`/`layernorm`
# over 2 D' would leak. After the last block any position-wise mixing is harmless (a final norm
# over 2 D', or a head Linear(2 D', V), which is itself a learned merge).
# ----------------------------------------------------------------------------------------------


def two_stream_input(x: torch.Tensor) -> torch.Tensor:
    """`[B, T, D'] -> [B, T, 2 D']`: both streams start from the same embedding."""
    return torch.cat([x, x], dim=-1)


def bidirectional_merge(h: torch.Tensor) -> torch.Tensor:
    """`[B, T, 2 D'] -> [B, T, D']`: the sum of the forward and reverse streams, for the head."""
    forward, reverse = h.chunk(2, dim=-1)
    return forward + reverse


@register("mixer_bidirectional")
class BidirectionalMaskedMixer(Block):
    """Two masked convs on the two halves of `x [B, T, 2 D']`: tril (diagonal 0) on the forward
    stream, triu (diagonal 2) on the reverse stream, and nothing that crosses between them.

    `causal = False`: the reverse stream reads later positions by design; only the merged
    prediction is guarded (it never sees token t + 1, see the comment above). For T < n_ctx the
    top-left block of the weights is used, which for the reverse stream means positions beyond T
    contribute nothing: the same as zero-padding the block input, i.e. the sequence just ends.
    """

    causal = False
    supports_step = False
    position_weights = True

    option_bounds = {"kernel_size": {"ge": 1}}

    def __init__(self, d_model: int, layer_idx: int = 0, n_ctx: int = 512, kernel_size: int = 1,
                 bias: bool = True):
        super().__init__()
        check_two_stream_width(d_model)
        self.n_ctx = n_ctx
        self.conv_forward = MaskedSeqConv(n_ctx, n_ctx, kernel_size, 1, bias, mask="causal")
        self.conv_reverse = MaskedSeqConv(n_ctx, n_ctx, kernel_size, 1, bias, mask="reverse")

    def forward(self, x: torch.Tensor, cache=None) -> torch.Tensor:
        T = x.shape[1]
        if T > self.n_ctx:
            raise ValueError(f"bidirectional mixer: sequence length {T} exceeds n_ctx={self.n_ctx}")
        forward, reverse = x[:, None].chunk(2, dim=-1)  # each [B, 1, T, D']
        y = torch.cat([self.conv_forward(forward, T), self.conv_reverse(reverse, T)], dim=-1)
        return y[:, 0]


@register("mlp_two_stream")
class TwoStreamMLP(Block):
    """Feed-forward applied to each stream of `x [B, T, 2 D']` on its own: Linear, GELU, Linear.

    `shared=True` (default) uses one set of weights for both streams, as the official
    `DoubleMixerBlock` shares its feed-forward; `shared=False` gives each stream its own. Either
    way no feature of one stream reaches the other. `d_ff` is per stream (default 4 D').
    """

    option_bounds = {"d_ff": {"ge": 1}}

    def __init__(self, d_model: int, layer_idx: int = 0, d_ff: int | None = None, shared: bool = True,
                 bias: bool = True):
        super().__init__()
        half = check_two_stream_width(d_model)
        d_ff = d_ff or 4 * half
        self.ffs = nn.ModuleList(
            nn.Sequential(nn.Linear(half, d_ff, bias=bias), nn.GELU(), nn.Linear(d_ff, half, bias=bias))
            for _ in range(1 if shared else 2)
        )

    def forward(self, x: torch.Tensor, cache=None) -> torch.Tensor:
        forward, reverse = x.chunk(2, dim=-1)
        return torch.cat([self.ffs[0](forward), self.ffs[-1](reverse)], dim=-1)
