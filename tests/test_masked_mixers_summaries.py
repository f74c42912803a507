"""The summaries stage: the official prompt through a chat template, batched left-padded greedy
generation against a one-story-at-a-time greedy loop written here, copying the corpus's own
summaries, the errors a user can cause, and the retrieval stage reading the same pairs as before.
The instruction model is a tiny random Llama with a trained tokenizer, both saved by the test."""

from __future__ import annotations

import json

import datasets
import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from common.data.manifest import verify_manifest, write_manifest
from common.data.tokenizer import train_tokenizer
from common.errors import ConfigError, DataError
from papers.masked_mixers import summaries
from papers.masked_mixers.retrieval import RetrievalConfig, load_pairs, tokenize_pairs

pytestmark = pytest.mark.usefixtures("one_thread")

SYSTEM = "You are an assistant for creating summaries for short stories."
USER = "Give a brief one-sentence summary of the following story with no other text: "
# A made-up chat format; any Jinja template that writes the messages in order will do.
TEMPLATE = ("{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</{{ m['role'] }}>\n"
            "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")
STORIES = ["Tom ran.", "Mia sat by the river and sang a long song about the moon and the stars.", "A red ball.",
           "Once upon a time there was a cat who liked fish very much, so she went to the sea.", "Ben and Sue baked."]
MAX_NEW = 12


def save_instruction_model(path, chat_template: str | None = TEMPLATE):
    tokenizer = train_tokenizer([*STORIES, SYSTEM, USER] * 10, vocab_size=300)
    if chat_template:
        tokenizer.chat_template = chat_template
    tokenizer.save_pretrained(str(path))
    torch.manual_seed(0)
    # A wide initialisation makes the random model's output depend clearly on its prompt.
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2, initializer_range=0.2)
    LlamaForCausalLM(config).save_pretrained(str(path))
    return path


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_instruction_model(tmp_path_factory.mktemp("instruct"))


def greedy_alone(model_dir, story: str) -> str:
    """The reference: the prompt written out by hand, no padding, argmax until </s> (id 2)."""
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
    prompt = f"<s><system>{SYSTEM}</system>\n<user>{USER}{story}</user>\n<assistant>"
    ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    assert (ids == 1).sum() == 1, "one <s>: the template's"
    new = []
    with torch.no_grad():
        for _ in range(MAX_NEW):
            token = model(torch.cat([ids, torch.tensor([new], dtype=torch.long)], dim=1)).logits[0, -1].argmax().item()
            if token == 2:
                break
            new.append(token)
    return tokenizer.decode(new, skip_special_tokens=True).strip()


def save_stories(path, with_summaries: bool = True, n_train: int = 6, n_validation: int = 4):
    def split(start, n):
        rows = {"story_id": list(range(start, start + n)),
                "text": [f"{STORIES[i % len(STORIES)]} ({i})" for i in range(start, start + n)]}
        if with_summaries:
            rows["summary"] = [f"Summary {i}." for i in range(start, start + n)]
        return datasets.Dataset.from_dict(rows)

    corpus = datasets.DatasetDict({"train": split(0, n_train), "validation": split(100, n_validation)})
    corpus.save_to_disk(str(path))
    write_manifest(path, stage="test", params={}, counts={k: len(v) for k, v in corpus.items()})
    return path


def run_stage(tmp_path, stories, **section):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"profile": "smoke", "summaries": {"base": section}}))
    out, results = tmp_path / "summaries", tmp_path / "summaries.json"
    summaries.main(["--params", str(params), "--stories", str(stories), "--out", str(out), "--results", str(results)])
    return out, json.loads(results.read_text())


def error_line(capsys, excinfo) -> str:
    assert excinfo.value.code == 2
    errors = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, errors
    return errors[0]


def test_the_chat_holds_the_official_prompt_with_the_story(model_dir):
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    story = 'Lily saw a {big} dog.\n"Hi!" she said.'
    (prompt,) = summaries.render_prompts(tokenizer, [story])
    assert prompt == f"<s><system>{SYSTEM}</system>\n<user>{USER}{story}</user>\n<assistant>"


def test_batched_left_padded_generation_equals_each_story_alone(model_dir):
    model, tokenizer = summaries.load_instruction_model(str(model_dir), "smoke", "float32", "cpu")
    lengths = [len(tokenizer(s)["input_ids"]) for s in STORIES]
    assert len(set(lengths)) == len(STORIES), "the batch must need padding"
    expected = [greedy_alone(model_dir, story) for story in STORIES]
    assert len(set(expected)) > 1, "the model must answer each story differently for this test to mean anything"
    for batch_size in (len(STORIES), 2):
        assert summaries.summarize(model, tokenizer, STORIES, batch_size, MAX_NEW) == expected


