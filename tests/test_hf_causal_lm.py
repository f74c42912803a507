"""Our models through `transformers`' own entry points (`common.models.hf_causal_lm`).

Every registered block is saved with `save_pretrained` and loaded by `AutoModelForCausalLM` in a
fresh process that never imported the project's model code: its logits must be those of the model
it was saved from, computed here. Generation through `generate` and `pipeline` must give the tokens
of `LanguageModel.generate`; a bfloat16 model must stay bfloat16; and each loader, handed a
directory of another kind, names the loader that reads it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from common.blocks import BLOCKS
from common.errors import DataError
from common.models.hf_causal_lm import HybridLMForCausalLM, save_pretrained
from common.models.lm import LanguageModel, LMConfig, load_language_model, save_language_model
from tests.conftest import run_module
from tests.test_block_registry_training import lm_config

pytestmark = pytest.mark.usefixtures("one_thread")


def random_model(config: LMConfig, seed: int = 0) -> LanguageModel:
    """A model whose every weight is perturbed, so no block's zero-initialised output hides a
    weight that failed to load."""
    torch.manual_seed(seed)
    model = LanguageModel(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.05 * torch.randn_like(param))
    return model


FRESH_PROCESS = """
import sys, torch
from transformers import AutoModelForCausalLM
root, names = sys.argv[1], sys.argv[2:]
ids = torch.load(f"{root}/ids.pt")
logits = {}
for name in names:
    model = AutoModelForCausalLM.from_pretrained(f"{root}/{name}", trust_remote_code=True)
    logits[name] = model(ids).logits
