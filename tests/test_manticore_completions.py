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


def test_each_prompt_once_and_both_completions_of_a_prompt_on_one_side(smoke_data):
    """Stories open with a few templates: repeated prompts, completed greedily alike, put 219 of 600
    validation rows verbatim in training (found 2026-11-28)."""
    from papers.manticore.completions import prompts, split_by_prompt

    cfg = CompletionsConfig(n_prompts=10_000, prompt_words=2)
    opened = prompts(cfg, smoke_data["stories"])
    assert len(opened) == len(set(opened)) and len(opened) > 3
    done = {"greedy": [f"{p} and then" for p in opened], "sampled": [f"{p} or {i}" for i, p in enumerate(opened)]}
    splits = split_by_prompt(done, 0.3, seed=0)
    assert len(splits["validation"]) == 2 * int(len(opened) * 0.3)
    assert len(splits["train"]) + len(splits["validation"]) == 2 * len(opened)
    prompt_of = {text: p for texts in done.values() for p, text in zip(opened, texts)}
    sides = {name: {prompt_of[r["text"]] for r in rows} for name, rows in splits.items()}
    assert not sides["train"] & sides["validation"]
    assert not {r["text"] for r in splits["train"]} & {r["text"] for r in splits["validation"]}
