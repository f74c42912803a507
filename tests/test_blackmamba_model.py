"""BlackMamba: parameter and FLOP counts against instantiated models, and the released checkpoint
layout against an independent forward written here (transformers' MambaMixer plus a per-token MoE)."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from common.errors import DataError
from common.eval.counting import count_lm
from common.models.lm import LanguageModel, LMConfig, load_language_model, save_language_model
from papers.blackmamba.checkpoint import load_released, save_released, state_dict_to_released
from papers.blackmamba.model import SIZES, BlackMambaConfig, build_blackmamba, lm_config

pytestmark = pytest.mark.usefixtures("one_thread")

COUNTED = [
    LMConfig(vocab_size=97, d_model=32, pattern="mamba,moe", repeat=2, final_norm="layernorm"),
    LMConfig(vocab_size=97, d_model=32, pattern="mamba,moe", repeat=1, tie_embeddings=False,
             blocks={"mamba": {"bias": True, "conv_bias": False, "d_state": 8, "expand": 3},
                     "moe": {"n_experts": 4, "top_k": 2, "d_ff": 40, "router_bias": False, "bias": True}}),
    LMConfig(vocab_size=97, d_model=48, pattern="attn,swiglu", repeat=3, blocks={"attn": {"n_heads": 4}}),
    LMConfig(vocab_size=97, d_model=32, pattern="attn,mlp", repeat=2, norm="layernorm", pos_embedding="learned",
             n_ctx=64, blocks={"attn": {"bias": True, "n_heads": 2}, "mlp": {"d_ff": 100}}),
    LMConfig(vocab_size=97, d_model=32, pattern="attn_neo,mlp", repeat=1, final_norm="none"),
]


@pytest.mark.parametrize("cfg", COUNTED, ids=lambda c: c.pattern)
def test_parameter_count_equals_the_instantiated_model(cfg):
    model = LanguageModel(cfg)
    assert count_lm(cfg).params == sum(p.numel() for p in model.parameters())
    # Forward parameters: a token multiplies with top_k of the E experts of every MoE layer.
    idle = sum((b.n_experts - b.top_k) * sum(w[0].numel() for w in (b.w_in, b.w_out, b.b_in, b.b_out) if w is not None)
               for b in model.blocks if hasattr(b, "w_in"))
    assert count_lm(cfg).forward_params == count_lm(cfg).params - idle


@pytest.mark.parametrize("cfg", COUNTED[:3], ids=lambda c: c.pattern)
def test_matmul_flops_equal_torch_flop_counter(cfg):
    """torch's FlopCounterMode counts the matmuls of a real forward; our formula's matmul part must
    agree exactly (the conv, the scan's elementwise terms and CPU attention scores it does not see)."""
    T = 16
    model = LanguageModel(cfg).eval()
    with FlopCounterMode(display=False) as counter:
        model(torch.randint(0, cfg.vocab_size, (1, T)))
    counts = counter.get_flop_counts()["Global"]
    measured = sum(v for op, v in counts.items() if str(op) in ("aten.mm", "aten.addmm"))
    not_matmul = 0
    for name in cfg.layers:
        kw = cfg.blocks.get(name, {})
        if name == "mamba":
            I, S, K = kw.get("expand", 2) * cfg.d_model, kw.get("d_state", 16), kw.get("d_conv", 4)
            not_matmul += 2 * I * K + I * (7 * S + 1)  # conv, discretisation, state update, readout, D
        if name == "attn":
            not_matmul += 4 * cfg.n_ctx * cfg.d_model
    if "mamba" in cfg.layers:  # the scan's readout may run as a batched matmul
        measured += sum(v for op, v in counts.items() if str(op) == "aten.bmm")
        not_matmul -= sum(v for op, v in counts.items() if str(op) == "aten.bmm") / T
    assert measured == pytest.approx((count_lm(cfg).flops_per_token - not_matmul) * T, rel=1e-9)


@pytest.mark.parametrize("size,paper_forward,paper_total", [("340m_1.5b", 342e6, 1.5e9), ("630m_2.8b", 631e6, 2.8e9)])
def test_released_sizes_on_the_meta_device_match_the_paper(size, paper_forward, paper_total):
    with torch.device("meta"):
        model = build_blackmamba(SIZES[size])
    exact = sum(p.numel() for p in model.parameters())
    count = count_lm(lm_config(SIZES[size]))
    assert count.params == exact
    assert abs(count.forward_params / paper_forward - 1) < 0.01
    assert round(exact / 1e8) / 10 == paper_total / 1e9  # "1.5B" and "2.8B", to the paper's precision


# --- checkpoints -------------------------------------------------------------------------------------

TINY = BlackMambaConfig(vocab_size=61, d_model=16, n_layers=4, d_state=4, d_conv=4, n_experts=4, d_ff=24, n_ctx=32)


def released_state_dict(cfg: BlackMambaConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights under the released key names and shapes, written out by hand from the spec."""
    g = torch.Generator().manual_seed(seed)
    H, I, S, K, E, Fw = cfg.d_model, cfg.expand * cfg.d_model, cfg.d_state, cfg.d_conv, cfg.n_experts, cfg.d_ff
    R = math.ceil(H / 16)

    def rnd(*shape, scale=0.3):
        return torch.randn(*shape, generator=g) * scale

    sd = {"embedding.word_embeddings.weight": rnd(cfg.vocab_size, H),
          "decoder.final_layernorm.weight": 1 + rnd(H, scale=0.1), "decoder.final_layernorm.bias": rnd(H, scale=0.1)}
    for i in range(cfg.n_layers):
        p = f"decoder.layers.{i}."
        sd[p + "norm.weight"] = 1 + rnd(H, scale=0.1)
        if i % 2 == 0:
            sd.update({p + "mixer.in_proj.weight": rnd(2 * I, H), p + "mixer.conv1d.weight": rnd(I, 1, K),
                       p + "mixer.conv1d.bias": rnd(I), p + "mixer.x_proj.weight": rnd(R + 2 * S, I),
                       p + "mixer.dt_proj.weight": rnd(I, R), p + "mixer.dt_proj.bias": rnd(I) - 3,
                       p + "mixer.A_log": torch.log(torch.arange(1, S + 1.0)).repeat(I, 1) + rnd(I, S, scale=0.1),
                       p + "mixer.D": 1 + rnd(I, scale=0.1), p + "mixer.out_proj.weight": rnd(H, I)})
        else:
            sd[p + "mixer.router.weight"] = rnd(E, H)
            sd[p + "mixer.router.bias"] = rnd(E)
            for e in range(E):
                sd[f"{p}mixer.local_experts.{e}.linear_fc1.weight"] = rnd(2 * Fw, H)
                sd[f"{p}mixer.local_experts.{e}.linear_fc2.weight"] = rnd(H, Fw)
    return sd


def released_config(cfg: BlackMambaConfig) -> dict:
    return {"num_layers": cfg.n_layers, "hidden_size": cfg.d_model, "state_size": cfg.d_state,
            "conv_dimension": cfg.d_conv, "vocab_size": cfg.vocab_size, "expansion_factor": cfg.expand,
            "mamba_moe_layers": ["r", str(cfg.n_experts)] * (cfg.n_layers // 2), "ffn_hidden_size": cfg.d_ff,
            "bias": False, "add_bias_linear": False, "swiglu": True, "max_sequence_length": cfg.n_ctx}


def write_release(path, cfg=TINY, sd=None):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(released_config(cfg)))
    torch.save({"model": sd if sd is not None else released_state_dict(cfg)}, path / "pytorch_model.bin")
    return path


def reference_forward(sd: dict, cfg: BlackMambaConfig, ids: torch.Tensor, activation) -> torch.Tensor:
    """The released model's eval forward, from the spec: transformers' MambaMixer for the Mamba
    layers, a per-token loop for the sigmoid-gated argmax MoE, RMSNorm and a final LayerNorm."""
    from transformers import MambaConfig
    from transformers.models.mamba.modeling_mamba import MambaMixer

    hf_cfg = MambaConfig(hidden_size=cfg.d_model, state_size=cfg.d_state, conv_kernel=cfg.d_conv,
                         expand=cfg.expand, use_bias=False, use_conv_bias=True, num_hidden_layers=cfg.n_layers)

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + cfg.norm_eps) * w

    x = sd["embedding.word_embeddings.weight"][ids]
    for i in range(cfg.n_layers):
        p = f"decoder.layers.{i}."
        h = rms(x, sd[p + "norm.weight"])
        if i % 2 == 0:
            mixer = MambaMixer(hf_cfg, layer_idx=i)
            mixer.load_state_dict({k[len(p + "mixer."):]: v for k, v in sd.items() if k.startswith(p + "mixer.")})
            with torch.no_grad():
                x = x + mixer(h)
            continue
        out = torch.zeros_like(h)
        for b in range(h.shape[0]):
            for t in range(h.shape[1]):
                logits = sd[p + "mixer.router.weight"] @ h[b, t] + sd[p + "mixer.router.bias"]
                e = int(logits.argmax())
                gate, up = (sd[f"{p}mixer.local_experts.{e}.linear_fc1.weight"] @ h[b, t]).chunk(2)
                y = sd[f"{p}mixer.local_experts.{e}.linear_fc2.weight"] @ (activation(gate) * up)
                out[b, t] = y * torch.sigmoid(logits[e])
        x = x + out
    x = F.layer_norm(x, (cfg.d_model,), sd["decoder.final_layernorm.weight"], sd["decoder.final_layernorm.bias"],
                     eps=cfg.norm_eps)
    return x @ sd["embedding.word_embeddings.weight"].T


@pytest.mark.parametrize("activation", ["silu", "gelu"])
def test_released_layout_loads_and_matches_an_independent_forward(tmp_path, activation):
    sd = released_state_dict(TINY)
    model = load_released(write_release(tmp_path / "release", sd=sd), activation=activation)
    ids = torch.randint(0, TINY.vocab_size, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours = model(ids)
    reference = reference_forward(sd, TINY, ids, F.silu if activation == "silu" else F.gelu)
    torch.testing.assert_close(ours, reference, rtol=1e-4, atol=1e-4)
    assert model.head.weight.data_ptr() == model.embed.weight.data_ptr()


def test_save_load_resave_keeps_logits_identical(tmp_path):
    model = load_released(write_release(tmp_path / "release"))
    ids = torch.randint(0, TINY.vocab_size, (2, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        before = model(ids)
    ours = load_language_model(save_language_model(model, tmp_path / "ours"))
    again = load_released(save_released(ours, TINY, tmp_path / "re-released"))
    with torch.no_grad():
        assert torch.equal(ours(ids), before)
        assert torch.equal(again(ids), before)
    original = released_state_dict(TINY)
    resaved = state_dict_to_released(again)
    assert sorted(resaved) == sorted(original)
    assert all(torch.equal(resaved[k], original[k]) for k in original)


class Payload:
    def __reduce__(self):
        return (print, ("code ran",))


@pytest.mark.parametrize("damage,message", [
    (lambda sd: sd.pop("decoder.layers.1.mixer.router.bias"), "missing 'decoder.layers.1.mixer.router.bias'"),
    (lambda sd: sd.update({"decoder.layers.3.mixer.local_experts.0.linear_fc2.weight": torch.zeros(3, 3)}),
     "decoder.layers.3.mixer.local_experts.0.linear_fc2.weight has shape (3, 3), expected (16, 24)"),
    (lambda sd: sd.update({"decoder.extra.weight": torch.zeros(1)}),
     "unexpected keys for this config: decoder.extra.weight"),
])
def test_damaged_checkpoints_are_reported_in_one_line(tmp_path, damage, message):
    sd = released_state_dict(TINY)
    damage(sd)
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        load_released(write_release(tmp_path / "bad", sd=sd))
    assert "\n" not in str(err.value)


def test_a_pickle_that_holds_code_is_refused(tmp_path, capsys):
    path = write_release(tmp_path / "evil")
    torch.save({"model": released_state_dict(TINY), "extra": Payload()}, path / "pytorch_model.bin")
    with pytest.raises(DataError, match="refused"):
        load_released(path)
    assert "code ran" not in capsys.readouterr().out


def test_released_config_with_another_layout_is_rejected(tmp_path):
    path = write_release(tmp_path / "rel")
    raw = released_config(TINY)
    raw["mamba_moe_layers"] = ["r", "r", "8", "8"]
    (path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(DataError, match="must alternate 'r' and one expert count"):
        load_released(path)


def test_recurrent_generation_equals_full_recomputation():
    """BlackMamba generates with Mamba's recurrent state and stateless MoE steps; recomputing the
    whole prefix for every token must pick the same tokens."""
    torch.manual_seed(0)
    model = build_blackmamba(TINY).eval()
    prompt = torch.randint(0, TINY.vocab_size, (2, 5), generator=torch.Generator().manual_seed(3))
    cached = model.generate(prompt, max_new_tokens=12, use_cache=True)
    recomputed = model.generate(prompt, max_new_tokens=12, use_cache=False)
    assert torch.equal(cached, recomputed)
    sampled = [model.generate(prompt, max_new_tokens=12, use_cache=c, do_sample=True, top_k=5, seed=7)
               for c in (True, False)]
    assert torch.equal(*sampled)
