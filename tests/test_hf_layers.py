"""Hugging Face decoder layers as blocks: pretrained GPT-Neo, GPT-NeoX and Llama checkpoints,
saved with `save_pretrained` by the test, load into `LanguageModel` and give the same logits."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    GPTNeoConfig,
    GPTNeoForCausalLM,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
)

from common.models.hf import language_model_from_hf
from common.models.lm import LanguageModel, LMConfig

V = 101
TINY = {
    "gpt_neo": lambda: GPTNeoForCausalLM(GPTNeoConfig(
        vocab_size=V, hidden_size=32, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]],
        window_size=5, max_position_embeddings=64, intermediate_size=64)),
    "gpt_neox": lambda: GPTNeoXForCausalLM(GPTNeoXConfig(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, rotary_pct=0.25)),
    "llama": lambda: LlamaForCausalLM(LlamaConfig(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, max_position_embeddings=64)),
}


@pytest.mark.parametrize("family", sorted(TINY))
def test_saved_checkpoint_loads_with_identical_logits(family, tmp_path):
    torch.manual_seed(0)
    hf = TINY[family]().eval()
    hf.save_pretrained(tmp_path / family)
    ours = language_model_from_hf(tmp_path / family).eval()
    ids = torch.randint(0, V, (2, 20))  # longer than GPT-Neo's local window of 5
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), hf(ids).logits, rtol=1e-5, atol=1e-5)
        expected = hf.generate(ids[:, :6], attention_mask=torch.ones(2, 6, dtype=torch.long), max_new_tokens=8,
                               do_sample=False, pad_token_id=V - 1)
    assert ours.generate(ids[:, :6], 8).equal(expected)  # full recomputation path
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in hf.parameters())


def test_pretrained_layers_mix_with_our_blocks():
    """A hybrid pattern: two Llama-family layers followed by our attention and SwiGLU blocks."""
    model = LanguageModel(LMConfig(vocab_size=V, d_model=32, pattern="hf_decoder,attn,swiglu", n_ctx=64,
                                   blocks={"hf_decoder": {"family": "llama", "config": {
                                       "num_attention_heads": 4, "intermediate_size": 64}}}))
    ids = torch.randint(0, V, (2, 10))
    logits = model(ids)
    assert logits.shape == (2, 10, V) and torch.isfinite(logits).all()
    assert not model.supports_cache  # so generation recomputes the window
    changed = ids.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % V
    torch.testing.assert_close(model(changed)[:, :6], logits[:, :6])  # causal end to end
