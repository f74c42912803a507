"""Channel mixers: the GPT-style MLP and the Llama-style SwiGLU. Position-wise, so stateless."""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from common.blocks.registry import Block, register


@register("mlp")
class MLP(Block):
    """Linear, GELU, Linear, with biases (GPT-2, GPT-Neo and the masked mixer's feed-forward).
    The hidden width is `d_ff`, or `expansion` x d_model when `d_ff` is not given."""

    option_bounds = {"d_ff": {"ge": 1}, "expansion": {"ge": 1}}

    def __init__(self, d_model: int, layer_idx: int = 0, d_ff: int | None = None, bias: bool = True,
                 expansion: int = 4):
        super().__init__()
        d_ff = d_ff or expansion * d_model
        self.fc = nn.Linear(d_model, d_ff, bias=bias)
        self.proj = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x, cache=None):
        return self.proj(F.gelu(self.fc(x)))


@register("swiglu")
class SwiGLU(Block):
    """SiLU-gated MLP without biases, named as in Llama (`gate_proj`, `up_proj`, `down_proj`)."""

    option_bounds = {"d_ff": {"ge": 1}}

    def __init__(self, d_model: int, layer_idx: int = 0, d_ff: int | None = None):
        super().__init__()
        # Llama's sizing: two thirds of 4d, keeping the parameter count of a 4d GELU MLP.
        d_ff = d_ff or 8 * ((8 * d_model // 3 + 7) // 8)
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x, cache=None):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
