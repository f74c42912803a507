"""The routing stage's token counts (`papers.blackmamba.routing.count_tokens`)."""

from __future__ import annotations

import torch

from common.blocks.moe import MoE
from common.models.lm import LanguageModel, LMConfig
from papers.blackmamba.routing import count_tokens


def test_each_call_returns_its_own_counts_of_every_routed_token(one_thread):
    torch.manual_seed(0)
    model = LanguageModel(LMConfig(vocab_size=30, d_model=16, n_ctx=32, pattern="mamba,moe", repeat=2))
    first_ids, second_ids = torch.randint(0, 30, (2, 24)), torch.randint(0, 30, (3, 16))
    first = count_tokens(model, [{"input_ids": first_ids}], batches=1, train_mode=False)
    expected = [counts.clone() for counts in first]
    second = count_tokens(model, [{"input_ids": second_ids}], batches=1, train_mode=False)
    moe = [block for block in model.blocks if isinstance(block, MoE)]
    assert len(first) == len(moe) == 2
    for layer, a, b, kept in zip(moe, first, second, expected):
        # The oracle: every token goes to top_k experts, once per call.
        assert int(a.sum()) == first_ids.numel() * layer.top_k and int(b.sum()) == second_ids.numel() * layer.top_k
        assert torch.equal(a, kept), "a later call must not change the counts an earlier one returned"
