"""Normalisation layers used around every block."""

from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    """Root-mean-square norm with a learned gain, computed in fp32 (as Llama and Mamba do)."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def check_two_stream_width(d_model: int) -> int:
    if d_model % 2:
        raise ValueError(f"two-stream blocks need an even d_model (two streams of d_model/2), got {d_model}")
    return d_model // 2


class TwoStreamNorm(nn.Module):
    """LayerNorm over each half separately, so the statistics never mix the streams.

    `shared=False` gives each stream its own affine parameters (the official `DoubleMixerBlock`
    has separate seq-LayerNorms); `shared=True` one set for both (its shared patch LayerNorm).
    """

    def __init__(self, d_model: int, eps: float = 1e-5, shared: bool = False):
        super().__init__()
        half = check_two_stream_width(d_model)
        self.norms = nn.ModuleList([nn.LayerNorm(half, eps=eps)] if shared else
                                   [nn.LayerNorm(half, eps=eps), nn.LayerNorm(half, eps=eps)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        forward, reverse = x.chunk(2, dim=-1)
        return torch.cat([self.norms[0](forward), self.norms[-1](reverse)], dim=-1)


def build_norm(kind: str, d_model: int, eps: float) -> nn.Module:
    """`rmsnorm`, `layernorm`, `none`, or `layernorm_two_stream` for the bidirectional mixer's
    two streams, whose statistics must never mix (a shared norm leaks the next token)."""
    if kind == "layernorm_two_stream":
        return TwoStreamNorm(d_model, eps)
    if kind == "rmsnorm":
        return RMSNorm(d_model, eps)
    if kind == "layernorm":
        return nn.LayerNorm(d_model, eps=eps)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"unknown norm {kind!r}; allowed: rmsnorm, layernorm, layernorm_two_stream, none")