print("imported before loading:", any(m.startswith("common.models") for m in sys.modules))
torch.save(logits, f"{root}/logits.pt")
"""


@pytest.mark.pipeline
def test_every_block_loads_through_auto_model_in_a_fresh_process(tmp_path):
    ids = torch.randint(0, 16, (2, 15), generator=torch.Generator().manual_seed(1))
    torch.save(ids, tmp_path / "ids.pt")
    expected = {}
    for name in sorted(BLOCKS):
        model = random_model(lm_config(name))
        expected[name] = model(ids)
        save_pretrained(model, tmp_path / name)
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(tmp_path), *sorted(BLOCKS)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = torch.load(tmp_path / "logits.pt")
    for name in sorted(BLOCKS):
        torch.testing.assert_close(got[name], expected[name], rtol=1e-6, atol=1e-6, msg=name)


def test_generate_and_the_text_generation_pipeline_match_our_generate(tmp_path, smoke_data):
    from transformers import AutoModelForCausalLM, pipeline

    from common.data.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(smoke_data["tokenizer"])
    model = random_model(LMConfig(vocab_size=len(tokenizer), d_model=32, pattern="mamba,attn,swiglu", n_ctx=32,
                                  blocks={"attn": {"n_heads": 2}}))
    save_pretrained(model, tmp_path / "m", tokenizer=tokenizer)
    prompt = "Once upon a time"
    prompt_ids = torch.tensor([tokenizer.encode(prompt)])
    ours = model.generate(prompt_ids, max_new_tokens=12)[0, prompt_ids.shape[1]:].tolist()

    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "m")
    theirs = hf.generate(prompt_ids, max_new_tokens=12, do_sample=False, eos_token_id=None)
    assert theirs[0, prompt_ids.shape[1]:].tolist() == ours

    generator = pipeline("text-generation", model=str(tmp_path / "m"))
    text = generator(prompt, max_new_tokens=12, do_sample=False, eos_token_id=None)[0]["generated_text"]
    assert text == prompt + tokenizer.decode(ours)


def test_a_bfloat16_model_stays_bfloat16_and_keeps_its_logits(tmp_path):
    from transformers import AutoModelForCausalLM

    model = random_model(LMConfig(vocab_size=32, d_model=32, pattern="mamba,swiglu", n_ctx=16)).to(torch.bfloat16)
    ids = torch.randint(0, 32, (1, 12))
    save_pretrained(model, tmp_path / "hf")
    save_language_model(model, tmp_path / "ours")
    for loaded in (AutoModelForCausalLM.from_pretrained(tmp_path / "hf"), load_language_model(tmp_path / "hf"),
                   load_language_model(tmp_path / "ours")):
        assert {p.dtype for p in loaded.parameters()} == {torch.bfloat16}
        out = loaded(ids)
        torch.testing.assert_close(getattr(out, "logits", out), model(ids), rtol=0, atol=0)


def test_labels_give_the_shifted_next_token_loss():
    model = random_model(LMConfig(vocab_size=16, d_model=16, pattern="swiglu", n_ctx=8))
    hf = HybridLMForCausalLM.from_language_model(model)
    ids = torch.randint(0, 16, (2, 8))
    logits = model(ids)
    by_hand = -torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None]).mean()
    torch.testing.assert_close(hf(ids, labels=ids).loss, by_hand)


def test_a_left_padded_batch_is_refused_and_right_padding_is_harmless():
    model = random_model(LMConfig(vocab_size=16, d_model=16, pattern="mamba", n_ctx=8))
    hf = HybridLMForCausalLM.from_language_model(model)
    ids = torch.randint(0, 16, (2, 6))
    with pytest.raises(ValueError, match="pad on the right"):
        hf(ids, attention_mask=torch.tensor([[0, 1, 1, 1, 1, 1], [1] * 6]))
    right = hf(ids, attention_mask=torch.tensor([[1, 1, 1, 1, 0, 0], [1] * 6])).logits
    torch.testing.assert_close(right, model(ids))


def hf_directories(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM, MambaConfig, MambaForCausalLM

    LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                 num_attention_heads=2, num_key_value_heads=2)).save_pretrained(tmp_path / "llama")
    MambaForCausalLM(MambaConfig(vocab_size=32, hidden_size=16, state_size=4, num_hidden_layers=1)
                     ).save_pretrained(tmp_path / "mamba")
    return tmp_path / "llama", tmp_path / "mamba"


def test_each_loader_names_the_loader_a_directory_needs(tmp_path):
    from common.models.hf import language_model_from_hf
    from common.models.mamba import mamba_lm_from_hf

    llama, mamba = hf_directories(tmp_path)
    with pytest.raises(DataError, match="'llama', expected 'mamba'.*language_model_from_hf"):
        mamba_lm_from_hf(llama)
    with pytest.raises(DataError, match="'mamba', expected.*mamba_lm_from_hf"):
        language_model_from_hf(mamba)
    with pytest.raises(DataError, match="'llama' model; load it with common.models.hf.language_model_from_hf"):
        load_language_model(llama)
    with pytest.raises(DataError, match="'mamba' model; load it with common.models.mamba.mamba_lm_from_hf"):
        load_language_model(mamba)
    # The controls: each loader reads its own kind.
    assert language_model_from_hf(llama).cfg.pattern == "hf_decoder"
    assert mamba_lm_from_hf(mamba).cfg.pattern == "mamba"


@pytest.mark.pipeline
def test_the_export_command_writes_a_pipeline_model_for_transformers(tmp_path, smoke_data):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from common.data.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(smoke_data["tokenizer"])
    vocab = len(tokenizer)
    model = random_model(LMConfig(vocab_size=vocab, d_model=16, pattern="mamba,moe", n_ctx=16))
    save_language_model(model, tmp_path / "ours")
    done = run_module("common.models.hf_causal_lm", tmp_path / "ours", tmp_path / "hf",
                      "--tokenizer", smoke_data["tokenizer"])
    assert done.returncode == 0, done.stderr[-2000:]
    ids = torch.randint(0, vocab, (1, 10))
    torch.testing.assert_close(AutoModelForCausalLM.from_pretrained(tmp_path / "hf")(ids).logits, model(ids),
                               rtol=0, atol=1e-6)
    assert AutoTokenizer.from_pretrained(tmp_path / "hf").get_vocab() == tokenizer.get_vocab()
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["model_type"] == "hybrid_lm"


@pytest.mark.parametrize("case", ["missing model", "tokenizer larger than the model"])
def test_the_export_command_refuses_bad_input_in_one_line(tmp_path, smoke_data, case, capsys):
    model_dir = tmp_path / "ours"
    if case != "missing model":
        save_language_model(random_model(LMConfig(vocab_size=8, d_model=8, pattern="swiglu", n_ctx=4)), model_dir)
    from common.models import hf_causal_lm

    with pytest.raises(SystemExit) as excinfo:
        hf_causal_lm.main([str(model_dir), str(tmp_path / "hf"), "--tokenizer", str(smoke_data["tokenizer"])])
    err = capsys.readouterr().err.strip().splitlines()
    assert excinfo.value.code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert not (tmp_path / "hf").exists()



def loglikelihood_as_hf_scores_it(model: LanguageModel, tokenizer, context: str, continuation: str):
    """lm-eval's `hf` model, written out: trailing whitespace of the context moves to the
    continuation, the pair is tokenized whole and split where the context's tokens end, no token is
    prepended, and the window keeps the last n_ctx + 1 tokens."""
    stripped = context.rstrip()
    continuation = context[len(stripped):] + continuation
    whole = tokenizer.encode(stripped + continuation)
    context_ids = tokenizer.encode(stripped)
    continuation_ids = whole[len(context_ids):]
    ids = whole[-(model.cfg.n_ctx + 1):]
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([ids[:-1]]))[0].double(), -1)[-len(continuation_ids):]
    target = torch.tensor(continuation_ids)
    return logprobs.gather(1, target[:, None]).sum().item(), bool((logprobs.argmax(-1) == target).all())


@pytest.mark.slow
def test_lm_eval_hf_model_scores_a_saved_model_from_its_own_cli(tmp_path, smoke_data):
    """`lm_eval run --model hf --model_args pretrained=<dir>,trust_remote_code=True`, lm-eval's own
    command in a process that never imported the project, against the task's metrics computed here
    from the model's log-probabilities."""
    import math

    import datasets

    from common.data.tokenizer import load_tokenizer
    from common.eval.story_tasks import write_story_tasks

    tokenizer = load_tokenizer(smoke_data["tokenizer"])
    # lm-eval's `hf` model refuses a continuation longer than the window; a story's line can pass 64 tokens.
    model = random_model(LMConfig(vocab_size=len(tokenizer), d_model=32, pattern="mamba,attn", n_ctx=256,
                                  blocks={"attn": {"n_heads": 2}}))
    save_pretrained(model, tmp_path / "m", tokenizer=tokenizer)
    stories = list(datasets.load_from_disk(str(smoke_data["stories"]))["validation"])
    names = write_story_tasks(stories, tmp_path / "tasks", n=6, seed=0)
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HUB_OFFLINE": "1"}
    cli = subprocess.run([sys.executable, "-m", "lm_eval", "run", "--model", "hf",
                          "--model_args", f"pretrained={tmp_path / 'm'},trust_remote_code=True,dtype=float32",
                          "--tasks", *names, "--include_path", str(tmp_path / "tasks"), "--device", "cpu",
                          "--output_path", str(tmp_path / "out"), "--batch_size", "1", "--seed", "0"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert cli.returncode == 0, cli.stderr[-3000:]
    (results_file,) = (tmp_path / "out").rglob("results_*.json")
    got = json.loads(results_file.read_text())["results"]

    cloze = [json.loads(line) for line in (tmp_path / "tasks" / "stories_cloze.jsonl").read_text().splitlines()]
    scored = [loglikelihood_as_hf_scores_it(model, tokenizer, d["context"], d["target"]) for d in cloze]
    assert got["stories_cloze"]["perplexity,none"] == pytest.approx(math.exp(-sum(s for s, _ in scored) / len(scored)),
                                                                    rel=1e-5)
    assert got["stories_cloze"]["acc,none"] == pytest.approx(sum(g for _, g in scored) / len(scored))

    items = [json.loads(line) for line in (tmp_path / "tasks" / "stories_next_line.jsonl").read_text().splitlines()]
    right = right_norm = 0
    for item in items:
        scores = [loglikelihood_as_hf_scores_it(model, tokenizer, item["context"], c)[0] for c in item["choices"]]
        normed = [s / len(c) for s, c in zip(scores, item["choices"])]
        right += scores.index(max(scores)) == item["label"]
        right_norm += normed.index(max(normed)) == item["label"]
    assert got["stories_next_line"]["acc,none"] == pytest.approx(right / len(items))
    assert got["stories_next_line"]["acc_norm,none"] == pytest.approx(right_norm / len(items))
