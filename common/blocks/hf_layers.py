"""Hugging Face decoder layers (GPT-Neo, GPT-NeoX/Pythia, Llama) as blocks, so that pretrained
checkpoints slot into any `LanguageModel` pattern beside our own blocks.

A Hugging Face layer holds its own pre-norms and residual additions, so the block sets
`wraps_residual`: the model hands it the residual stream itself instead of `x + block(norm(x))`.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from common.blocks.registry import Block, register
from common.errors import ConfigError

FAMILY_NAMES = ("gpt_neo", "gpt_neox", "llama")


def family_classes(family: str) -> tuple:
    """(config class, layer class, rotary class or None) of a family. transformers is imported here,
    when a block is built, not when the registry loads: its model modules took 2-4 s of the start of
    every stage, most of which never build one."""
    from transformers import GPTNeoConfig, GPTNeoXConfig, LlamaConfig
    from transformers.models.gpt_neo.modeling_gpt_neo import GPTNeoBlock
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXLayer, GPTNeoXRotaryEmbedding
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    return {"gpt_neo": (GPTNeoConfig, GPTNeoBlock, None),
            "gpt_neox": (GPTNeoXConfig, GPTNeoXLayer, GPTNeoXRotaryEmbedding),
            "llama": (LlamaConfig, LlamaDecoderLayer, LlamaRotaryEmbedding)}[family]


@register("hf_decoder")
class HFDecoderLayer(Block):
    """One decoder layer of a Hugging Face model family, built from that family's config.

    `config` holds the family's config fields (as in its `config.json`); `hidden_size` is set from
    `d_model`. Attention runs through SDPA with no mask, which Hugging Face treats as causal;
    GPT-Neo applies its own causal (and local-window) mask inside the layer.
    """

    wraps_residual = True
    supports_step = False  # cached decoding through Hugging Face's Cache objects is not wired in

    @staticmethod
    def check_options(options: dict[str, Any], where: str) -> None:
        """The `config` fields must be ones the family's config class has: Hugging Face configs
        accept any keyword and keep it as an attribute, so a misspelt field would be ignored."""
        config_cls = family_classes(options.get("family", "llama"))[0]
        known = config_cls().to_dict()
        for key in options.get("config") or {}:
            if key not in known:
                raise ConfigError(f"{where}.config.{key}: not a field of transformers' {config_cls.__name__}")
            if key == "hidden_size":
                raise ConfigError(f"{where}.config.hidden_size: set from the model's d_model, not per block")

    def __init__(self, d_model: int, layer_idx: int = 0, family: Literal["gpt_neo", "gpt_neox", "llama"] = "llama",
                 config: dict[str, Any] | None = None):
        super().__init__()
        if family not in FAMILY_NAMES:
            raise ValueError(f"unknown Hugging Face family {family!r}; allowed: {', '.join(FAMILY_NAMES)}")
        self.check_options({"family": family, "config": config}, "hf_decoder")
        from huggingface_hub.errors import StrictDataclassError

        config_cls, layer_cls, rotary_cls = family_classes(family)
        try:
            hf_config = config_cls(**{**(config or {}), "hidden_size": d_model})
        except (ValueError, StrictDataclassError) as err:  # e.g. heads that do not divide hidden_size
            raise ValueError(f"{family} config: {' '.join(str(err).split())}") from None
        # GPT-Neo has only its eager attention, which applies its own causal and local masks.
        hf_config._attn_implementation = "eager" if family == "gpt_neo" else "sdpa"
        self.family = family
        self.layer = layer_cls(hf_config, layer_idx)
        self.rotary = rotary_cls(hf_config) if rotary_cls is not None else None

    def forward(self, x: torch.Tensor, cache=None) -> torch.Tensor:
        if self.family == "gpt_neo":
            return self.layer(x)[0]
        position_ids = torch.arange(x.shape[1], device=x.device)[None]
        out = self.layer(x, attention_mask=None, position_ids=position_ids,
                         position_embeddings=self.rotary(x, position_ids))
        return out[0] if isinstance(out, tuple) else out
