"""Hyena operator (Poli et al. 2023, "Hyena Hierarchy", arXiv 2302.10866), single- and multi-head.

Order-N Hyena, token mixing only (the model adds norm and residual):

    u -> in_proj (d -> (N + 1) d) -> short causal depthwise conv -> split into x_0, ..., x_{N-1}, v
    for n = 1 .. N-1:   v = h_n * (x_{N-n} . v) + D_n . (x_{N-n} . v)     (* : causal long conv)
    y = out_proj(x_0 . v)

The long filters h_n are implicit: a small MLP with sine activations maps positional features of
t (t / n_ctx and a few sin/cos bands) to one value per channel, and an exponentially decaying
window multiplies it, so each channel's filter fades at its own rate. The long convolution runs by
FFT with both signals zero-padded to 2T, so there is no circular wrap-around and output t only
sees inputs <= t. Up to `fft_threshold` positions (default 64) the same convolution runs as a
lower-triangular Toeplitz matmul instead: as cheap at that length, and exactly causal, whereas the
FFT's rounding gives future inputs a ~1e-16 relative (not zero) gradient.

Multi-head (`n_heads = H > 1`, order 2 only), the MH-Hyena of the MAD / Laughing-Hyena line:
channels are split into H heads of size dh = d / H; per head the gated input is the outer product
`k_t v_t^T` (a dh x dh state per position, with k = x_1, v = v) instead of the elementwise
product, it is convolved in time by one implicit filter per head, and the query x_0 contracts it
back: `y_t[j] = sum_i q_t[i] (sum_{s<=t} h(t-s) k_s[i] v_s[j] + D k_t[i] v_t[j])`. This is linear
attention with a learned long-conv decay in place of the running sum. With H = 1 the block is the
plain elementwise Hyena (one filter per channel), not a d x d state.

Note on MAD's naming: mad-lab's `MultiHeadHyenaOperator(num_heads=n)` passes `n` as the *head size*
to its `fftconv_heads`, so its "mh-hyena 16 heads" at width 128 is 8 heads of size 16 here
(`n_heads = d_model // 16`). Its operators also tie the input projection (`proj_groups=4`: a
projection of width (order + 1) d / 4, repeated 4 times before the split); ours is a full
`Linear(d, (order + 1) d)`.

The filter is defined over positions 0 .. n_ctx - 1 with features normalised by n_ctx, so an input
of length T < n_ctx uses exactly the first T filter taps: outputs are prefix-consistent. There is
no recurrent form here, so generation recomputes the window (`supports_step = False`).
"""

from __future__ import annotations

import math

import torch
from einops import rearrange
from torch import nn

