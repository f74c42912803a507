"""The learned-weight ensemble baseline: the components' output distributions mixed by learned
weights, p(x) = sum_m softmax(w)_m p_m(x). It returns log-probabilities, which a cross-entropy
loss treats as logits (their log-softmax is themselves), so it trains in `CausalLMModule` as is."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from common.errors import ConfigError
from common.models.lm import LanguageModel


class LearnedEnsemble(nn.Module):
    def __init__(self, components: list[LanguageModel]):
        super().__init__()
        vocabs = {comp.cfg.vocab_size for comp in components}
        if len(vocabs) != 1:
            raise ConfigError(f"components: an output ensemble needs one vocabulary, got sizes {sorted(vocabs)}")
        self.components = nn.ModuleList(components)
        self.weights = nn.Parameter(torch.zeros(len(components)))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        log_w = F.log_softmax(self.weights, dim=0)
        per_model = torch.stack([F.log_softmax(comp(input_ids).float(), dim=-1) for comp in self.components])
        return torch.logsumexp(per_model + log_w[:, None, None, None], dim=0)

    def aux_loss(self) -> torch.Tensor | None:
        return None
