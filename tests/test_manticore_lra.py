"""Manticore on LRA: a hybrid's final hidden states, a component programmed out and never called,
the searched classifier's two optimizers, the stage's config errors, and the stage end to end."""

from __future__ import annotations

import json

import lightning as L
import pytest
import torch
import yaml
from torch.utils.data import DataLoader

from common.config import from_dict
from common.errors import ConfigError
from common.models.lm import LanguageModel, LMConfig
from common.training.lra import evaluate_classifier
from common.training.modules import SequenceClassificationModule
from common.training.optim import OptimConfig
from papers.manticore import lra_experiments
from papers.manticore.hybrid import Manticore, ManticoreConfig
from papers.manticore.lra_config import LRAExperimentsConfig
from papers.manticore.lra_experiments import HybridHidden, SearchedClassificationModule, programmed_alphas
from papers.manticore.search import SearchConfig

pytestmark = pytest.mark.usefixtures("one_thread")
V, N_CTX = 20, 16
NEO = {"d_model": 32, "pattern": "attn_neo,mlp", "repeat": 2, "norm": "layernorm", "final_norm": "layernorm",
       "pos_embedding": "learned", "n_ctx": N_CTX, "blocks": {"attn_neo": {"n_heads": 2}, "mlp": {"d_ff": 32}}}
MAMBA = {"d_model": 24, "pattern": "mamba", "repeat": 4, "blocks": {"mamba": {"d_state": 4}}}


def components(n_ctx: int = N_CTX) -> list[LanguageModel]:
    torch.manual_seed(0)
    return [LanguageModel(LMConfig(vocab_size=V, **{**NEO, "n_ctx": n_ctx})),
            LanguageModel(LMConfig(vocab_size=V, n_ctx=64, **MAMBA))]


