"""`LanguageModel`: equivalence with Hugging Face Llama, generation, sampling, config checks."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig, LlamaForCausalLM

from common.config import from_dict
from common.errors import ConfigError, DataError
from common.models.hf import lm_state_dict_from_llama
from common.models.lm import LanguageModel, LMConfig, load_language_model, sample_next, save_language_model

V = 97


@pytest.mark.parametrize("tie", [False, True])
def test_matches_llama_with_the_same_weights(tie):
    torch.manual_seed(0)
    hf = LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128,
                                      rms_norm_eps=1e-6, tie_word_embeddings=tie, attn_implementation="eager")).eval()
    ours = LanguageModel(LMConfig(vocab_size=V, d_model=64, pattern="attn,swiglu", repeat=3, n_ctx=128,
                                  tie_embeddings=tie, blocks={"attn": {"n_heads": 4}, "swiglu": {"d_ff": 96}})).eval()
    ours.load_state_dict(lm_state_dict_from_llama(hf.state_dict(), 3))
    ids = torch.randint(0, V, (2, 50))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), hf(ids).logits, rtol=1e-4, atol=1e-4)
        # Cached decoding against Hugging Face's own KV cache, greedy, token for token.
        prompt = ids[:, :10]
        expected = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=12, do_sample=False,
                               pad_token_id=V - 1)
    assert ours.generate(prompt, 12).equal(expected)


PATTERNS = ["attn,swiglu", "attn_neo,mlp"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_cached_generation_equals_recomputation(pattern):
    torch.manual_seed(0)
    model = LanguageModel(LMConfig(vocab_size=V, d_model=32, pattern=pattern, repeat=2, n_ctx=64,
                                   pos_embedding="learned" if "neo" in pattern else "none",
                                   blocks={"attn_neo": {"window": 8}} if "neo" in pattern else {})).eval()
    prompt = torch.randint(0, V, (3, 7))
    assert model.supports_cache
    cached = model.generate(prompt, 20, use_cache=True)
    recomputed = model.generate(prompt, 20, use_cache=False)
    assert cached.equal(recomputed)
    sampled = [model.generate(prompt, 10, do_sample=True, top_k=5, seed=s, use_cache=c)
               for s in (1, 1) for c in (True, False)]
    assert all(s.equal(sampled[0]) for s in sampled)


def test_top_k_and_top_p_keep_the_right_support():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0, -3.0]])
    probs = logits.softmax(-1)[0]
    # Brute force: the smallest prefix of tokens by probability whose mass reaches p.
    for p in (0.3, 0.6, 0.8, 0.95):
        order = probs.argsort(descending=True)
        keep = set()
        mass = 0.0
        for idx in order.tolist():
            keep.add(idx)
            mass += probs[idx].item()
            if mass >= p:
                break
        g = torch.Generator().manual_seed(0)
        drawn = {int(sample_next(logits, True, 1.0, None, p, g)) for _ in range(300)}
        assert drawn == keep, (p, drawn, keep)
    g = torch.Generator().manual_seed(0)
    assert {int(sample_next(logits, True, 1.0, 2, None, g)) for _ in range(200)} == {0, 1}
    assert int(sample_next(logits, False, 1.0, None, None, None)) == 0


def test_config_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"^lm.pattern: unknown block 'mambo'; registered: "):
        from_dict(LMConfig, {"pattern": "attn,mambo"}, "lm")
    with pytest.raises(ConfigError, match=r"^lm.blocks.moe: not in the pattern"):
        from_dict(LMConfig, {"pattern": "attn,swiglu", "blocks": {"moe": {}}}, "lm")


def test_learned_positions_refuse_overlong_input():
    model = LanguageModel(LMConfig(vocab_size=V, d_model=16, pattern="attn_neo,mlp", n_ctx=8, pos_embedding="learned"))
    with pytest.raises(ValueError, match="beyond n_ctx=8"):
        model(torch.zeros(1, 9, dtype=torch.long))


@pytest.mark.parametrize("norm, leaks", [("layernorm_two_stream", False), ("layernorm", True)])
def test_bidirectional_mixer_model_hides_the_next_token(norm, leaks):
    """Logits at t (which predict token t + 1) must not depend on the input at t + 1. With per-stream
    norms they do not; a plain norm over both streams mixes them and leaks."""
    torch.manual_seed(0)
    model = LanguageModel(LMConfig(vocab_size=V, d_model=16, pattern="mixer_bidirectional,mlp_two_stream", repeat=2,
                                   n_ctx=12, norm=norm, final_norm="layernorm")).double()
    captured = {}
    model.embed.register_forward_hook(lambda module, inputs, out: captured.setdefault("x", out))
    logits = model(torch.randint(0, V, (1, 12)))
    x = captured["x"]
    worst = 0.0
    for t in range(11):
        (grad,) = torch.autograd.grad(logits[0, t].sum(), x, retain_graph=True)
        worst = max(worst, grad[0, t + 1].abs().max().item())
    assert (worst > 1e-6) if leaks else (worst == 0.0)


def test_mixer_generation_equals_the_papers_fixed_window_method():
    """The paper fills a fixed n_ctx window: the prompt, then arbitrary tokens; it repeatedly runs the
    whole window, takes the argmax at the last filled position and writes it into the next slot.
    `generate` instead runs the growing prefix; causality makes the two identical."""
    torch.manual_seed(0)
    n_ctx, prompt_len, new = 24, 5, 12
    model = LanguageModel(LMConfig(vocab_size=V, d_model=16, pattern="mixer,mlp", repeat=2, n_ctx=n_ctx,
                                   norm="layernorm", final_norm="none")).eval()
    prompt = torch.randint(0, V, (2, prompt_len))
    assert not model.supports_cache
    window = torch.randint(0, V, (2, n_ctx))  # junk beyond the prompt: the mask hides it
    window[:, :prompt_len] = prompt
    with torch.no_grad():
        for pos in range(prompt_len, prompt_len + new):
            window[:, pos] = model(window)[:, pos - 1].argmax(-1)
    assert model.generate(prompt, new).equal(window[:, : prompt_len + new])


def test_save_and_load_language_model_round_trip(tmp_path):
    cfg = LMConfig(vocab_size=50, d_model=16, pattern="attn,swiglu", repeat=2, tie_embeddings=False,
                   blocks={"attn": {"n_heads": 2}})
    model = LanguageModel(cfg).eval()
    ids = torch.randint(0, 50, (2, 7))
    loaded = load_language_model(save_language_model(model, tmp_path / "m"))
    assert loaded.cfg == cfg
    assert torch.equal(loaded(ids), model(ids))
    state = load_file(str(tmp_path / "m" / "model.safetensors"))
    state["blocks.1.up_proj.weight"] = torch.zeros(3, 3)
    save_file(state, str(tmp_path / "m" / "model.safetensors"))
    with pytest.raises(DataError, match=r"model.safetensors: corrupted \(content hash differs"):
        load_language_model(tmp_path / "m")
    (tmp_path / "m" / "manifest.json").unlink()  # a directory saved before manifests: the shapes still decide
    with pytest.raises(DataError, match=r"blocks.1.up_proj.weight has shape \(3, 3\)"):
        load_language_model(tmp_path / "m")


def test_a_saved_model_lists_the_sha256_of_its_files(tmp_path):
    directory = save_language_model(LanguageModel(LMConfig(vocab_size=8, d_model=8, pattern="swiglu")), tmp_path / "m")
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["files"] == {name: hashlib.sha256((directory / name).read_bytes()).hexdigest()
                                 for name in ("config.json", "model.safetensors")}


def test_standard_init_is_normal_for_linear_layers_and_keeps_mamba_its_own():
    torch.manual_seed(0)
    cfg = LMConfig(vocab_size=50, d_model=256, pattern="attn,moe,mamba", repeat=1, blocks={"attn": {"n_heads": 4}})
    model = LanguageModel(cfg)
    attn, moe, mamba = model.blocks
    for weight in (attn.q_proj.weight, attn.o_proj.weight, moe.w_in, moe.router.weight):
        assert abs(weight.std().item() - 0.02) < 0.002 and abs(weight.mean().item()) < 0.002
    assert torch.equal(mamba.A_log[0].exp().round(), torch.arange(1, 17.0))  # S4D-real A = -(1..S)
    bound = 256 ** -0.5  # PyTorch's default Linear init, which Mamba keeps
    assert mamba.in_proj.weight.abs().max() <= bound and mamba.in_proj.weight.std() > 0.5 * bound / 3 ** 0.5
    default = LanguageModel(replace(cfg, init="pytorch"))
    assert default.blocks[0].q_proj.weight.abs().max() <= bound and default.blocks[0].q_proj.weight.std() > 0.03