from common.blocks.registry import Block, register


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    # Half-precision FFTs (and long sums) lose too much: compute in fp32, or fp64 if given fp64.
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def fft_causal_conv(u: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """`y[..., t] = sum_{s <= t} h[..., t - s] u[..., s]` over the last axis, by FFT, O(T log T).

    Padding both to 2T makes the circular convolution equal the linear one on the first T outputs.
    Causal up to rounding: the FFT touches every position, so d y_t / d u_s for s > t is ~1e-16
    relative rather than exactly 0. Returns u's dtype.
    """
    T, dtype = u.shape[-1], _compute_dtype(u)
    n = 2 * T
    y = torch.fft.irfft(torch.fft.rfft(u.to(dtype), n=n) * torch.fft.rfft(h.to(dtype), n=n), n=n)[..., :T]
    return y.to(u.dtype)


def direct_causal_conv(u: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """The same convolution as a lower-triangular Toeplitz matmul, O(T^2) but exactly causal."""
    T, dtype = u.shape[-1], _compute_dtype(u)
    lag = torch.arange(T, device=u.device)[:, None] - torch.arange(T, device=u.device)  # t - s
    toeplitz = torch.where(lag >= 0, h.to(dtype)[..., lag.clamp(min=0)], 0.0)  # [..., T, T]
    return torch.matmul(toeplitz, u.to(dtype)[..., None])[..., 0].to(u.dtype)


def causal_long_conv(u: torch.Tensor, h: torch.Tensor, fft_threshold: int = 64) -> torch.Tensor:
    """FFT for long inputs; the direct form up to `fft_threshold` positions, where it is as cheap
    and keeps causality exact (so gradient-based causality checks hold to the bit)."""
    return direct_causal_conv(u, h) if u.shape[-1] <= fft_threshold else fft_causal_conv(u, h)


class Sin(nn.Module):
    """sin(w x) with a learned frequency per unit; high frequencies let the filter MLP draw sharp filters."""

    def __init__(self, width: int, freq: float = 1.0):
        super().__init__()
        self.freq = nn.Parameter(torch.full((width,), freq))

    def forward(self, x):
        return torch.sin(self.freq * x)


class ImplicitFilter(nn.Module):
    """`n_filters` long filters of length up to n_ctx, from an MLP over positional features.

    Features of position t: `t / n_ctx` and `cos, sin(2 pi f t / n_ctx)` for f = 1 .. K, with
    K = (emb_dim - 1) / 2. Window: `exp(-a_c t / n_ctx)`, with rates a_c spread over the channels so
    that the fastest channel falls to 1 % at `decay[0]` of the context and the slowest at `decay[1]`.
    """

    def __init__(self, n_filters: int, n_ctx: int, emb_dim: int = 5, width: int = 64,
                 decay: tuple[float, float] = (0.3, 1.5), sin_freq: float = 1.0):
        super().__init__()
        if emb_dim < 3 or emb_dim % 2 == 0:
            raise ValueError(f"filter_emb_dim must be odd and >= 3 (t plus sin/cos pairs), got {emb_dim}")
        self.n_ctx, self.n_bands = n_ctx, (emb_dim - 1) // 2
        self.mlp = nn.Sequential(
            nn.Linear(emb_dim, width), Sin(width, sin_freq),
            nn.Linear(width, width), Sin(width, sin_freq),
            nn.Linear(width, n_filters, bias=False),
        )
        fast, slow = decay
        rates = torch.linspace(math.log(100) / fast, math.log(100) / slow, n_filters)
        self.register_buffer("rates", rates, persistent=False)

    def forward(self, T: int) -> torch.Tensor:
        """`[n_filters, T]`, the first T taps."""
        device, dtype = self.rates.device, self.rates.dtype
        t = torch.arange(T, device=device, dtype=dtype)[:, None] / self.n_ctx  # [T, 1]
        angles = 2 * math.pi * t * torch.arange(1, self.n_bands + 1, device=device, dtype=dtype)
        features = torch.cat([t, angles.cos(), angles.sin()], dim=-1)  # [T, emb_dim]
        filters = self.mlp(features)  # [T, n_filters]
        window = torch.exp(-t * self.rates)
        return (filters * window).T


@register("hyena")
class Hyena(Block):
    """Hyena token mixer: causal, no recurrent step (generation recomputes the window)."""

    supports_step = False

    option_bounds = {"order": {"ge": 2}, "n_heads": {"ge": 1}, "filter_dim": {"ge": 1}, "short_kernel": {"ge": 1},
                     "filter_emb_dim": {"ge": 3}, "filter_sin_freq": {"gt": 0}, "fft_threshold": {"ge": 0}}

    def __init__(self, d_model: int, layer_idx: int = 0, n_ctx: int = 2048, order: int = 2, n_heads: int = 1,
                 filter_dim: int = 64, short_kernel: int = 3, filter_emb_dim: int = 5,
                 filter_decay: tuple[float, float] = (0.3, 1.5), filter_sin_freq: float = 1.0,
                 bias: bool = True, fft_threshold: int = 64):
        super().__init__()
        if order < 2:
            raise ValueError(f"Hyena order must be >= 2, got {order}")
        if d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} must divide d_model={d_model}")
        if n_heads > 1 and order != 2:
            raise ValueError("multi-head Hyena is defined for order 2 only")
        self.d_model, self.n_ctx, self.order, self.n_heads = d_model, n_ctx, order, n_heads
        self.fft_threshold = fft_threshold
        width = (order + 1) * d_model
        self.in_proj = nn.Linear(d_model, width, bias=bias)
        # Depthwise, left-padded by k - 1 and cut back to T: causal local mixing before the gates.
        self.short_conv = nn.Conv1d(width, width, short_kernel, groups=width, padding=short_kernel - 1)
        # One filter per channel and recurrence step; with heads, one per head (shared by its state).
        n_filters = (order - 1) * d_model if n_heads == 1 else n_heads
        self.filter = ImplicitFilter(n_filters, n_ctx, filter_emb_dim, filter_dim, tuple(filter_decay),
                                     filter_sin_freq)
        # D: the skip term of the long conv (the filter's tap at lag 0 is learned separately by the MLP).
        self.skip = nn.Parameter(torch.randn(n_filters))
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    @torch.no_grad()
    def init_weights(self, std: float) -> None:
        """The standard initialisation on the projections only: the implicit filter's small sine
        network keeps its own, which sets the filters' frequency content."""
        for proj in (self.in_proj, self.out_proj):
            nn.init.normal_(proj.weight, std=std)
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)

    def forward(self, x: torch.Tensor, cache=None) -> torch.Tensor:
        T = x.shape[1]
        if T > self.n_ctx:
            raise ValueError(f"hyena: sequence length {T} exceeds n_ctx={self.n_ctx}")
        u = rearrange(self.in_proj(x), "b t c -> b c t")
        u = self.short_conv(u)[..., :T]
        *gates, v = u.split(self.d_model, dim=1)  # each [B, d, T]
        h = self.filter(T)
        if self.n_heads == 1:
            h = rearrange(h, "(n d) t -> n d t", n=self.order - 1)
            skip = rearrange(self.skip, "(n d) -> n d 1", n=self.order - 1)
            for n, gate in enumerate(reversed(gates[1:])):
                v = gate * v
                v = causal_long_conv(v, h[n], self.fft_threshold) + skip[n] * v
            y = gates[0] * v
        else:
            q, k = (rearrange(g, "b (h d) t -> b h d t", h=self.n_heads) for g in gates)
            v = rearrange(v, "b (h d) t -> b h d t", h=self.n_heads)
            kv = k[:, :, :, None] * v[:, :, None]  # [B, H, dh_k, dh_v, T]
            kv = causal_long_conv(kv, h[:, None, None], self.fft_threshold) + self.skip[:, None, None, None] * kv
            y = rearrange(torch.einsum("bhit,bhijt->bhjt", q, kv), "b h d t -> b (h d) t")
        return self.out_proj(rearrange(y, "b c t -> b t c"))
