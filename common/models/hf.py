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
