"""One registry and one constructor signature for every block, in the manner of zoology.

Every block is an `nn.Module` subclass of `Block`, registered under a short name, and built as

    build_block(name, d_model, layer_idx, **kwargs)

A block maps `x: [batch, time, d_model]` to a tensor of the same shape; the model adds the residual
and the pre-norm around it. Unknown keyword arguments are ignored by convention (`**kwargs`), so a
model can hand every block the same shared settings (`n_ctx`, for example).

Generation protocol (used by `LanguageModel.generate`):

- `allocate_cache(batch_size, max_len, device, dtype)` returns a per-layer cache object, or None
  for blocks that carry no state between positions (MLPs, MoE).
- `forward(x, cache)` with a freshly allocated cache processes the prompt and leaves in the cache
  whatever `step` needs to continue after it (KV entries, conv and SSM states).
- `step(x_t, cache)` takes one new position `[batch, 1, d_model]` and returns its output, updating
  the cache in place, in O(1) work for recurrent blocks.
- `supports_step = False` marks blocks that can only recompute the whole window (the masked
  mixer); a model containing one generates by full recomputation.

`wraps_residual = True` marks blocks that carry their own norm and residual (Hugging Face
decoder layers); the model then calls them on the residual stream as `x = block(x)`.

`causal = False` marks blocks that see the future (bidirectional mixers); the registry-wide
causality test skips them and checks that they are marked honestly.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

BLOCKS: dict[str, type["Block"]] = {}


class Block(nn.Module):
    """Base class: default generation protocol for position-wise blocks."""

    name: ClassVar[str] = ""
    causal: ClassVar[bool] = True
    supports_step: ClassVar[bool] = True
    wraps_residual: ClassVar[bool] = False

    def allocate_cache(self, batch_size: int, max_len: int, device=None, dtype=None) -> Any:
        return None

    def step(self, x: torch.Tensor, cache: Any) -> torch.Tensor:
        return self(x, cache)

    def aux_loss(self) -> torch.Tensor | None:
        """An auxiliary training loss from the last forward (MoE load balancing), or None."""
        return None

    @torch.no_grad()
    def init_weights(self, std: float) -> None:
        """GPT-2 / Llama / Megatron initialisation, which `LanguageModel` applies by default: every
        linear weight N(0, std), every linear bias zero. Blocks whose reference implementation
        initialises otherwise (Mamba, Hyena) override this."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)


def register(name: str):
    """Class decorator: `@register("mamba")`."""

    def add(cls: type[Block]) -> type[Block]:
        if name in BLOCKS:
            raise ValueError(f"block name {name!r} is already registered by {BLOCKS[name].__qualname__}")
        if not issubclass(cls, Block):
            raise TypeError(f"{cls.__qualname__} must subclass common.blocks.registry.Block")
        cls.name = name
        BLOCKS[name] = cls
        return cls

    return add


def build_block(name: str, d_model: int, layer_idx: int = 0, **kwargs) -> Block:
    if name not in BLOCKS:
        raise KeyError(f"unknown block {name!r}; registered: {', '.join(sorted(BLOCKS))}")
    return BLOCKS[name](d_model=d_model, layer_idx=layer_idx, **kwargs)
