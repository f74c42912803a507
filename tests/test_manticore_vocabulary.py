"""Manticore across tokenizers: components that read different vocabularies, the completions each
writes with its own tokenizer, the general text packed per hybrid tokenizer, and the checks that
keep ids from being read in another vocabulary's meaning."""

from __future__ import annotations

import json

import datasets
import pytest
import torch
import yaml

from common.data.tokenized import load_tokenized
from common.data.tokenizer import load_tokenizer, tokenizer_fingerprint, train_tokenizer
from common.errors import ConfigError
from common.models.lm import LanguageModel, LMConfig, save_language_model
from papers.manticore import completions, general_text
from papers.manticore.vocabulary import TOKENIZER_DIR, adapt_to_tokenizer, check_tokenized_with, components_for_hybrid

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def two_tokenizers(smoke_data):
    """The smoke story tokenizer, and a smaller one trained on other text: the byte alphabet and some
    merges are shared, many tokens are not."""
    stories = load_tokenizer(smoke_data["tokenizer"])
    other = train_tokenizer(["The quick brown fox jumps over the lazy dog near the river bank."] * 50 +
                            ["Markets rose as traders priced in lower rates for the year."] * 50, vocab_size=300)
    return stories, other


def lm(vocab: int, seed: int, tie: bool = True, pattern: str = "mamba") -> LanguageModel:
    torch.manual_seed(seed)
    return LanguageModel(LMConfig(vocab_size=vocab, d_model=16, pattern=pattern, repeat=2, n_ctx=64,
                                  tie_embeddings=tie)).eval()


@pytest.mark.parametrize("tie", [True, False])
def test_a_component_reads_another_tokenizer_through_the_rows_of_shared_tokens(two_tokenizers, tie):
    own, target = two_tokenizers
    model = lm(len(own), 0, tie)
    adapted = adapt_to_tokenizer(model, own, target)
    assert adapted.cfg.vocab_size == len(target)
    own_ids, target_ids = own.get_vocab(), target.get_vocab()
    shared = [t for t in target_ids if t in own_ids]
    assert 0 < len(shared) < len(target_ids), "the test needs shared and unshared tokens"
    for token in shared:
        torch.testing.assert_close(adapted.embed.weight[target_ids[token]], model.embed.weight[own_ids[token]],
                                   rtol=0, atol=0)
        torch.testing.assert_close(adapted.head.weight[target_ids[token]], model.head.weight[own_ids[token]],
                                   rtol=0, atol=0)
    # A text made of shared tokens: the adapted model on the target's ids gives the original model's
    # logits on its own ids, column for column.
    sequence = shared[:12]
    with torch.no_grad():
        got = adapted(torch.tensor([[target_ids[t] for t in sequence]]))
        expected = model(torch.tensor([[own_ids[t] for t in sequence]]))
    columns = [(target_ids[t], own_ids[t]) for t in shared]
    torch.testing.assert_close(got[..., [c for c, _ in columns]], expected[..., [c for _, c in columns]])


def test_the_same_tokenizer_keeps_the_model_and_drops_only_padding_rows(two_tokenizers):
    own, _ = two_tokenizers
    model = lm(len(own), 1)
    assert adapt_to_tokenizer(model, own, own) is model
    padded = lm(len(own) + 7, 2, tie=False)  # as Pythia: more rows than tokens
    adapted = adapt_to_tokenizer(padded, own, own)
    ids = torch.randint(0, len(own), (2, 9), generator=torch.Generator().manual_seed(0))
    # The head's rows are the padded model's first rows, bit for bit; the logits then agree up to the
    # rounding of a matmul over another number of rows, which need not be the same on every CPU.
    assert torch.equal(adapted.head.weight, padded.head.weight[:len(own)])
    with torch.no_grad():
        torch.testing.assert_close(adapted(ids), padded(ids)[..., :len(own)])


def save_components(root, specs) -> None:
    for name, (model, tokenizer) in specs.items():
        save_language_model(model, root / name)
        tokenizer.save_pretrained(str(root / name / TOKENIZER_DIR))