def ids(length: int, batch: int = 3) -> torch.Tensor:
    return torch.randint(1, V, (batch, length), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("mode", ["fixed", "softmax"])
@pytest.mark.parametrize("m", [0, 1])
def test_one_hot_hidden_state_is_the_components_final_hidden_state(mode, m):
    comps = components()
    hybrid = Manticore(comps, ManticoreConfig(n_blocks=2, vocab_size=V, alpha_mode=mode)).eval()
    hybrid.set_alphas(torch.nn.functional.one_hot(torch.tensor([m, m]), 2).float())
    x = ids(10)
    comp, d = comps[m], comps[m].cfg.d_model
    with torch.no_grad():
        got = hybrid.hidden(x)
        # The component's own whole pass: its embedding, positions, every block, its final norm.
        expected = comp.run_blocks(comp.embed(x), 0, len(comp.blocks))
    assert got.shape == (3, 10, hybrid.d_model)
    torch.testing.assert_close(got[..., :d], expected, rtol=1e-5, atol=1e-5)
    # Zero padding beyond d (under softmax, the other component keeps a weight of 1e-30).
    assert d == hybrid.d_model or got[..., d:].abs().max() < 1e-20


def test_an_excluded_component_is_never_called_and_the_hybrid_reads_what_it_cannot():
    comps = components(n_ctx=8)
    x = ids(12)  # longer than GPT-Neo's 8 positions
    with pytest.raises(ValueError, match="beyond n_ctx"):
        comps[0](x)

    def fail(module, args):
        raise AssertionError(f"excluded component called: {type(module).__name__}")

    for module in comps[0].modules():
        module.register_forward_pre_hook(fail)
    hybrid = Manticore(comps, ManticoreConfig(n_blocks=2, vocab_size=V, alpha_mode="fixed"))
    hybrid.set_alphas(programmed_alphas(2, 2, [0]))
    assert hybrid.alphas.tolist() == [[0.0, 1.0], [0.0, 1.0]]
    classifier = SequenceClassificationModule(HybridHidden(hybrid), hybrid.d_model, 2)
    logits = classifier(x, torch.ones_like(x))
    assert logits.shape == (3, 2)
    logits.sum().backward()
    assert all(p.grad is None for p in comps[0].parameters())
    assert comps[1].blocks[0].in_proj.weight.grad is not None


def test_programmed_alphas_zero_every_excluded_component():
    alphas = programmed_alphas(3, 4, [0, 2])
    assert alphas.tolist() == [[0.0, 0.5, 0.0, 0.5]] * 3


def batches(n: int, length: int = 10, n_classes: int = 3) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(1, V, (2 * n, length), generator=g)
    mask = torch.ones_like(x, dtype=torch.bool)
    mask[0, 7:] = False  # one right-padded row
    y = torch.randint(0, n_classes, (2 * n,), generator=g)
    return DataLoader([{"input_ids": a, "attention_mask": b, "label": c} for a, b, c in zip(x, mask, y)], batch_size=2)


@pytest.mark.parametrize("update", ["alternating", "simultaneous"])
def test_the_searched_classifier_trains_and_both_optimizers_move_their_parameters(update):
    hybrid = Manticore(components(), ManticoreConfig(n_blocks=2, vocab_size=V))
    module = SearchedClassificationModule(hybrid, 3, "last", OptimConfig(lr=1e-2, warmup_steps=0),
                                          SearchConfig(arch_lr=0.1, update=update))
    before = {k: v.detach().clone() for k, v in module.named_parameters()}
    trainer = L.Trainer(max_steps=2, max_epochs=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(module, train_dataloaders=batches(2))
    weights, arch = trainer.optimizers
    in_weights = {id(p) for g in weights.param_groups for p in g["params"]}
    assert [id(p) for g in arch.param_groups for p in g["params"]] == [id(hybrid.alphas)]
    assert id(module.net.head.weight) in in_weights and id(hybrid.alphas) not in in_weights
    moved = {k for k, v in module.named_parameters() if not torch.equal(v, before[k])}
    assert {"net.hybrid.alphas", "net.head.weight", "net.hybrid.proj_in.0.0.weight",
            "net.hybrid.components.1.blocks.0.in_proj.weight"} <= moved
    scores = evaluate_classifier(module, batches(2))
    assert scores["n"] == 4 and 0 <= scores["accuracy"] <= 1


BASE = {"components": {"gpt_neo": NEO, "mamba": MAMBA}, "tasks": {"listops": {"data": "listops"}}}


@pytest.mark.parametrize("change,message", [
    ({"tasks": {"x": {"data": "listops", "task": {"task": "listops"}}}}, r"tasks\.x\.data: give exactly one of"),
    ({"tasks": {"x": {}}}, r"tasks\.x\.data: give exactly one of"),
    ({"n_blocks": 3}, r"tasks\.listops: n_blocks 3 must divide every component's depth; gpt_neo has 4 blocks"),
    ({"components": {"mamba": MAMBA, "gpt_neo": {**NEO, "n_ctx": None}}}, r"gpt_neo\.n_ctx"),
    ({"components": {"mamba": MAMBA, "gpt_neo": {k: v for k, v in NEO.items() if k != "n_ctx"}}},
     r"gpt_neo\.n_ctx: a component with learned positions must state how many it has"),
    ({"components": {"mamba": MAMBA, "gpt_neo": {**NEO, "vocab_size": 5}}}, r"gpt_neo\.vocab_size: set by each task"),
    ({"tasks": {"x": {"data": "listops", "components": {"hyena": {}}}}},
     r"tasks\.x\.components\.hyena: not a component"),
    ({"components": {"mamba": MAMBA, "gpt_neo": {**NEO, "pattern": "attn_neo,nope"}}},
     r"gpt_neo\.pattern: unknown block 'nope'"),
    ({"tasks": {"x": {"task": {"task": "pathfinder", "size": 48}}}}, r"tasks\.x\.task\.size: 48 is not allowed"),
    ({"seeds": [0, 0]}, r"seeds: give at least 1, each once; got \[0, 0\]"),
    ({"seeds": []}, r"seeds: give at least 1, each once"),
])
def test_bad_configs_name_the_key(change, message):
    with pytest.raises(ConfigError, match=message) as err:
        from_dict(LRAExperimentsConfig, {**BASE, **change}, where="lra_experiments.smoke")
    assert "\n" not in str(err.value) and str(err.value).startswith("lra_experiments.smoke.")


@pytest.mark.pipeline
def test_stage_end_to_end_searches_where_every_component_reads_and_programs_where_one_cannot(tmp_path, capsys):
    section = {"base": {
        "components": {"gpt_neo": {**NEO, "d_model": 8, "n_ctx": 64, "blocks": {"attn_neo": {"n_heads": 2}}},
                       "mamba": {**MAMBA, "d_model": 8}},
        "tasks": {"short": {"task": {"task": "listops", "n_train": 8, "n_val": 4, "min_len": 5, "max_len": 20,
                                     "max_depth": 3, "max_args": 3}},
                  "long": {"task": {"task": "pathfinder", "size": 32, "n_train": 4, "n_val": 4, "path_length": 4},
                           "max_steps": 1}},
        "batch_size": 4, "eval_examples": 2, "seeds": [0, 1],
        "trainer": {"max_steps": 2, "val_every_n_steps": 2, "limit_val_batches": 1, "checkpoint_every_n_steps": 2,
                    "log_every_n_steps": 1, "progress_bar": False, "threads": 1}}}
    params = tmp_path / "params.yaml"
    hybrids = {"base": {"workers": 1}}
    params.write_text(yaml.safe_dump({"profile": "smoke", "lra_tasks": section, "lra_experiments": hybrids}))
    out = tmp_path / "lra.json"
    lra_experiments.main(["--params", str(params), "--lra", str(tmp_path / "none"), "--run-dir", str(tmp_path / "runs"),
                          "--out", str(out)])
    res = json.loads(out.read_text())
    short, long = res["tasks"]["short"], res["tasks"]["long"]
    assert res["profile"] == "smoke" and not short["programmed"] and long["programmed"]
    hybrid = short["models"]["manticore"]
    assert hybrid["mode"] == "searched" and all(len(run["trajectory"]) >= 1 for run in hybrid["seeds"])
    for m in ("gpt_neo", "mamba", "manticore"):
        runs = short["models"][m]["seeds"]
        assert [r["seed"] for r in runs] == [0, 1] and all(r["steps"] == 2 and r["n"] == 2 for r in runs)
        assert short["models"][m]["accuracy"] == pytest.approx(sum(r["accuracy"] for r in runs) / 2)
        assert (tmp_path / "runs/short" / m / "seed1/run_state.json").is_file()
    best = short["best_component"]
    assert short["models"][best]["accuracy"] == max(short["models"][c]["accuracy"] for c in ("gpt_neo", "mamba"))
    assert short["manticore_minus_best"] == pytest.approx(
        [h["accuracy"] - b["accuracy"] for h, b in zip(hybrid["seeds"], short["models"][best]["seeds"])])
    assert long["sequence_length"] == 1024 and long["excluded"] == ["gpt_neo"]
    assert long["models"]["gpt_neo"] == {"runs": False, "reason": "sequence length 1024 exceeds its 64 positions"}
    assert long["models"]["manticore"]["alphas"] == [[0.0, 1.0], [0.0, 1.0]]
    assert [r["steps"] for r in long["models"]["manticore"]["seeds"]] == [1, 1]
    assert "summary" not in res and res["equivalence_margin"] == 0.01

    # A user error is one line and exit status 2.
    section["base"]["tasks"]["short"]["data"] = "listops"
    params.write_text(yaml.safe_dump({"profile": "smoke", "lra_tasks": section, "lra_experiments": hybrids}))
    with pytest.raises(SystemExit) as exit_info:
        lra_experiments.main(["--params", str(params), "--lra", str(tmp_path / "none"),
                              "--run-dir", str(tmp_path / "runs"), "--out", str(out)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
