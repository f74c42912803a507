"""Hugging Face models: a Llama reference built from a small typed spec, and loading GPT-Neo,
GPT-NeoX and Llama checkpoints (or their state dicts) into our `LanguageModel`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from transformers import LlamaConfig, LlamaForCausalLM

from common.config import bounded
from common.errors import ConfigError

if TYPE_CHECKING:  # lm.py imports the block registry, which imports transformers' layers: load it lazily
    from common.models.lm import LanguageModel


@dataclass
class LlamaSpec:
    d_model: int = bounded(128, ge=8)
    n_layers: int = bounded(4, ge=1)
    n_heads: int = bounded(4, ge=1)
    d_ff: int = bounded(344, ge=1)
    tie_embeddings: bool = True

    def check(self) -> None:
        if self.d_model % self.n_heads:
            raise ConfigError(f"n_heads: must divide d_model={self.d_model}, got {self.n_heads}")


def build_llama(spec: LlamaSpec, vocab_size: int, n_ctx: int) -> LlamaForCausalLM:
    """A Llama-style decoder: RoPE, RMSNorm, SwiGLU, no biases, SDPA attention."""
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=spec.d_model, intermediate_size=spec.d_ff,
        num_hidden_layers=spec.n_layers, num_attention_heads=spec.n_heads, num_key_value_heads=spec.n_heads,
        max_position_embeddings=n_ctx, tie_word_embeddings=spec.tie_embeddings,
        bos_token_id=1, eos_token_id=2, pad_token_id=2, attn_implementation="sdpa",
    )
    return LlamaForCausalLM(config)


def lm_state_dict_from_llama(hf_state: dict, n_layers: int) -> dict:
    """Rename a `LlamaForCausalLM` state dict for `LanguageModel(pattern="attn,swiglu", repeat=n_layers)`.

    Each Llama decoder layer becomes two of our blocks: attention (2i) and SwiGLU (2i + 1), each
    with the norm in front of it.
    """
    out = {"embed.weight": hf_state["model.embed_tokens.weight"], "final_norm.weight": hf_state["model.norm.weight"]}
    out["head.weight"] = hf_state.get("lm_head.weight", hf_state["model.embed_tokens.weight"])
    for i in range(n_layers):
        src = f"model.layers.{i}."
        out[f"norms.{2 * i}.weight"] = hf_state[src + "input_layernorm.weight"]
        out[f"norms.{2 * i + 1}.weight"] = hf_state[src + "post_attention_layernorm.weight"]
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            out[f"blocks.{2 * i}.{proj}.weight"] = hf_state[f"{src}self_attn.{proj}.weight"]
        for proj in ("gate_proj", "up_proj", "down_proj"):
            out[f"blocks.{2 * i + 1}.{proj}.weight"] = hf_state[f"{src}mlp.{proj}.weight"]
    return out


# Where each family keeps its parts: (embedding, learned positions, layers, final norm, head).
# transformers 5 names GPT-NeoX's head `lm_head` (older checkpoints' `embed_out` is renamed on load).
_HF_PARTS = {
    "gpt_neo": ("transformer.wte", "transformer.wpe", "transformer.h", "transformer.ln_f", "lm_head"),
    "gpt_neox": ("gpt_neox.embed_in", None, "gpt_neox.layers", "gpt_neox.final_layer_norm", "lm_head"),
    "llama": ("model.embed_tokens", None, "model.layers", "model.norm", "lm_head"),
}


def _layer_fields(config) -> dict:
    """The config fields an `hf_decoder` block takes: a checkpoint's config.json may carry keys its
    config class does not define (bookkeeping the layers never read), and hidden_size is d_model."""
    known = type(config)().to_dict()
    return {key: value for key, value in config.to_dict().items() if key in known and key != "hidden_size"}


def language_model_from_hf(source) -> LanguageModel:
    """A `LanguageModel` of `hf_decoder` blocks with the weights of a Hugging Face causal LM.

    `source` is a model instance or a directory written by `save_pretrained` (GPT-Neo,
    GPT-NeoX/Pythia or Llama). Its layers become blocks that any pattern can mix with ours.
    """
    from transformers import AutoModelForCausalLM, PreTrainedModel

    from common.models.lm import LanguageModel, LMConfig, check_model_type

    if isinstance(source, (str, Path)):
        check_model_type(source, *_HF_PARTS, other_loader="common.models.mamba.mamba_lm_from_hf")
    hf = source if isinstance(source, PreTrainedModel) else AutoModelForCausalLM.from_pretrained(str(source))
    config = hf.config
    family = config.model_type
    if family not in _HF_PARTS:
        raise ConfigError(f"unsupported Hugging Face model type {family!r}; supported: {', '.join(_HF_PARTS)}"
                          + ("; for Mamba use common.models.mamba.mamba_lm_from_hf" if family == "mamba" else ""))
    embed, positions, layers, final_norm, head = _HF_PARTS[family]
    n_layers = config.num_hidden_layers if family != "gpt_neo" else config.num_layers
    eps = getattr(config, "rms_norm_eps", None) or getattr(config, "layer_norm_eps", None) or config.layer_norm_epsilon
    lm = LanguageModel(LMConfig(
        vocab_size=config.vocab_size, d_model=config.hidden_size, pattern="hf_decoder", repeat=n_layers,
        n_ctx=config.max_position_embeddings, norm_eps=eps,
        final_norm="rmsnorm" if family == "llama" else "layernorm",
        pos_embedding="learned" if positions else "none", tie_embeddings=bool(config.tie_word_embeddings),
        blocks={"hf_decoder": {"family": family, "config": _layer_fields(config)}},
    ))
    hf_state = hf.state_dict()
    state = {}
    for ours, theirs in (("embed", embed), ("pos_embed", positions), ("final_norm", final_norm), ("head", head)):
        if theirs is not None:
            state.update({f"{ours}.{k[len(theirs) + 1:]}": v
                          for k, v in hf_state.items() if k.startswith(theirs + ".")})
    for i in range(n_layers):
        prefix = f"{layers}.{i}."
        state.update({f"blocks.{i}.layer.{k[len(prefix):]}": v for k, v in hf_state.items() if k.startswith(prefix)})
    missing, unexpected = lm.load_state_dict(state, strict=False)
    # Non-persistent buffers (rotary frequencies, GPT-Neo's causal masks) are rebuilt, not loaded.
    missing = [k for k in missing if not k.startswith("head.") or not config.tie_word_embeddings]
    if missing or unexpected:
        raise ValueError(f"weights do not fit: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return lm
