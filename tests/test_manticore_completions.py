"""The completions stage batches prompts by token length; a batch must give what each prompt alone gives."""

from __future__ import annotations

import pytest
import torch

from common.config import from_dict
from common.data.tokenizer import load_tokenizer
from common.errors import ConfigError
from common.models.lm import LanguageModel, LMConfig
from papers.manticore.completions import CompletionsConfig, complete_all


def test_batched_greedy_completions_equal_one_prompt_at_a_time(smoke_data, one_thread):
    tokenizer = load_tokenizer(smoke_data["tokenizer"])
    torch.manual_seed(0)
    model = LanguageModel(LMConfig(vocab_size=len(tokenizer), d_model=16, pattern="mamba", repeat=2, n_ctx=64)).eval()
    cfg = CompletionsConfig(max_new_tokens=6)
    # Different token lengths, and two prompts of one length, so batches of one and of two both occur.
    texts = ["Once upon a time", "Tom saw a dog", "Lily liked the big", "The cat sat"]
    batched = complete_all(model, tokenizer, texts, cfg, greedy=True, seed=0)
    for text, got in zip(texts, batched):
        ids = torch.tensor([[tokenizer.eos_token_id] + tokenizer.encode(text, add_special_tokens=False)])
        new = model.generate(ids, max_new_tokens=6)[0, ids.shape[1]:].tolist()
        if tokenizer.eos_token_id in new:
            new = new[:new.index(tokenizer.eos_token_id)]
        assert got == text + tokenizer.decode(new)
    lengths = [len(tokenizer.encode(t, add_special_tokens=False)) for t in texts]
    assert len(set(lengths)) < len(lengths), f"no two prompts share a length: {lengths}"



def test_a_greedy_component_that_is_not_a_component_is_refused_with_the_allowed_names():
    with pytest.raises(ConfigError, match=r"^completions\.tiny\.greedy: 'mamba2' is not one of the components; "
                                          r"allowed: gpt_neo, mamba$"):
        from_dict(CompletionsConfig, {"greedy": "mamba2"}, "completions.tiny")
