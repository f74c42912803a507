"""One registry and one constructor signature for every block, in the manner of zoology.

Every block is an `nn.Module` subclass of `Block`, registered under a short name, and built as

    build_block(name, d_model, layer_idx, shared={"n_ctx": ...}, **options)

A block maps `x: [batch, time, d_model]` to a tensor of the same shape; the model adds the residual
and the pre-norm around it.

A block's constructor is its config schema: it declares exactly the options it takes, with types,
and has no catch-all `**kwargs`. `build_block` checks options against that signature, so a typo
(`n_head` for `n_heads`) stops with one line naming the option and what is allowed instead of
silently training the default. Settings the model offers every block (`SHARED`: `n_ctx`) reach
only the blocks that declare them. A block outside the registry is named by import path,
`package.module:Class`, so a paper can keep its own blocks in its package and use them from YAML.

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

`position_weights = True` marks blocks with weights that belong to one position (a masked mixer's
`n_ctx x n_ctx` convolution): training on rows shorter than `n_ctx` leaves the later positions'
weights untrained, so the training module refuses such rows.

`option_bounds` gives each numeric option its range (`{"n_heads": {"ge": 1}}`, as `common.config`'s
`bounded`), checked with the types, so a zero or negative size is one line rather than a
division by zero or a silently clamped width.

`causal = False` marks blocks that see the future (bidirectional mixers); the registry-wide
causality test skips them and checks that they are marked honestly.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from typing import Any, ClassVar, get_type_hints

import torch
from torch import nn

from common.config import check_bounds, check_value
from common.errors import ConfigError

BLOCKS: dict[str, type[Block]] = {}
_kernels_announced: set[tuple[str, str]] = set()


def announce_kernel(family: str, path: str) -> None:
    """Log once per process which implementation a block family runs (`kernel: mamba scan: chunked`),
    so a silent fallback from a GPU kernel to a PyTorch path shows in the stage's log."""
    if (family, path) not in _kernels_announced:
        _kernels_announced.add((family, path))
        logging.getLogger("common.blocks").info("kernel: %s: %s", family, path)


# Settings that `LanguageModel` offers every block; a block receives one only if it declares it.
SHARED = ("n_ctx",)


class Block(nn.Module):
    """Base class: default generation protocol for position-wise blocks."""

    name: ClassVar[str] = ""
    causal: ClassVar[bool] = True
    supports_step: ClassVar[bool] = True
    wraps_residual: ClassVar[bool] = False
    position_weights: ClassVar[bool] = False
    option_bounds: ClassVar[dict[str, dict[str, float]]] = {}

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


def block_class(name: str) -> type[Block]:
    """A registered name, or an import path `package.module:Class` naming a `Block` subclass."""
    if ":" not in name:
        if name not in BLOCKS:
            raise ConfigError(f"unknown block {name!r}; registered: {', '.join(sorted(BLOCKS))}, "
                              "or an import path package.module:Class")
        return BLOCKS[name]
    module_name, _, attr = name.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"block {name!r}: cannot import it ({err})") from None
    if not (isinstance(cls, type) and issubclass(cls, Block)):
        raise ConfigError(f"block {name!r}: not a subclass of common.blocks.registry.Block")
    return cls


def block_options(cls: type[Block]) -> dict[str, inspect.Parameter]:
    """The options a block's constructor declares: every parameter after `d_model` and `layer_idx`."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    if [p.name for p in params[:2]] != ["d_model", "layer_idx"]:
        raise TypeError(f"{cls.__qualname__}.__init__ must start with (d_model, layer_idx, ...)")
    catch_all = [p.name for p in params if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    if catch_all:
        raise TypeError(f"{cls.__qualname__}.__init__ takes *{catch_all[0]}: a block declares exactly its options")
    return {p.name: p for p in params[2:]}


def check_block_options(name: str, options: dict[str, Any], where: str) -> dict[str, Any]:
    """Validate `options` for block `name` against its constructor: unknown names, missing required
    options, wrong types and numbers outside `option_bounds` are a `ConfigError` naming
    `where.<option>` and the allowed options.
    Returns the options converted to the declared types (a YAML list to a tuple, an int to a float)."""
    cls = block_class(name)
    declared = block_options(cls)
    hints = get_type_hints(cls.__init__)
    allowed = ", ".join(key for key in declared if key not in SHARED) or "none"
    checked = {}
    for key, value in options.items():
        if key in SHARED and key in declared:
            raise ConfigError(f"{where}.{key}: set by the model for every block that takes it, not per block")
        if key not in declared:
            raise ConfigError(f"{where}.{key}: unknown option; allowed: {allowed}")
        checked[key] = check_value(hints.get(key, Any), value, f"{where}.{key}")
        check_bounds(checked[key], cls.option_bounds.get(key, {}), f"{where}.{key}")
    for key, param in declared.items():
        if param.default is inspect.Parameter.empty and key not in options and key not in SHARED:
            raise ConfigError(f"{where}.{key}: required option missing")
    # A block whose option is itself a mapping (hf_decoder's `config`) checks inside it.
    if hasattr(cls, "check_options"):
        cls.check_options(checked, where)
    return checked


def build_block(name: str, d_model: int, layer_idx: int = 0, shared: dict[str, Any] | None = None,
                **options) -> Block:
    """Block `name` (registered, or `package.module:Class`) with the given options, which must be ones
    it declares; `shared` settings (`SHARED`) are passed to it only if it declares them."""
    cls = block_class(name)
    kwargs = {key: value for key, value in (shared or {}).items() if key in block_options(cls)}
    kwargs.update(check_block_options(name, options, where=name))
    try:
        return cls(d_model=d_model, layer_idx=layer_idx, **kwargs)
    except ValueError as err:  # a block's own check of its options against the model's sizes
        raise ConfigError(f"blocks.{name}: {err}") from None
