"""Table 2 (left) / Table 6 of Manticore: the existing hybrids it is compared with on MAD, and the
three-component hybrid, as configured in papers/manticore/params.yaml for every profile."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
import yaml

from common.blocks.attention import Attention
from common.blocks.hyena import Hyena
from common.blocks.mamba import Mamba
from common.blocks.moe import MoE
from common.config import stage_config
from common.errors import ConfigError
from common.models.lm import LanguageModel
from papers.manticore.mad_config import (
    MAD_TASKS,
    MADExperimentsConfig,
    MADTasksConfig,
    baseline_configs,
    component_configs,
)
from papers.manticore.mad_experiments import main
from papers.manticore.mad_runs import build_hybrid
from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("one_thread")
PROFILES = ("smoke", "tiny", "paper")


def params() -> dict:
    return yaml.safe_load((ROOT / "papers/manticore/params.yaml").read_text())


def config(profile: str) -> MADExperimentsConfig:
    return stage_config(params(), "mad_experiments", MADExperimentsConfig, profile, shared=MAD_TASKS)


@pytest.mark.parametrize("profile", PROFILES)
def test_existing_hybrids_build_in_the_papers_block_order(profile):
    cfg = config(profile)
    models = {n: LanguageModel(c) for n, c in baseline_configs(cfg, vocab_size=32, n_ctx=32).items()}
    # Mambaformer (the official baseline): a Mamba layer in place of positions, then (attention, Mamba) x 2.
    assert [type(b) for b in models["mambaformer"].blocks] == [Mamba, Attention, Mamba, Attention, Mamba]
    # MAD's striped multi-head Hyena + MoE-MLP: (MH-Hyena, MoE) x 2, two of eight experts per token.
    striped = models["striped_mh_hyena_moe"].blocks
    assert [type(b) for b in striped] == [Hyena, MoE, Hyena, MoE]
    assert all(b.n_heads > 1 and b.order == 2 for b in striped[::2])
    assert all(b.n_experts == 8 and b.top_k == 2 for b in striped[1::2])
    assert set(models) == {"mambaformer", "striped_mh_hyena_moe"}


@pytest.mark.parametrize("profile", PROFILES)
def test_three_component_hybrid_has_two_manticore_blocks_of_half_of_each_component(profile):
    cfg = config(profile)
    (spec,) = cfg.hybrids.values()
    assert spec.components == ["striped_mh_hyena_moe", "gpt_neo", "mamba"]
    # The paper: one Manticore block against the components (Table 2 right), two for the existing
    # hybrids' comparison and for the search that programs Figure 2 (right), no projectors.
    assert cfg.n_blocks == 1 and spec.n_blocks == 2 and not cfg.projectors
    if profile == "tiny":  # `programmed` trains nothing there, so no search programs it
        assert cfg.programming is None
    else:
        assert cfg.programming.n_blocks == 2 and cfg.programming.search.arch_lr == 0.01
    assert list(cfg.components) == ["gpt_neo", "mamba"]  # what `programmed` reads
    configs = {**component_configs(cfg, 32, 32), **baseline_configs(cfg, 32, 32)}
    hybrid = build_hybrid({n: configs[n] for n in spec.components}, spec.n_blocks, 32, cfg.projectors)
    assert hybrid.projector_parameters() == []
    for m, comp in enumerate(hybrid.components):
        depth = len(comp.blocks)
        assert [hybrid._slice(m, i) for i in range(2)] == [(0, depth // 2), (depth // 2, depth)]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_one_hot_alpha_of_the_three_component_hybrid_is_that_component(which):
    cfg = config("smoke")
    spec = next(iter(cfg.hybrids.values()))
    configs = {**component_configs(cfg, 32, 24), **baseline_configs(cfg, 32, 24)}
    torch.manual_seed(0)
    hybrid = build_hybrid({n: configs[n] for n in spec.components}, spec.n_blocks, 32, projectors=True).eval()
    one_hot = torch.zeros(2, 3)
    one_hot[:, which] = 1
    hybrid.set_alphas(one_hot)  # softmax mode, as searched: the others get weight ~1e-30
    ids = torch.randint(0, 32, (3, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got, expected = hybrid(ids), hybrid.components[which](ids)  # the component's own forward
        # and not trivially: another one-hot gives other logits
        hybrid.set_alphas(torch.roll(one_hot, 1, dims=1))
        other = hybrid(ids)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(other, expected, atol=1e-3)


def one_line(err: ConfigError) -> str:
    message = str(err)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("changes, expected", [
    ({"hybrids": {"m3": {"components": ["striped_mh_hyena_moe", "gpt_neo", "rwkv"]}}},
     r"mad_experiments\.tiny\.hybrids\.m3\.components: 'rwkv' is neither a component nor a baseline"),
    ({"hybrids": {"m3": {"components": ["mambaformer", "gpt_neo"]}}},
     r"n_blocks: 2 must divide .*mambaformer has 5 blocks"),
    ({"hybrids": {"m3": {"components": ["gpt_neo", "mamba"], "retrain": ["discretized"], "compare": "frozen"}}},
     r"hybrids\.m3\.compare: 'frozen' is not retrained"),
    ({"hybrids": {"m3": {"components": ["gpt_neo"]}}}, r"hybrids\.m3\.components: a hybrid needs at least two"),
    ({"hybrids": {"gpt_neo": {"components": ["gpt_neo", "mamba"]}}}, r"hybrids\.gpt_neo: its run 'gpt_neo'"),
    ({"baselines": {"mamba": {"pattern": "mamba"}}}, r"baselines\.mamba: also a component"),
    ({"baselines": {"x": {"pattern": "mamba,lstm"}}}, r"baselines\.x\.pattern: unknown block 'lstm'"),
    ({"baselines": {}}, r"hybrids: compared with existing hybrids, but baselines is empty"),
    ({"retrain": ["frozen", "frozen"]}, r"retrain: give each once"),
])
def test_config_errors_are_one_line(changes, expected):
    raw = copy.deepcopy(params())
    shared = {f.name for f in dataclasses.fields(MADTasksConfig)}
    # replace (not merge) the changed keys, so that a test's hybrids and baselines stand alone
    for key, value in changes.items():
        section = raw["mad_tasks" if key in shared else "mad_experiments"]
        section["base"][key] = value
        (section.get("tiny") or {}).pop(key, None)
    with pytest.raises(ConfigError, match=expected) as err:
        stage_config(raw, "mad_experiments", MADExperimentsConfig, "tiny", shared=MAD_TASKS)
    one_line(err.value)


def test_what_both_mad_stages_read_is_set_in_mad_tasks_only():
    """A key of the shared section set in mad_experiments would reach the tables but not mad_sizing."""
    raw = copy.deepcopy(params())
    raw["mad_experiments"]["tiny"]["batch_size"] = 64
    with pytest.raises(ConfigError, match=r"^mad_experiments\.batch_size: set in mad_tasks, .* move it there$"):
        stage_config(raw, "mad_experiments", MADExperimentsConfig, "tiny", shared=MAD_TASKS)
    raw = copy.deepcopy(params())
    raw["mad_tasks"]["tiny"]["batch_size"] = 0
    with pytest.raises(ConfigError, match=r"^mad_tasks\.tiny\.batch_size"):
        stage_config(raw, "mad_experiments", MADExperimentsConfig, "tiny", shared=MAD_TASKS)


def test_a_block_rejecting_its_options_stops_the_stage_before_training(tmp_path, capsys):
    raw = copy.deepcopy(params())
    raw["profile"] = "smoke"
    raw["mad_tasks"]["smoke"]["baselines"] = {"striped_mh_hyena_moe": {"blocks": {"hyena": {"n_heads": 3}}}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(SystemExit) as exit_:
        main(["--params", str(path), "--run-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out.json")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: mad_tasks.smoke.baselines.striped_mh_hyena_moe.blocks.hyena: n_heads=3 ")
    assert "\n" not in err and not (tmp_path / "runs").exists()


@pytest.mark.pipeline
def test_worker_processes_give_the_results_of_one_process(tmp_path):
    """Every network and search is a job of its own: spread over two worker processes, the stage
    writes what one process running the jobs in a row writes, so no job leans on another's state."""
    raw = copy.deepcopy(params())
    raw["profile"] = "smoke"
    raw["mad_tasks"]["smoke"]["settings"] = ["mad_baseline/in-context-recall"]
    outputs = {}
    for workers in (1, 2):
        raw["mad_experiments"]["smoke"]["workers"] = workers
        path = tmp_path / f"params{workers}.yaml"
        path.write_text(yaml.safe_dump(raw))
        out = tmp_path / f"out{workers}.json"
        main(["--params", str(path), "--run-dir", str(tmp_path / f"runs{workers}"), "--out", str(out)])
        outputs[workers] = out.read_text()
    assert outputs[1] == outputs[2]
    assert '"manticore_3"' in outputs[1] and '"programming"' in outputs[1]
