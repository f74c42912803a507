"""The transformer-mixer hybrid ("transfixer") of the Masked Mixers report: Llama attention with a
flat masked mixer (a masked convolution over positions) attached to it.

`placement` says where the mixer goes. With `LanguageModel` adding the pre-norm and the residual
(`x + block(norm(x))`), the three variants compute

- `series` (the paper's transfixer): `x + a + mix(a)`, `a = attn(norm(x))`: the masked conv reads
  the attention output, and both reach the residual stream, as the official decoder layer's
  `h = a + mixer(a) + residual`;
- `before`: `x + attn(h + mix(h))`, `h = norm(x)`: the conv mixes tokens before attention;
- `parallel`: `x + attn(h) + mix(h)`: the two side by side (the blog found no gain from it).

The feed-forward is a separate block (`"transfixer,swiglu"`), as in a Llama decoder layer.
Generation recomputes the window: the masked conv has no recurrent step.
"""

from __future__ import annotations

from typing import Literal

import torch

from common.blocks.attention import Attention
from common.blocks.masked_mixer import MaskedMixer
from common.blocks.registry import Block, register

PLACEMENTS = ("series", "before", "parallel")


@register("transfixer")
class Transfixer(Block):
    supports_step = False
    position_weights = True

    option_bounds = {"n_heads": {"ge": 1}}

    def __init__(self, d_model: int, layer_idx: int = 0, n_ctx: int = 512, n_heads: int = 4,
                 placement: Literal["series", "before", "parallel"] = "series"):
        super().__init__()
        if placement not in PLACEMENTS:
            raise ValueError(f"transfixer placement {placement!r}; allowed: {', '.join(PLACEMENTS)}")
        self.placement = placement
        self.attn = Attention(d_model, layer_idx, n_heads=n_heads)
        self.mixer = MaskedMixer(d_model, layer_idx, n_ctx=n_ctx)

    def forward(self, x: torch.Tensor, cache=None) -> torch.Tensor:
        if self.placement == "series":
            a = self.attn(x)
            return a + self.mixer(a)
        if self.placement == "before":
            return self.attn(x + self.mixer(x))
        return self.attn(x) + self.mixer(x)
