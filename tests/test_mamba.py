"""Mamba-1 block: equivalence with transformers, chunked scan vs the reference loop, recurrent
generation, causality and the three checkpoint key layouts."""

from __future__ import annotations

import logging
import math

import pytest
import torch
from transformers import MambaConfig, MambaForCausalLM
from transformers.models.mamba.modeling_mamba import MambaMixer

from common.blocks.mamba import Mamba, chunked_scan, mamba_mixer_state_dict, reference_scan
from common.blocks.registry import build_block
from common.models.mamba import convert_mamba_ssm_state_dict, mamba_language_model, mamba_lm_from_hf
from tests.conftest import position_gradient


def small_mamba(dtype=torch.float64, seed=0, **kwargs) -> Mamba:
    """A tiny block with weights far from the init: varied time scales and decays, so that the scan
    is exercised with strong and weak forgetting alike."""
    torch.manual_seed(seed)
    kwargs = {"d_model": 12, "d_state": 6, "expand": 2, "chunk_size": 8} | kwargs
    block = Mamba(**kwargs).to(dtype)
    with torch.no_grad():
        block.dt_proj.bias.uniform_(-5.0, 1.5)  # softplus -> dt from ~0.007 to ~1.7
        block.A_log.uniform_(-1.0, 2.5)
        block.D.normal_()
        block.conv1d.bias.normal_(std=0.3)
    return block


def hf_model(seed=0) -> MambaForCausalLM:
    torch.manual_seed(seed)
    cfg = MambaConfig(vocab_size=100, hidden_size=64, state_size=16, num_hidden_layers=2, use_mambapy=False)
    return MambaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def hf_and_ids():
    model = hf_model()
    ids = torch.randint(0, 100, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(ids).logits
    return model, ids, logits


# -- equivalence with transformers ------------------------------------------------------------


def test_logits_match_transformers_slow_path(hf_and_ids, tmp_path):
    hf, ids, expected = hf_and_ids
    hf.save_pretrained(tmp_path)
    ours = mamba_lm_from_hf(tmp_path).eval()
    assert isinstance(ours.blocks[0], Mamba)
    with torch.no_grad():
        got = ours(ids)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)
    # a broken load (one mixer weight perturbed) must be caught by the same comparison
    with torch.no_grad():
        ours.blocks[1].A_log.add_(0.05)
        assert (ours(ids) - expected).abs().max() > 1e-3


def test_cached_decode_matches_transformers_generate(hf_and_ids):
    hf, ids, _ = hf_and_ids
    prompt = ids[:1, :3]  # shorter than d_conv
    out = hf.generate(prompt, max_new_tokens=6, do_sample=False, output_logits=True,
                      return_dict_in_generate=True, pad_token_id=0)
    ours = mamba_lm_from_hf(hf).eval()
    caches = ours.allocate_cache(1, 64)
    with torch.no_grad():
        logits = ours(prompt, caches)[:, -1]
        for i, hf_logits in enumerate(out.logits):
            torch.testing.assert_close(logits, hf_logits, atol=1e-4, rtol=0)
            next_token = out.sequences[:, prompt.shape[1] + i: prompt.shape[1] + i + 1]
            assert int(logits.argmax(-1)) == int(next_token)
            logits = ours(next_token, caches)[:, -1]


def test_parameter_names_and_shapes_match_hf_mixer():
    cfg = MambaConfig(hidden_size=48, state_size=8, conv_kernel=4, expand=2, num_hidden_layers=1)
    hf = {k: tuple(v.shape) for k, v in MambaMixer(cfg, layer_idx=0).state_dict().items()}
    ours = {k: tuple(v.shape) for k, v in Mamba(48, d_state=8, d_conv=4, expand=2).state_dict().items()}
    assert ours == hf


def test_init_follows_mamba():
    block = Mamba(32, d_state=16, dt_min=0.001, dt_max=0.1)
    torch.testing.assert_close(-torch.exp(block.A_log), -torch.arange(1.0, 17.0).expand(64, 16))
    dt = torch.nn.functional.softplus(block.dt_proj.bias)
    assert dt.min() >= 0.001 * (1 - 1e-4) and dt.max() <= 0.1 * (1 + 1e-4)
    assert block.dt_rank == math.ceil(32 / 16) and block.x_proj.weight.shape == (2 + 32, 64)


