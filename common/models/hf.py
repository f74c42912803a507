"""Hugging Face reference models built from small typed specs."""

from __future__ import annotations

from dataclasses import dataclass

from transformers import LlamaConfig, LlamaForCausalLM

from common.config import bounded
from common.errors import ConfigError


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
