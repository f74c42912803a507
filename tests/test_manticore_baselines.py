"""The learned ensemble and the programmed and swept alphas."""

from __future__ import annotations

import pytest
import torch

from common.errors import ConfigError
from papers.manticore.alphas import average, exclude, sweep_grid
from papers.manticore.ensemble import LearnedEnsemble
from tests.test_manticore_hybrid import V, tiny_components

pytestmark = pytest.mark.usefixtures("one_thread")


def test_ensemble_mixes_probabilities_with_softmax_weights():
    comps = tiny_components()
    ensemble = LearnedEnsemble(comps).eval()
    with torch.no_grad():
        ensemble.weights.copy_(torch.tensor([0.3, -0.4]))
        ids = torch.randint(0, V, (2, 5))
        w = torch.tensor([0.3, -0.4]).exp()
        w = w / w.sum()
        expected = w[0] * comps[0](ids).softmax(-1) + w[1] * comps[1](ids).softmax(-1)
        torch.testing.assert_close(ensemble(ids).exp(), expected, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(ensemble(ids).logsumexp(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)


def test_sweep_grid_covers_every_combination_on_the_simplex():
    grid = sweep_grid(2, [0.0, 0.5, 1.0])
    assert len(grid) == 9
    assert {tuple(g[:, 1].tolist()) for g in grid} == {(a, b) for a in (0.0, 0.5, 1.0) for b in (0.0, 0.5, 1.0)}
    assert all(torch.allclose(g.sum(-1), torch.ones(2)) for g in grid)


def test_programmed_alphas():
    assert exclude(2, 3, 0).tolist() == [[0.0, 0.5, 0.5], [0.0, 0.5, 0.5]]
    torch.testing.assert_close(average([torch.tensor([[0.2, 0.8]]), torch.tensor([[0.6, 0.4]])]),
                               torch.tensor([[0.4, 0.6]]))
    with pytest.raises(ConfigError, match="at least one other component"):
        exclude(1, 1, 0)
