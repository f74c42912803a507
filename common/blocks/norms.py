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


def build_norm(kind: str, d_model: int, eps: float) -> nn.Module:
    if kind == "rmsnorm":
        return RMSNorm(d_model, eps)
    if kind == "layernorm":
        return nn.LayerNorm(d_model, eps=eps)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"unknown norm {kind!r}; allowed: rmsnorm, layernorm, none")
