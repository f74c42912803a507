"""Causal multi-head attention: Llama-style (RoPE) and GPT-Neo-style (learned positions, local
windows), through `scaled_dot_product_attention`, with a KV cache for generation."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from common.blocks.registry import Block, announce_kernel, register


@dataclass
class KVCache:
    k: torch.Tensor  # [B, H, max_len, head_dim]
    v: torch.Tensor
    length: int = 0  # positions filled so far


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryEmbedding(nn.Module):
    """Llama's rotary positions: channel pairs (i, i + head_dim/2) rotate at frequency theta^(-2i/d)."""

    def __init__(self, head_dim: int, theta: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor, start: int) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(start, start + q.shape[-2], device=q.device, dtype=torch.float32)
        freqs = torch.outer(positions, self.inv_freq)
        angles = torch.cat((freqs, freqs), dim=-1)
        cos, sin = angles.cos().to(q.dtype), angles.sin().to(q.dtype)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class _CausalAttention(Block):
    """Shared machinery: projections, the KV cache, and the attention call. Subclasses choose the
    positions (`_positions`), the softmax `scale` (None = 1/sqrt(head_dim)) and a local `window`."""

    scale: float | None = None
    window: int | None = None

    def __init__(self, d_model: int, n_heads: int, bias: bool, out_bias: bool):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} must divide d_model={d_model}")
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.o_proj = nn.Linear(d_model, d_model, bias=out_bias)

    def _positions(self, q, k, start):
        return q, k

    def allocate_cache(self, batch_size, max_len, device=None, dtype=None):
        shape = (batch_size, self.n_heads, max_len, self.head_dim)
        return KVCache(torch.zeros(shape, device=device, dtype=dtype), torch.zeros(shape, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        start = cache.length if cache is not None else 0
        q, k, v = (rearrange(p(x), "b t (h d) -> b h t d", h=self.n_heads)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        q, k = self._positions(q, k, start)
        if cache is not None:
            end = start + x.shape[1]
            cache.k[:, :, start:end], cache.v[:, :, start:end] = k, v
            cache.length = end
            k, v = cache.k[:, :, :end], cache.v[:, :, :end]
        out = self._attend(q, k, v, start)
        return self.o_proj(rearrange(out, "b h t d -> b t (h d)"))

    def _attend(self, q, k, v, start):
        # torch picks the fused backend (flash, memory-efficient) or the math one for the device.
        announce_kernel("attention", f"scaled_dot_product_attention on {q.device.type}")
        t_q, t_k = q.shape[-2], k.shape[-2]
        if self.window is None and start == 0 and t_q == t_k:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        # Decoding, or a local window: build the mask explicitly. Query i sits at position start + i.
        q_pos = torch.arange(start, start + t_q, device=q.device)[:, None]
        k_pos = torch.arange(t_k, device=q.device)[None, :]
        allowed = k_pos <= q_pos
        if self.window is not None:
            allowed &= k_pos > q_pos - self.window
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=self.scale)


@register("attn")
class Attention(_CausalAttention):
    """Llama-style attention: rotary positions, no biases, softmax scaled by 1/sqrt(head_dim)."""

    option_bounds = {"n_heads": {"ge": 1}, "rope_theta": {"gt": 0}}

    def __init__(self, d_model: int, layer_idx: int = 0, n_heads: int = 4, rope_theta: float = 10000.0,
                 bias: bool = False):
        super().__init__(d_model, n_heads, bias=bias, out_bias=bias)
        self.rotary = RotaryEmbedding(self.head_dim, rope_theta)

    def _positions(self, q, k, start):
        return self.rotary(q, k, start)


@register("attn_neo")
class NeoAttention(_CausalAttention):
    """GPT-Neo-style attention: no positions of its own (the model adds learned ones), a biased
    output projection, unscaled scores as in GPT-Neo, and an optional local window.

    `window` applies on layers where `layer_idx % local_every == local_offset`; GPT-Neo alternates
    global and local (window 256) layers, i.e. `local_every=2, local_offset=1`.
    """

    option_bounds = {"n_heads": {"ge": 1}, "window": {"ge": 1}, "local_every": {"ge": 1}, "local_offset": {"ge": 0}}

    def __init__(self, d_model: int, layer_idx: int = 0, n_heads: int = 4, window: int | None = None,
                 local_every: int = 2, local_offset: int = 1, scaled: bool = False):
        super().__init__(d_model, n_heads, bias=False, out_bias=True)
        self.scale = None if scaled else 1.0
        local = window is not None and layer_idx % local_every == local_offset
        self.window = window if local else None