def test_completions_are_written_with_each_components_tokenizer_and_tokenized_with_the_first(
        smoke_data, two_tokenizers, tmp_path):
    stories_tok, other_tok = two_tokenizers
    gpt_neo, mamba = lm(len(stories_tok), 3, pattern="attn,mlp"), lm(len(other_tok), 4)
    save_components(tmp_path / "components", {"gpt_neo": (gpt_neo, stories_tok), "mamba": (mamba, other_tok)})
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"profile": "smoke", "completions": {"base": {
        "n_prompts": 6, "max_new_tokens": 5, "n_ctx": 32, "validation_fraction": 0.5, "threads": 1}}}))
    out = tmp_path / "completions"
    completions.main(["--params", str(params), "--components", str(tmp_path / "components"),
                      "--stories", str(smoke_data["stories"]), "--out", str(out),
                      "--summary", str(tmp_path / "c.json")])

    text = datasets.load_from_disk(str(out / "text"))
    rows = [r for split in ("train", "validation") for r in text[split]]
    # Mamba completes greedily in its own vocabulary: one prompt at a time, by hand.
    validation = datasets.load_from_disk(str(smoke_data["stories"]))["validation"]
    prompts = [" ".join(t.split()[:4]) for t in validation["text"]][:6]
    for prompt in prompts:
        ids = torch.tensor([[other_tok.eos_token_id] + other_tok.encode(prompt, add_special_tokens=False)])
        new = mamba.generate(ids, max_new_tokens=5)[0, ids.shape[1]:].tolist()
        if other_tok.eos_token_id in new:
            new = new[:new.index(other_tok.eos_token_id)]
        assert {"text": prompt + other_tok.decode(new), "slice": "mamba"} in rows
    # Every row is tokenized with the hybrid's tokenizer, GPT-Neo's, and says so in its manifest.
    tokenized = load_tokenized(out / "tokenized")
    for split in ("train", "validation"):
        for row, ids in zip(text[split], tokenized[split]):
            n = sum(ids["attention_mask"])
            assert ids["input_ids"][:n] == (stories_tok.encode(row["text"], add_special_tokens=False) +
                                            [stories_tok.eos_token_id])[:32]
    check_tokenized_with(out / "tokenized", stories_tok, "test")
    with pytest.raises(ConfigError, match="tokenized with tokenizer") as err:
        check_tokenized_with(out / "tokenized", other_tok, "a hybrid whose first component is mamba")
    assert "\n" not in str(err.value)

    # The hybrid's components: GPT-Neo unchanged, Mamba given rows for GPT-Neo's tokens.
    components, tokenizer = components_for_hybrid(tmp_path / "components", ["gpt_neo", "mamba"])
    assert tokenizer_fingerprint(tokenizer) == tokenizer_fingerprint(stories_tok)
    assert [c.cfg.vocab_size for c in components] == [len(stories_tok)] * 2


