"""Masked Mixers models: every architecture in the paper's params builds and runs; causal ones never
see the future; bidirectional ones never see the token they predict; the transfixer computes what
its placement says; the fixed-window generation equals recomputing generation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from common.blocks.transfixer import Transfixer
from common.config import stage_config
from common.errors import ConfigError
from common.models.lm import LanguageModel
from papers.masked_mixers.models import (
    Autoencoder,
    BidirectionalTransformer,
    ModelsConfig,
    build_model,
    generate_fixed_window,
    hidden_states,
)
from tests.conftest import ROOT, position_gradient

pytestmark = pytest.mark.usefixtures("one_thread")
PARAMS = ROOT / "papers" / "masked_mixers" / "params.yaml"
V, T = 50, 12


def sizes(**overrides) -> ModelsConfig:
    raw = yaml.safe_load(PARAMS.read_text())
    raw["models"]["smoke"] = {**raw["models"]["smoke"], "n_ctx": T, **overrides}
    return stage_config(raw, "models", ModelsConfig, "smoke")


ARCHS = sorted(sizes().archs)
CAUSAL = [n for n in ARCHS if sizes().archs[n].kind == "lm" and "bidirectional" not in n]
BIDIRECTIONAL = ["mixer_bidirectional", "transformer_bidirectional"]


def build(name: str, seed: int = 0):
    torch.manual_seed(seed)
    s = sizes()
    return build_model(s.spec(name), s, V).double().eval()


def test_every_profile_validates_and_lists_the_paper_models():
    raw = yaml.safe_load(PARAMS.read_text())
    for profile in ("smoke", "tiny", "paper"):
        stage_config(raw, "models", ModelsConfig, profile)
    for name in ("mixer_flat", "mixer_expanded", "mixer_k4", "mixer_heads2_k4", "mixer_parallel2", "llama_h4", "gpt",
                 "transfixer_series", "transfixer_before", "transfixer_parallel", "mixer_autoencoder",
                 "transformer_autoencoder", "mixer_bidirectional", "transformer_bidirectional"):
        assert name in ARCHS


@pytest.mark.parametrize("name", ARCHS)
def test_builds_runs_and_trains(name):
    torch.manual_seed(0)
    model = build(name).train()
    ids = torch.randint(0, V, (2, T))
    logits = model(ids)
    assert logits.shape == (2, T, V) and torch.isfinite(logits).all()
    logits.sum().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad), "a parameter gets no gradient"
    # and a few Adam steps fit a fixed batch (each position's own token, which every family can see)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        loss = torch.nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


@pytest.mark.parametrize("name", CAUSAL)
def test_causal_models_never_see_the_future(name):
    """d hidden_t / d embedding_s == 0 for s > t, through the whole model (gradient oracle)."""
    model = build(name)
    x = torch.randn(2, T, model.cfg.d_model, dtype=torch.double, requires_grad=True)
    h = hidden_states(model, x)
    for t in range(T - 1):
        grad = position_gradient(h, x, t)
        assert grad[:, t + 1:].abs().max() == 0, f"{name}: position {t} reads the future"
        assert grad[:, : t + 1].abs().sum(-1).min() > 1e-8, f"{name}: position {t} ignores an earlier token"


@pytest.mark.parametrize("name", BIDIRECTIONAL)
def test_bidirectional_models_never_see_the_token_they_predict(name):
    """Changing token t + 1 leaves the logits at t (which predict it) exactly unchanged; changing
    token t + 2 or t changes them. Oracle: the model itself on perturbed inputs."""
    model = build(name)
    torch.manual_seed(1)
    ids = torch.randint(0, V, (1, T))
    base = model(ids)
    for t in range(T - 1):
        changed = ids.clone()
        changed[0, t + 1] = (changed[0, t + 1] + 1) % V
        assert torch.equal(model(changed)[0, t], base[0, t]), f"{name}: position {t} sees token {t + 1}"
        for s in (t, t + 2):
            if s < T:
                other = ids.clone()
                other[0, s] = (other[0, s] + 1) % V
                assert not torch.allclose(model(other)[0, t], base[0, t]), f"{name}: position {t} ignores token {s}"


def test_autoencoder_decoder_sees_only_the_last_token_vector():
    """Two inputs that differ only in a token whose two ids share one embedding vector have the same
    code, hence the same reconstruction; changing another token changes the reconstruction."""
    model = build("mixer_autoencoder")
    assert isinstance(model, Autoencoder)
    ids = torch.randint(1, V, (1, T))
    other = ids.clone()
    other[0, 0] = 0
    with torch.no_grad():
        model.encoder.embed.weight[0] = model.encoder.embed.weight[ids[0, 0]]
    torch.testing.assert_close(model.encode(ids), model.encode(other), rtol=0, atol=0)
    torch.testing.assert_close(model(ids), model(other), rtol=0, atol=0)
    # And the reconstruction depends on the input through that vector.
    changed = ids.clone()
    changed[0, T // 2] = (changed[0, T // 2] + 1) % V
    assert not torch.allclose(model(changed), model(ids))


def reference_mix(block, x):
    """The flat masked mixer computed here: tril(W) over positions, plus the bias."""
    w = block.conv.weight[:, :, 0]
    n = x.shape[1]
    keep = torch.tensor([[1.0 if s <= t else 0.0 for s in range(n)] for t in range(n)], dtype=x.dtype)
    return torch.einsum("ts,bsd->btd", (w[:n, :n] * keep), x) + block.conv.bias[:n, None]


@pytest.mark.parametrize("placement", ["series", "before", "parallel"])
def test_transfixer_placements(placement):
    torch.manual_seed(0)
    block = Transfixer(16, n_ctx=T, n_heads=4, placement=placement).double()
    x = torch.randn(2, T, 16, dtype=torch.double)
    attn = block.attn
    expected = {
        "series": lambda: attn(x) + reference_mix(block.mixer, attn(x)),
        "before": lambda: attn(x + reference_mix(block.mixer, x)),
        "parallel": lambda: attn(x) + reference_mix(block.mixer, x),
    }[placement]()
    torch.testing.assert_close(block(x), expected)
    with pytest.raises(ValueError, match="placement"):
        Transfixer(16, n_ctx=T, placement="inside")


def test_fixed_window_generation_equals_recomputing_generation():
    """The paper's window method (pad to n_ctx, write the argmax in place) against
    `LanguageModel.generate` recomputing the growing prefix: the same greedy tokens."""
    model = build("mixer_flat")
    assert isinstance(model, LanguageModel) and not model.supports_cache
    prompt = torch.randint(0, V, (3, 4))
    ours = generate_fixed_window(model, prompt, T - 4)
    assert torch.equal(ours, model.generate(prompt, T - 4, use_cache=False))
    with pytest.raises(ValueError, match="exceed the window"):
        generate_fixed_window(model, prompt, T)


def test_bidirectional_transformer_pairs_forward_t_with_reverse_t_plus_2():
    model = build("transformer_bidirectional")
    assert isinstance(model, BidirectionalTransformer)
    ids = torch.randint(0, V, (1, T))
    x = model.forward_lm.embed(ids)
    fwd = hidden_states(model.forward_lm, x, final_norm=True)
    rev = hidden_states(model.reverse_lm, x.flip(1), final_norm=True).flip(1)
    t = 3
    torch.testing.assert_close(model(ids)[0, t], model.head(fwd[0, t] + rev[0, t + 2]))
    torch.testing.assert_close(model(ids)[0, T - 1], model.head(fwd[0, T - 1]))


def test_unknown_architecture_is_one_clear_error():
    with pytest.raises(ConfigError, match="no architecture 'nope'"):
        sizes().spec("nope")
    raw = yaml.safe_load(PARAMS.read_text())
    raw["models"]["smoke"]["archs"] = {"bad": {"pattern": "mixer,nope"}}
    with pytest.raises(ConfigError, match="archs.bad"):
        stage_config(raw, "models", ModelsConfig, "smoke")


def test_bad_params_exit_2_with_one_line(smoke_data, tmp_path, monkeypatch, capsys):
    from papers.masked_mixers import compare

    raw = yaml.safe_load(PARAMS.read_text())
    raw["clm"]["smoke"]["models"] = ["mixer_flat", "nope"]
    params = tmp_path / "masked_mixers.yaml"
    params.write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text("profile: smoke\n")  # the root params: only the profile
    with pytest.raises(SystemExit) as exit_info:
        compare.main(["--params", str(params), "--data", "d", "--tokenizer", str(smoke_data["tokenizer"]),
                      "--run-dir", "r", "--results", "x", "--section", "clm"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope" in err[0]


@pytest.mark.parametrize("name", CAUSAL + ["mixer_bidirectional"])
def test_hidden_states_are_what_the_model_feeds_its_head(name):
    """`hidden_states` re-runs `LanguageModel`'s block loop from embeddings: with `final_norm` it must
    be exactly what the model's forward hands its head, and without it what the forward hands its
    final norm (both caught by hooks on the forward itself)."""
    model = build(name)
    ids = torch.randint(0, V, (2, T))
    fed = {}
    hooks = [module.register_forward_hook(lambda m, args, out, key=key: fed.__setitem__(key, args[0]))
             for key, module in (("head", model.head), ("final_norm", model.final_norm)) if module is not None]
    model(ids)
    for hook in hooks:
        hook.remove()
    torch.testing.assert_close(hidden_states(model, model.embed(ids), final_norm=True), fed["head"], rtol=0, atol=0)
    if "final_norm" in fed:
        torch.testing.assert_close(hidden_states(model, model.embed(ids), final_norm=False), fed["final_norm"],
                                   rtol=0, atol=0)


@pytest.mark.parametrize(("module", "section", "params", "message"), [
    ("variants", "mixer_variants", {"models": ["mixer_k4"], "baseline": "mixer_k4"}, "mixer_k4 is the baseline"),
    ("variants", "mixer_variants", {"models": ["mixer_k4"], "baseline": "llama_h8"},
     "llama_h8 is not trained by the clm section"),
    ("variants", "mixer_variants", {"models": ["mixer_autoencoder"]}, "mixer_autoencoder has kind 'autoencoder'"),
    ("variants", "mixer_variants", {"models": ["mixer_k5"]}, "no architecture 'mixer_k5'"),
    ("variants", "mixer_variants", {"models": ["mixer_k4"], "extra_seeds": {"mixer_flat": [3]}},
     "extra_seeds.mixer_flat: not a model of this section"),
    ("variants", "mixer_variants", {"models": ["mixer_k4"], "extra_seeds": {"mixer_k4": [3, 3]}},
     "extra_seeds.mixer_k4: give at least 1, each once"),
    ("train_test_gap", "train_test_gap", {"models": ["mixer_k4"]}, "mixer_k4 is not trained by the clm section"),
    ("train_test_gap", "train_test_gap", {"train_rows": 8, "eval_rows": 16},
     "eval_rows: 16 is more than the 8 training stories"),
    ("train_test_gap", "train_test_gap", {"train_rows": 0}, "train_rows"),
    ("one_step", "one_step", {"models": ["mixer_k4"]}, "mixer_k4 is not trained by the clm section"),
    ("context_length", "context_length", {"models": ["mixer_flat"]}, "models: list two or more"),
    ("context_length", "context_length", {"models": ["mixer_flat", "mixer_k4"]},
     "mixer_k4 is not trained by the clm section"),
    ("context_length", "context_length", {"n_ctx": 24},
     "n_ctx: 24 must be shorter than models.n_ctx = 32 and divide it"),
    ("context_length", "context_length", {"n_ctx": 32}, "n_ctx: 32 must be shorter than models.n_ctx = 32"),
])
def test_bad_params_of_the_clm_recipe_stages_exit_2_with_one_line(module, section, params, message, tmp_path,
                                                                    monkeypatch, capsys):
    """The stages that train with the clm section's recipe refuse a bad section before writing anything."""
    import importlib

    raw = yaml.safe_load(PARAMS.read_text())
    raw[section]["smoke"] = params
    params_file = tmp_path / "masked_mixers.yaml"
    params_file.write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text("profile: smoke\n")
    with pytest.raises(SystemExit) as exit_info:
        importlib.import_module(f"papers.masked_mixers.{module}").main(
            ["--params", str(params_file), "--data", "d", "--tokenizer", "t", "--run-dir", "r", "--results", "x"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not Path("x").exists() and not Path("r").exists()


def test_a_train_test_gap_subset_larger_than_the_data_exits_2_with_one_line(smoke_data, tmp_path, monkeypatch, capsys):
    from papers.masked_mixers import train_test_gap

    raw = yaml.safe_load(PARAMS.read_text())
    raw["train_test_gap"]["smoke"] = {"train_rows": 10**6}
    params = tmp_path / "masked_mixers.yaml"
    params.write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text("profile: smoke\n")
    with pytest.raises(SystemExit) as exit_info:
        train_test_gap.main(["--params", str(params), "--data", str(smoke_data["tokenized"] / "padded"), "--tokenizer",
                             str(smoke_data["tokenizer"]), "--run-dir", "r", "--results", "x"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train_rows: 1000000, but" in err[0], err
    assert not Path("r/data").exists() and not Path("x").exists()


@pytest.mark.parametrize("name", ["mixer_flat", "llama_h4", "gpt"])
def test_one_step_completion_predicts_the_second_half_from_the_first_alone(name):
    """After the cut no prediction position may know any second-half token, its own included: the
    logits of every second-half position depend on the first half only, and they do depend on it."""
    from papers.masked_mixers.one_step import one_step_model

    torch.manual_seed(0)
    model = one_step_model(sizes().spec(name), sizes(), V).double().eval()
    ids = torch.randint(0, V, (1, T))
    half = T // 2
    logits = model(ids)
    for t in range(T):
        changed = ids.clone()
        changed[0, t] = (ids[0, t] + 1) % V
        moved = (model(changed)[0, half:] - logits[0, half:]).abs().amax().item()
        if t >= half:
            assert moved == 0, f"position {t}'s token reaches the second half's predictions"
        else:
            assert moved > 1e-9, f"position {t}'s token does not reach the second half's predictions"


@pytest.mark.parametrize(("module", "section", "extra"), [
    ("compare", "norms", ["--section", "norms"]), ("compare", "bidirectional", ["--section", "bidirectional"]),
    ("train_test_gap", "train_test_gap", []), ("one_step", "one_step", []), ("context_length", "context_length", []),
])
def test_a_section_with_no_models_trains_nothing_and_writes_its_outputs(module, section, extra, smoke_data, tmp_path,
                                                                         monkeypatch):
    """`models: []` (the `tiny` profile's setting where a stage's runs cannot decide its claims): no
    run, and the results, plot and run directory that DVC expects, with no models in them."""
    import importlib

    raw = yaml.safe_load(PARAMS.read_text())
    raw[section]["smoke"] = {**(raw[section].get("smoke") or {}), "models": []}
    params = tmp_path / "masked_mixers.yaml"
    params.write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text("profile: smoke\n")
    importlib.import_module(f"papers.masked_mixers.{module}").main(
        ["--params", str(params), "--data", str(smoke_data["tokenized"] / "padded"), "--tokenizer",
         str(smoke_data["tokenizer"]), "--run-dir", "r", "--results", "x", *extra])
    results = json.loads(Path(f"x/{section}.json").read_text())
    assert results["models"] == {} and results["profile"] == "smoke"
    assert Path(f"x/{section}_loss.png").stat().st_size > 0
    assert Path("r").is_dir() and not list(Path("r").glob("*/seed*"))


def test_extra_seeds_that_seeds_already_holds_are_trained_once():
    """`-S clm.base.seeds=[0,1,2,3,4]` beside `extra_seeds: {mixer_flat: [3, 4, 5]}`: seeds 0-5 for
    mixer_flat, each once, and 0-4 for the others."""
    from papers.masked_mixers.train import CompareConfig

    cfg = CompareConfig(seeds=[0, 1, 2, 3, 4], models=["mixer_flat", "gpt"], extra_seeds={"mixer_flat": [3, 4, 5]})
    cfg.trainer.max_steps = 5
    cfg.check()
    assert cfg.seeds_of("mixer_flat") == [0, 1, 2, 3, 4, 5] and cfg.seeds_of("gpt") == [0, 1, 2, 3, 4]
