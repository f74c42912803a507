"""Manticore search: the optimizer split, alternating updates, GAEA on the simplex, and rewind."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader

from common.errors import ConfigError
from common.training.optim import OptimConfig
from papers.manticore.hybrid import Manticore, ManticoreConfig
from papers.manticore.search import (
    ExponentiatedGradient,
    ManticoreSearchModule,
    SearchConfig,
    freeze_alphas,
    rewind,
    snapshot,
)
from tests.test_manticore_hybrid import V, tiny_components

pytestmark = pytest.mark.usefixtures("one_thread")


def loader(n_batches: int = 6):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, V, (n_batches * 2, 8), generator=g)
    return DataLoader([{"input_ids": row, "labels": row} for row in ids], batch_size=2)


class Recorder(L.Callback):
    """Which of (weights, alphas) changed in each training batch."""

    def __init__(self):
        self.changed = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.before = (module.net.proj_in[0][0].weight.detach().clone(), module.net.alphas.detach().clone())

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        w, a = self.before
        self.changed.append((not torch.equal(w, module.net.proj_in[0][0].weight),
                             not torch.equal(a, module.net.alphas)))


def fit(module, steps=6, callbacks=()):
    trainer = L.Trainer(max_steps=steps, max_epochs=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=list(callbacks))
    trainer.fit(module, train_dataloaders=loader(steps))
    return trainer


@pytest.mark.parametrize("update,expected", [
    ("alternating", [(True, False), (False, True)] * 3),
    ("simultaneous", [(True, True)] * 6),
])
def test_weights_and_alphas_update_on_their_schedule(update, expected):
    net = Manticore(tiny_components(), ManticoreConfig(n_blocks=2, vocab_size=V))
    module = ManticoreSearchModule(net, V, OptimConfig(lr=1e-2, warmup_steps=0),
                                   SearchConfig(arch_lr=0.1, update=update))
    recorder = Recorder()
    fit(module, steps=6, callbacks=[recorder])
    assert recorder.changed == expected


def test_the_two_optimizers_split_the_parameters_exactly():
    net = Manticore(tiny_components(), ManticoreConfig(n_blocks=2, vocab_size=V))
    module = ManticoreSearchModule(net, V, OptimConfig(weight_decay=0.1), SearchConfig(arch_lr=0.07))
    trainer = fit(module, steps=1)
    weights, arch = trainer.optimizers
    weight_ids = {id(p) for group in weights.param_groups for p in group["params"]}
    assert [p for group in arch.param_groups for p in group["params"]] == [net.alphas]
    assert arch.param_groups[0]["lr"] == 0.07 and arch.param_groups[0]["weight_decay"] == 0.0
    assert weight_ids == {id(p) for p in net.parameters()} - {id(net.alphas)}


def test_exponentiated_gradient_keeps_rows_on_the_simplex_and_descends():
    alphas = torch.nn.Parameter(torch.tensor([[0.5, 0.5], [0.2, 0.8]]))
    opt = ExponentiatedGradient([alphas], lr=0.5)
    alphas.grad = torch.tensor([[1.0, -1.0], [0.0, 0.0]])
    opt.step()
    torch.testing.assert_close(alphas.sum(-1), torch.ones(2))
    expected = torch.tensor([0.5 * torch.e ** -0.5, 0.5 * torch.e ** 0.5])
    torch.testing.assert_close(alphas[0], expected / expected.sum())
    torch.testing.assert_close(alphas[1], torch.tensor([0.2, 0.8]))


def test_exponentiated_gradient_clips_the_exponent_and_floors_the_weights():
    """One step by hand, in the official code's order: the exponent -lr * grad is clipped to [-9, 9],
    each row renormalised, then weights below 1e-5 raised to it (so a floored row sums to a little
    over 1, and a weight a step drives down stays at the floor, not at a share of the row)."""
    alphas = torch.nn.Parameter(torch.tensor([[0.5, 0.5], [1.0, 0.0], [1.0, 0.0]], dtype=torch.float64))
    opt = ExponentiatedGradient([alphas], lr=1.0)
    alphas.grad = torch.tensor([[-100.0, 0.0], [0.0, 0.0], [100.0, 0.0]], dtype=torch.float64)
    opt.step()
    first = torch.tensor([0.5 * torch.e ** 9, 0.5], dtype=torch.float64)
    torch.testing.assert_close(alphas[0], first / first.sum())
    torch.testing.assert_close(alphas[1], torch.tensor([1.0, 1e-5], dtype=torch.float64))
    # the first weight falls by e^-9 (clipped from e^-100) and the row renormalises back to [1, 0]
    # before the floor: [1, 1e-5], where flooring first would give 1.2e-4 : 1e-5, i.e. [0.925, 0.075]
    torch.testing.assert_close(alphas[2], torch.tensor([1.0, 1e-5], dtype=torch.float64))


def test_a_component_at_alpha_zero_regains_weight_under_gaea():
    """A weight at exactly 0 under a pure multiplicative step stays 0 for ever. With the floor, a
    component whose gradient favours it climbs back: here past one half within 20 steps at the
    official rate 0.1, from a loss that prefers component 1."""
    alphas = torch.nn.Parameter(torch.tensor([[1.0, 0.0]]))
    opt = ExponentiatedGradient([alphas], lr=0.1)
    for _ in range(20):
        opt.zero_grad()
        loss = (alphas * torch.tensor([[10.0, 0.0]])).sum()  # component 0 costs 10, component 1 nothing
        loss.backward()
        opt.step()
    assert alphas[0, 1] > 0.5


def test_gaea_search_keeps_searching_a_component_set_to_zero():
    """Through a whole search: a hybrid whose second component starts at alpha exactly 0 (both
    blocks) still carries weight on it afterwards, so the search can move it (the unfloored step
    left it at 0)."""
    net = Manticore(tiny_components(), ManticoreConfig(n_blocks=2, vocab_size=V, alpha_mode="simplex"))
    net.set_alphas(torch.tensor([[1.0, 0.0], [1.0, 0.0]]))
    module = ManticoreSearchModule(net, V, OptimConfig(lr=1e-2, warmup_steps=0),
                                   SearchConfig(arch_lr=1.0, update="simultaneous", arch_schedule="constant"))
    fit(module, steps=4)
    assert (net.alphas[:, 1] >= 1e-5 * 0.99).all(), net.alphas
    # and the search did move it: a multiplicative step from the floor, not the floor re-applied
    # (this seed's gradient favours component 1 in both blocks: 1.5e-5 and 1.07e-5 after 4 steps)
    assert (net.alphas[:, 1] > 1.05e-5).all(), net.alphas


@pytest.mark.parametrize("update", ["alternating", "simultaneous"])
def test_mixture_weight_rate_decays_linearly_per_batch(update):
    """The rate the mixture weights step with at batch b is arch_lr * (1 - b / max_steps),
    whichever optimizer stepped; the weights' schedule also advances once per batch."""
    net = Manticore(tiny_components(), ManticoreConfig(n_blocks=2, vocab_size=V))
    module = ManticoreSearchModule(net, V, OptimConfig(lr=1e-2, warmup_steps=0, schedule="linear", min_lr_ratio=0.0),
                                   SearchConfig(arch_lr=0.1, update=update))
    rates = []

    class Rates(L.Callback):
        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            rates.append((trainer.optimizers[1].param_groups[0]["lr"], trainer.optimizers[0].param_groups[0]["lr"]))

    fit(module, steps=6, callbacks=[Rates()])
    arch_steps = range(6) if update == "simultaneous" else range(1, 6, 2)
    for b in arch_steps:
        assert rates[b][0] == pytest.approx(0.1 * (1 - b / 6))
    assert [w for _, w in rates] == pytest.approx([1e-2 * (1 - (b + 1) / 6) for b in range(6)])