def test_stage_generates_with_a_local_model(model_dir, tmp_path):
    stories = save_stories(tmp_path / "stories", with_summaries=False)
    out, report = run_stage(tmp_path, stories, source="model", model=str(model_dir), n_train=3, n_test=2,
                            max_new_tokens=MAX_NEW, batch_size=2, device="cpu")
    verify_manifest(out, hint="")
    written = datasets.load_from_disk(str(out))
    corpus = datasets.load_from_disk(str(stories))
    for split, n in (("train", 3), ("validation", 2)):
        assert set(written[split].column_names) == {"story_id", "text", "summary"}
        assert written[split]["text"] == corpus[split]["text"][:n]
        assert written[split]["story_id"] == corpus[split]["story_id"][:n]
        assert written[split]["summary"] == [greedy_alone(model_dir, text) for text in corpus[split]["text"][:n]]
    assert report["counts"] == {"train": 3, "validation": 2}
    assert report["source"] == "model" and report["model"] == str(model_dir) and report["device"] == "cpu"
    assert report["examples"][0]["summary"] == written["validation"]["summary"][0]


def test_corpus_source_copies_the_summaries(tmp_path):
    stories = save_stories(tmp_path / "stories")
    out, report = run_stage(tmp_path, stories, source="corpus", n_train=5, n_test=3)
    written = datasets.load_from_disk(str(out))
    assert written["train"]["summary"] == [f"Summary {i}." for i in range(5)]
    assert written["validation"]["summary"] == [f"Summary {i}." for i in range(100, 103)]
    assert written["validation"]["text"] == datasets.load_from_disk(str(stories))["validation"]["text"][:3]
    assert report["source"] == "corpus" and report["model"] is None


def test_retrieval_reads_the_pairs_it_read_from_the_stories(model_dir, tmp_path):
    """Before the summaries stage, retrieval took the first n pairs of the stories themselves."""
    stories = save_stories(tmp_path / "stories", n_train=8, n_validation=5)
    out, _ = run_stage(tmp_path, stories, source="corpus", n_train=6, n_test=4)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    pairs, corpus = load_pairs(out, RetrievalConfig(n_train=6, n_test=4)), datasets.load_from_disk(str(stories))
    for split, n in (("train", 6), ("validation", 4)):
        new, old = tokenize_pairs(pairs[split], tokenizer, n, 16), tokenize_pairs(corpus[split], tokenizer, n, 16)
        assert torch.equal(new[0], old[0]) and torch.equal(new[1], old[1])
    with pytest.raises(DataError, match="raise summaries.n_train"):
        load_pairs(out, RetrievalConfig(n_train=7, n_test=4))


def test_corpus_without_summaries_says_to_use_a_model(tmp_path, capsys):
    stories = save_stories(tmp_path / "stories", with_summaries=False)
    with pytest.raises(SystemExit) as excinfo:
        run_stage(tmp_path, stories, source="corpus", n_train=2, n_test=2)
    assert "summaries.source: model" in error_line(capsys, excinfo)
    assert not (tmp_path / "summaries").exists()


def test_a_tokenizer_without_a_chat_template_is_refused(tmp_path, capsys):
    model = save_instruction_model(tmp_path / "base_model", chat_template=None)
    stories = save_stories(tmp_path / "stories")
    with pytest.raises(SystemExit) as excinfo:
        run_stage(tmp_path, stories, source="model", model=str(model), n_train=2, n_test=2, device="cpu")
    assert "no chat template" in error_line(capsys, excinfo)


def test_hub_models_only_at_the_paper_profile(tmp_path, capsys):
    stories = save_stories(tmp_path / "stories")
    with pytest.raises(SystemExit) as excinfo:
        run_stage(tmp_path, stories, source="model", model="meta-llama/Meta-Llama-3-8B-Instruct", n_train=2, n_test=2)
    assert "only at profile paper" in error_line(capsys, excinfo)


def test_config_errors():
    from common.config import from_dict

    with pytest.raises(ConfigError, match="summaries.smoke.model: source 'model' needs a model"):
        from_dict(summaries.SummariesConfig, {"source": "model"}, "summaries.smoke")
    with pytest.raises(ConfigError, match="n_train"):
        from_dict(summaries.SummariesConfig, {"n_train": 0}, "summaries.smoke")


def test_too_few_stories_is_a_data_error(tmp_path, capsys):
    stories = save_stories(tmp_path / "stories", n_train=3)
    with pytest.raises(SystemExit) as excinfo:
        run_stage(tmp_path, stories, source="corpus", n_train=4, n_test=2)
    assert "train has 3 stories, fewer than summaries.n_train = 4" in error_line(capsys, excinfo)


@pytest.mark.parametrize("profile", ["smoke", "tiny", "paper"])
def test_repository_params_summarise_every_story_retrieval_reads(profile):
    from common.config import load_yaml, stage_config
    from tests.conftest import ROOT

    params = load_yaml(ROOT / "papers" / "masked_mixers" / "params.yaml")
    written = stage_config(params, "summaries", summaries.SummariesConfig, profile)
    read = stage_config(params, "retrieval", RetrievalConfig, profile)
    assert written.n_train >= read.n_train and written.n_test >= read.n_test