def test_general_text_is_packed_once_per_tokenizer_up_to_its_budget(smoke_data, two_tokenizers, tmp_path):
    stories_tok, other_tok = two_tokenizers
    save_components(tmp_path / "components", {"gpt_neo": (lm(len(stories_tok), 5), stories_tok),
                                              "pythia": (lm(len(other_tok), 6), other_tok)})
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"profile": "smoke", "general_text": {"base": {
        "tokenizers": ["gpt_neo", "pythia"], "block_size": 16, "train_tokens": 1000, "validation_tokens": 200}}}))
    out = tmp_path / "general"
    general_text.main(["--params", str(params), "--components", str(tmp_path / "components"),
                       "--stories", str(smoke_data["stories"]), "--out", str(out),
                       "--summary", str(tmp_path / "g.json")])
    stories = datasets.load_from_disk(str(smoke_data["stories"]))
    for name, tokenizer in (("gpt_neo", stories_tok), ("pythia", other_tok)):
        packed = load_tokenized(out / name)
        check_tokenized_with(out / name, tokenizer, "test")
        for split, budget in (("train", 1000), ("validation", 200)):
            stream = [t for text in stories[split]["text"]
                      for t in tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]]
            assert [t for row in packed[split]["input_ids"] for t in row] == stream[: budget // 16 * 16]
    summary = json.loads((tmp_path / "g.json").read_text())
    assert summary["tokens"]["pythia"] == {"train": 992, "validation": 192}


def test_hub_components_are_saved_with_their_own_tokenizers(two_tokenizers, tmp_path):
    """The `paper` path, from local `save_pretrained` directories: each checkpoint keeps its tokenizer,
    and one without a padding token pads with its end-of-text token."""
    import copy

    from transformers import GPTNeoConfig, GPTNeoForCausalLM, MambaConfig, MambaForCausalLM

    from papers.manticore import components

    stories_tok, other_tok = two_tokenizers
    no_pad = copy.deepcopy(stories_tok)
    no_pad.pad_token = None
    torch.manual_seed(0)
    GPTNeoForCausalLM(GPTNeoConfig(vocab_size=len(stories_tok), hidden_size=16, num_layers=2, num_heads=2,
                                   attention_types=[[["global", "local"], 1]], max_position_embeddings=32,
                                   window_size=4)).save_pretrained(tmp_path / "hf_neo")
    no_pad.save_pretrained(str(tmp_path / "hf_neo"))
    MambaForCausalLM(MambaConfig(vocab_size=len(other_tok), hidden_size=16, num_hidden_layers=2,
                                 state_size=4)).save_pretrained(tmp_path / "hf_mamba")
    other_tok.save_pretrained(str(tmp_path / "hf_mamba"))
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"profile": "smoke", "components": {"base": {
        "source": "hub", "hub": {"gpt_neo": str(tmp_path / "hf_neo"), "mamba": str(tmp_path / "hf_mamba")}}}}))
    out = tmp_path / "components"
    components.main(["--params", str(params), "--data", str(tmp_path / "unused"), "--instructions",
                     str(tmp_path / "unused"), "--tokenizer", str(tmp_path / "unused"),
                     "--run-dir", str(tmp_path / "runs"), "--out", str(out),
                     "--metrics", str(tmp_path / "c.json")])

    models, tokenizer = components_for_hybrid(out, ["gpt_neo", "mamba"])
    assert tokenizer_fingerprint(tokenizer) == tokenizer_fingerprint(stories_tok)
    assert tokenizer.pad_token == tokenizer.eos_token
    assert [m.cfg.vocab_size for m in models] == [len(stories_tok)] * 2
    mamba_tok = load_tokenizer(out / "mamba" / TOKENIZER_DIR)
    assert tokenizer_fingerprint(mamba_tok) == tokenizer_fingerprint(other_tok)
    assert json.loads((tmp_path / "c.json").read_text())["components"]["mamba"]["tokens"] == len(other_tok)
    # the run directory is one of the stage's DVC outputs, so it exists even when nothing trains
    assert (tmp_path / "runs").is_dir()


def test_components_load_in_training_mode(tmp_path):
    """Lightning keeps each module's mode; a component loaded for inference (eval mode) would route
    its mixture of experts by argmax while the hybrid trains."""
    from papers.manticore.vocabulary import load_components

    cfg = LMConfig(vocab_size=16, d_model=8, pattern="moe", n_ctx=4, blocks={"moe": {"n_experts": 2, "d_ff": 8}})
    save_language_model(LanguageModel(cfg), tmp_path / "moe")
    (component,) = load_components(tmp_path, ["moe"])
    assert all(module.training for module in component.modules())


def test_a_component_name_the_stage_never_wrote_names_those_it_did(tmp_path):
    """A misspelt component (`nl_experiments.components: [gpt_neo, nosuch]`) said only that no
    tokenizer was saved with it and to rerun the components stage, which would not help."""
    from common.errors import ConfigError, DataError
    from papers.manticore.vocabulary import check_component_names, load_component_tokenizers, load_components

    with pytest.raises(DataError, match="no components; run the components stage first"):
        load_components(tmp_path / "components", ["gpt_neo"])
    for name in ("gpt_neo", "mamba"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    (tmp_path / "tokenizer_cache").mkdir()  # not a component: no config.json
    check_component_names(tmp_path, ["mamba", "gpt_neo"])
    expected = r"^components: nosuch: not a component in .* \(it has: gpt_neo, mamba\); "
    for load in (load_components, load_component_tokenizers):
        with pytest.raises(ConfigError, match=expected):
            load(tmp_path, ["gpt_neo", "nosuch"])