# -- chunked scan vs reference ------------------------------------------------------------------


@pytest.mark.parametrize("T", [1, 8, 21])  # length 1, a multiple of the chunk (8), and not a multiple
def test_chunked_matches_reference_outputs_and_gradients(T):
    ref = small_mamba(scan="reference")
    fast = small_mamba(scan="chunked")
    fast.load_state_dict(ref.state_dict())
    x = torch.randn(3, T, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(T))
    grad_out = torch.randn(3, T, 12, dtype=torch.float64)
    results = []
    for block in (ref, fast):
        xi = x.clone().requires_grad_()
        out = block(xi)
        out.backward(grad_out)
        results.append((out, xi.grad, {n: p.grad for n, p in block.named_parameters()}))
    (out_r, gx_r, gp_r), (out_c, gx_c, gp_c) = results
    torch.testing.assert_close(out_c, out_r, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(gx_c, gx_r, atol=1e-12, rtol=1e-10)
    assert gp_r.keys() == gp_c.keys() and len(gp_r) == 9
    for name in gp_r:
        torch.testing.assert_close(gp_c[name], gp_r[name], atol=1e-11, rtol=1e-9, msg=name)


def test_chunked_scan_with_initial_state_fp32():
    """The scan function itself, fp32, with a given start state and a gradient on the last state."""
    g = torch.Generator().manual_seed(0)
    T, B, I, S = 45, 2, 10, 5
    u, Bm, Cm = torch.randn(T, B, I, generator=g), torch.randn(T, B, S, generator=g), torch.randn(T, B, S, generator=g)
    dt = torch.rand(T, B, I, generator=g) * 2
    A = -torch.rand(I, S, generator=g) * 8
    h0 = torch.randn(B, I, S, generator=g)
    inputs = [t.clone().requires_grad_() for t in (u, dt, A, Bm, Cm, h0)]
    y_r, h_r = reference_scan(*inputs)
    (y_r.sin().sum() + h_r.cos().sum()).backward()
    grads_r = [t.grad for t in inputs]
    inputs = [t.clone().requires_grad_() for t in (u, dt, A, Bm, Cm, h0)]
    y_c, h_c = chunked_scan(*inputs, chunk=16)
    (y_c.sin().sum() + h_c.cos().sum()).backward()
    torch.testing.assert_close(y_c, y_r, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(h_c, h_r, atol=1e-5, rtol=1e-5)
    for name, got, want in zip("u dt A B C h0".split(), [t.grad for t in inputs], grads_r):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, msg=name)


def test_chunked_scan_survives_extreme_decay():
    """dt * A far below -88 (fp32's exp underflow) over a chunk: no overflow, no NaN."""
    T, B, I, S = 40, 1, 4, 3
    u, Bm, Cm = torch.randn(T, B, I), torch.randn(T, B, S), torch.randn(T, B, S)
    dt = torch.full((T, B, I), 30.0)
    A = -torch.full((I, S), 50.0)
    y_c, h_c = chunked_scan(u, dt, A, Bm, Cm, chunk=32)
    y_r, h_r = reference_scan(u, dt, A, Bm, Cm)
    assert torch.isfinite(y_c).all()
    torch.testing.assert_close(y_c, y_r)


# -- recurrent generation -----------------------------------------------------------------------


@pytest.mark.parametrize("prompt_len", [1, 3, 11])  # 1 and 3 are shorter than d_conv = 4
def test_prefill_then_step_matches_full_forward(prompt_len):
    block = small_mamba(dtype=torch.float32, scan="chunked").eval()
    x = torch.randn(2, 16, 12, generator=torch.Generator().manual_seed(prompt_len))
    with torch.no_grad():
        full = block(x)
        cache = block.allocate_cache(2, 16, x.device, x.dtype)
        outs = [block(x[:, :prompt_len], cache)]
        outs += [block.step(x[:, t:t + 1], cache) for t in range(prompt_len, 16)]
    torch.testing.assert_close(torch.cat(outs, dim=1), full, atol=1e-5, rtol=0)
    assert cache.seqlen == 16


def test_chunked_prefill_continues_a_cache():
    """forward(x, cache) on a cache that already holds a prefix continues from it."""
    block = small_mamba(dtype=torch.float64, scan="chunked").eval()
    x = torch.randn(2, 30, 12, dtype=torch.float64)
    with torch.no_grad():
        full = block(x)
        cache = block.allocate_cache(2, 30)
        parts = [block(x[:, :2], cache), block(x[:, 2:19], cache), block.step(x[:, 19:20], cache),
                 block(x[:, 20:], cache)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-12, rtol=0)


def test_cache_is_constant_size():
    block = Mamba(16, d_state=8, d_conv=4, expand=2)
    small, large = block.allocate_cache(3, 10), block.allocate_cache(3, 100_000)
    assert small.conv_state.shape == large.conv_state.shape == (3, 32, 4)
    assert small.ssm_state.shape == large.ssm_state.shape == (3, 32, 8)
    assert small.ssm_state.dtype == torch.float32


def test_lm_step_matches_forward():
    model = mamba_language_model(50, 16, 2, d_state=4, chunk_size=4).eval()
    ids = torch.randint(0, 50, (2, 12))
    with torch.no_grad():
        full = model(ids)
        caches = model.allocate_cache(2, 12)
        got = [model(ids[:, :5], caches)] + [model(ids[:, t:t + 1], caches) for t in range(5, 12)]
    torch.testing.assert_close(torch.cat(got, dim=1), full, atol=1e-5, rtol=0)


# -- causality, registry, backends ------------------------------------------------------------


@pytest.mark.parametrize("scan", ["chunked", "reference"])
def test_causal(scan):
    block = small_mamba(scan=scan)
    x = torch.randn(2, 19, 12, dtype=torch.float64, requires_grad=True)
    out = block(x)
    for t in (0, 7, 8, 17):
        grad = position_gradient(out, x, t)
        assert torch.all(grad[:, t + 1:] == 0), f"output {t} depends on later inputs"
        assert grad[:, t].abs().sum() > 1e-8 and grad[:, : t + 1].abs().sum() > 1e-8


def test_mamba_ssm_without_causal_conv1d_counts_as_no_kernels(monkeypatch):
    """mamba-ssm imports without causal-conv1d, but its `mamba_inner_fn` then fails an assertion at
    the first step; the block must fall back to our scan instead (a stand-in module plays mamba-ssm)."""
    import sys
    import types

    import common.blocks.mamba as mamba_module

    ops = types.ModuleType("mamba_ssm.ops.selective_scan_interface")
    ops.selective_scan_fn, ops.mamba_inner_fn = object(), object()
    package, subpackage = types.ModuleType("mamba_ssm"), types.ModuleType("mamba_ssm.ops")
    subpackage.selective_scan_interface = ops
    for name, module in [("mamba_ssm", package), ("mamba_ssm.ops", subpackage), (ops.__name__, ops)]:
        monkeypatch.setitem(sys.modules, name, module)
    mamba_module._mamba_ssm_ops.cache_clear()
    try:
        ops.causal_conv1d_fwd_function = None  # what mamba-ssm sets when causal_conv1d does not import
        assert mamba_module._mamba_ssm_ops() is None
        mamba_module._mamba_ssm_ops.cache_clear()
        ops.causal_conv1d_fwd_function = object()
        assert mamba_module._mamba_ssm_ops() == (ops.selective_scan_fn, ops.mamba_inner_fn)
    finally:
        mamba_module._mamba_ssm_ops.cache_clear()


def test_registry_and_backend_choice(caplog):
    block = build_block("mamba", 16, layer_idx=3, shared={"n_ctx": 64})  # a shared setting it does not declare
    assert isinstance(block, Mamba) and block.layer_idx == 3 and block.d_inner == 32
    assert block._backend(torch.zeros(1, 2, 16), None) == "chunked"  # auto on CPU
    with pytest.raises(RuntimeError, match="mamba_ssm"):
        Mamba(16, scan="cuda")(torch.zeros(1, 2, 16))
    with pytest.raises(ValueError, match="scan"):
        Mamba(16, scan="fast")
    import common.blocks.registry as registry

    registry._kernels_announced.discard(("mamba scan", "chunked"))
    with caplog.at_level(logging.INFO, logger="common.blocks"):
        block(torch.zeros(1, 2, 16))
        block(torch.zeros(1, 2, 16))
    assert [r.getMessage() for r in caplog.records].count("kernel: mamba scan: chunked") == 1


# -- state dicts and key layouts --------------------------------------------------------------


def test_state_dict_round_trip():
    a, b = small_mamba(seed=0), small_mamba(seed=1)
    x = torch.randn(2, 9, 12, dtype=torch.float64)
    assert not torch.allclose(a(x), b(x))
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(b(x), a(x), atol=0, rtol=0)


def test_mamba_ssm_and_blackmamba_layouts(hf_and_ids):
    hf, ids, expected = hf_and_ids
    hf_sd = hf.state_dict()
    # mamba-ssm MambaLMHeadModel: "embedding" (singular) instead of transformers' "embeddings"
    ssm_sd = {k.replace("backbone.embeddings.", "backbone.embedding."): v.clone() for k, v in hf_sd.items()}
    assert "backbone.embedding.weight" in ssm_sd and "backbone.layers.1.mixer.A_log" in ssm_sd
    model = mamba_language_model(100, 64, 2).eval()
    model.load_state_dict(convert_mamba_ssm_state_dict(ssm_sd))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), expected, atol=1e-4, rtol=0)
    with pytest.raises(ValueError, match="unexpected keys.*backbone.layers.0.extra"):
        convert_mamba_ssm_state_dict(ssm_sd | {"backbone.layers.0.extra": torch.zeros(1)})
    with pytest.raises(ValueError, match="backbone.embedding.weight"):
        convert_mamba_ssm_state_dict(hf_sd)  # transformers' layout is not mamba-ssm's

    # BlackMamba: Megatron-style names around the same mixer, decoder.layers.{i}.mixer.*
    black_sd = {"embedding.word_embeddings.weight": hf_sd["backbone.embeddings.weight"]}
    for k, v in hf_sd.items():
        if k.startswith("backbone.layers."):
            black_sd["decoder.layers." + k[len("backbone.layers."):]] = v.clone()
    model = mamba_language_model(100, 64, 2).eval()
    model.embed.weight.data.copy_(black_sd["embedding.word_embeddings.weight"])
    model.final_norm.weight.data.copy_(hf_sd["backbone.norm_f.weight"])
    for i, (norm, block) in enumerate(zip(model.norms, model.blocks)):
        block.load_state_dict(mamba_mixer_state_dict(black_sd, f"decoder.layers.{i}.mixer"))
        norm.weight.data.copy_(black_sd[f"decoder.layers.{i}.norm.weight"])
    with torch.no_grad():
        torch.testing.assert_close(model(ids), expected, atol=1e-4, rtol=0)


def test_mixer_state_dict_errors():
    sd = {f"decoder.layers.0.mixer.{k}": v for k, v in Mamba(16).state_dict().items()}
    assert set(mamba_mixer_state_dict(sd, "decoder.layers.0.mixer.")) == set(Mamba(16).state_dict())
    with pytest.raises(ValueError, match="no tensors"):
        mamba_mixer_state_dict(sd, "backbone.layers.0.mixer")
    missing = {k: v for k, v in sd.items() if not k.endswith("dt_proj.bias")}
    with pytest.raises(ValueError, match="dt_proj.bias"):
        mamba_mixer_state_dict(missing, "decoder.layers.0.mixer")
    bad = dict(sd)
    bad["decoder.layers.0.mixer.x_proj.weight"] = torch.zeros(7, 32)
    with pytest.raises(ValueError, match="x_proj.weight: expected shape"):
        mamba_mixer_state_dict(bad, "decoder.layers.0.mixer")
    moe = {"decoder.layers.1.mixer.router.weight": torch.zeros(8, 16)}
    with pytest.raises(ValueError, match="not a Mamba mixer"):
        mamba_mixer_state_dict(moe, "decoder.layers.1.mixer")
