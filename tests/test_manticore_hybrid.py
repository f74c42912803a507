"""Manticore hybrids: a one-hot alpha is exactly its component (checked against Hugging Face models
loaded from local `save_pretrained` directories), projector shapes, and the parameter split."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    GPTNeoConfig,
    GPTNeoForCausalLM,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    MambaConfig,
    MambaForCausalLM,
)

from common.errors import ConfigError
from common.models.hf import language_model_from_hf
from common.models.lm import LanguageModel, LMConfig
from common.models.mamba import mamba_lm_from_hf
from papers.manticore.hybrid import Manticore, ManticoreConfig

pytestmark = pytest.mark.usefixtures("one_thread")
V = 64


def tiny_components() -> list[LanguageModel]:
    torch.manual_seed(0)
    return [LanguageModel(LMConfig(vocab_size=V, d_model=32, pattern="attn,swiglu", repeat=1,
                                   blocks={"attn": {"n_heads": 2}})),
            LanguageModel(LMConfig(vocab_size=V, d_model=48, pattern="mamba", repeat=4))]


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory):
    """Tiny GPT-Neo, GPT-NeoX and Mamba checkpoints written with save_pretrained, with their models."""
    root = tmp_path_factory.mktemp("hf")
    torch.manual_seed(0)
    models = {
        "gpt_neo": GPTNeoForCausalLM(GPTNeoConfig(vocab_size=V, hidden_size=32, num_layers=2, num_heads=2,
                                                  attention_types=[[["global", "local"], 1]],
                                                  max_position_embeddings=64, window_size=4)),
        "gpt_neox": GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=V, hidden_size=48, num_hidden_layers=4,
                                                     num_attention_heads=4, intermediate_size=96,
                                                     max_position_embeddings=64, tie_word_embeddings=True)),
        "mamba": MambaForCausalLM(MambaConfig(vocab_size=V, hidden_size=40, num_hidden_layers=2, state_size=8)),
    }
    for name, model in models.items():
        model.eval().save_pretrained(root / name)
    return root, models


def load_component(root, name) -> LanguageModel:
    return mamba_lm_from_hf(root / name) if name == "mamba" else language_model_from_hf(root / name)


@pytest.mark.parametrize("which", [0, 1, 2])
def test_one_hot_alpha_is_exactly_the_pretrained_component(hf_dirs, which):
    root, models = hf_dirs
    names = ["gpt_neo", "gpt_neox", "mamba"]
    hybrid = Manticore([load_component(root, n) for n in names],
                       ManticoreConfig(n_blocks=2, vocab_size=V, alpha_mode="fixed")).eval()
    one_hot = torch.zeros(2, 3)
    one_hot[:, which] = 1
    hybrid.set_alphas(one_hot)
    ids = torch.randint(0, V, (2, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = models[names[which]](ids).logits
        torch.testing.assert_close(hybrid(ids), expected, rtol=1e-4, atol=1e-4)


def test_a_zero_alpha_skips_its_component(monkeypatch):
    comps = tiny_components()
    hybrid = Manticore(comps, ManticoreConfig(n_blocks=1, vocab_size=V, alpha_mode="fixed")).eval()
    hybrid.set_alphas(torch.tensor([[0.0, 1.0]]))

    def refuse(*args, **kwargs):
        raise AssertionError("a component with alpha 0 must not run")

    monkeypatch.setattr(comps[0], "run_blocks", refuse)
    ids = torch.randint(0, V, (1, 5))
    with torch.no_grad():
        torch.testing.assert_close(hybrid(ids), comps[1](ids))


def test_projectors_map_between_each_width_and_the_widest():
    hybrid = Manticore(tiny_components(), ManticoreConfig(n_blocks=2, vocab_size=V))
    assert hybrid.d_model == 48
    for m, d in enumerate([32, 48]):
        for i in range(2):
            assert hybrid.proj_in[m][i].weight.shape == (d, 48)
            assert hybrid.proj_out[m][i].weight.shape == (48, d)
    assert hybrid(torch.randint(0, V, (2, 6))).shape == (2, 6, V)


@pytest.mark.parametrize("mode", ["softmax", "gumbel", "simplex"])
def test_alphas_get_gradients_and_the_parameter_split_is_a_partition(mode):
    hybrid = Manticore(tiny_components(), ManticoreConfig(n_blocks=2, vocab_size=V, alpha_mode=mode)).train()
    hybrid(torch.randint(0, V, (2, 6))).logsumexp(-1).mean().backward()
    assert hybrid.alphas.grad is not None and hybrid.alphas.grad.abs().sum() > 0
    arch, weights = hybrid.arch_parameters(), hybrid.weight_parameters()
    assert [id(p) for p in arch] == [id(hybrid.alphas)]
    assert {id(p) for p in arch} | {id(p) for p in weights} == {id(p) for p in hybrid.parameters()}
    assert not {id(p) for p in arch} & {id(p) for p in weights}


def test_mixture_weights_are_on_the_simplex_and_uniform_at_start():
    for mode in ("softmax", "simplex", "fixed"):
        net = Manticore(tiny_components(), ManticoreConfig(n_blocks=2, vocab_size=V, alpha_mode=mode))
        alphas = net.mixture_weights()
        torch.testing.assert_close(alphas, torch.full((2, 2), 0.5))


def test_bad_block_count_and_bad_alphas_are_one_line_errors():
    with pytest.raises(ConfigError, match="n_blocks: 3 must divide every component's depth"):
        Manticore(tiny_components(), ManticoreConfig(n_blocks=3, vocab_size=V))
    hybrid = Manticore(tiny_components(), ManticoreConfig(n_blocks=1, vocab_size=V, alpha_mode="fixed"))
    with pytest.raises(ConfigError, match="sum to 1"):
        hybrid.set_alphas(torch.tensor([[0.7, 0.7]]))


def test_discretize_takes_the_argmax_per_block():
    hybrid = Manticore(tiny_components(), ManticoreConfig(n_blocks=2, vocab_size=V))
    hybrid.set_alphas(torch.tensor([[0.3, 0.7], [0.9, 0.1]]))
    hybrid.discretize()
    assert hybrid.cfg.alpha_mode == "fixed" and hybrid.arch_parameters() == []
    assert hybrid.mixture_weights().tolist() == [[0.0, 1.0], [1.0, 0.0]]


def test_aux_loss_counts_only_the_components_that_ran():
    torch.manual_seed(0)
    moe = LanguageModel(LMConfig(vocab_size=V, d_model=16, pattern="attn,moe", repeat=1,
                                 blocks={"attn": {"n_heads": 2},
                                         "moe": {"n_experts": 4, "top_k": 1, "router": "softmax_topk",
                                                 "aux_loss_coef": 0.1}}))
    plain = LanguageModel(LMConfig(vocab_size=V, d_model=16, pattern="mamba", repeat=2))
    net = Manticore([moe, plain], ManticoreConfig(n_blocks=1, vocab_size=V, alpha_mode="fixed"))
    ids = torch.randint(0, V, (2, 8))
    net(ids)
    both = net.aux_loss()
    assert both is not None and torch.equal(both, moe.aux_loss()), "uniform alphas: the MoE component ran"
    net.set_alphas(torch.tensor([[0.0, 1.0]]))
    net(ids)
    assert moe.aux_loss() is not None, "the MoE block still holds its earlier value"
    assert net.aux_loss() is None, "the MoE component was programmed out of this forward"