def test_rewind_restores_the_exact_pre_search_weights_and_keeps_the_alphas():
    net = Manticore(tiny_components(), ManticoreConfig(n_blocks=2, vocab_size=V))
    before = snapshot(net)
    fit(ManticoreSearchModule(net, V, OptimConfig(lr=1e-2, warmup_steps=0), SearchConfig(update="simultaneous")),
        steps=4)
    searched = net.alphas.detach().clone()
    assert not torch.equal(searched, torch.zeros_like(searched))
    rewind(net, before)
    after = net.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())
    assert torch.equal(net.alphas, searched)
    freeze_alphas(net)
    assert net.alphas.requires_grad is False


def test_search_on_fixed_alphas_is_refused():
    net = Manticore(tiny_components(), ManticoreConfig(n_blocks=1, vocab_size=V, alpha_mode="fixed"))
    with pytest.raises(ConfigError, match="mixture weights are fixed"):
        ManticoreSearchModule(net, V)


def test_a_runner_builds_the_same_hybrid_whatever_the_generator_did_before(tmp_path):
    """Projector pretraining starts from `Runner.hybrid`; its draws must come from the stage's seed."""
    from common.models.lm import LanguageModel, LMConfig
    from papers.manticore.finetune import FineTuneConfig, Runner

    torch.manual_seed(0)
    components = [LanguageModel(LMConfig(vocab_size=32, d_model=8, pattern="mamba", repeat=2, n_ctx=16)),
                  LanguageModel(LMConfig(vocab_size=32, d_model=12, pattern="mamba", repeat=2, n_ctx=16))]
    runner = Runner(FineTuneConfig(), components, 32, tmp_path)
    built = []
    for unrelated_seed in (1, 2):
        torch.manual_seed(unrelated_seed)
        built.append(runner.hybrid("fixed", None).state_dict())
    for key, value in built[0].items():
        torch.testing.assert_close(built[1][key], value, rtol=0, atol=0)

