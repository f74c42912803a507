"""The lm-eval adapter against scoring written out here, and the story tasks through the harness."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from lm_eval.api.instance import Instance

from common.eval.lm_eval_adapter import LanguageModelEval, evaluate
from common.eval.story_tasks import CHOICES, write_story_tasks
from common.models.lm import LanguageModel, LMConfig

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tokenizer(smoke_data):
    from common.data.tokenizer import load_tokenizer

    return load_tokenizer(smoke_data["tokenizer"])


@pytest.fixture(scope="module")
def model(tokenizer):
    torch.manual_seed(0)
    return LanguageModel(LMConfig(vocab_size=len(tokenizer), d_model=32, pattern="mamba,attn", repeat=1, n_ctx=64,
                                  blocks={"attn": {"n_heads": 2}})).eval()


def request(kind, *args):
    return Instance(request_type=kind, doc={}, arguments=args, idx=0)


def by_hand(model, tokenizer, context: str, continuation: str) -> tuple[float, bool]:
    ctx = [tokenizer.eos_token_id] + tokenizer.encode(context, add_special_tokens=False)
    cont = tokenizer.encode(continuation, add_special_tokens=False)
    ids = torch.tensor([ctx + cont])
    with torch.no_grad():
        logprobs = F.log_softmax(model(ids)[0].double(), dim=-1)
    total, greedy = 0.0, True
    for i, token in enumerate(cont):
        row = logprobs[len(ctx) - 1 + i]
        total += row[token].item()
        greedy &= int(row.argmax()) == token
    return total, greedy


def test_loglikelihood_matches_scoring_by_hand(model, tokenizer):
    pairs = [("Once upon a time, a little", " fox"), ("Tom went to the", " park and played."), ("The", " end")]
    answers = LanguageModelEval(model, tokenizer).loglikelihood([request("loglikelihood", *p) for p in pairs])
    for (context, continuation), (logprob, greedy) in zip(pairs, answers):
        expected, expected_greedy = by_hand(model, tokenizer, context, continuation)
        assert logprob == pytest.approx(expected, abs=1e-4)
        assert greedy == expected_greedy


def test_a_greedy_continuation_is_reported_as_greedy(model, tokenizer):
    adapter = LanguageModelEval(model, tokenizer)
    context = [tokenizer.eos_token_id] + tokenizer.encode("Lily saw a", add_special_tokens=False)
    new = model.generate(torch.tensor([context]), max_new_tokens=4)[0, len(context):].tolist()
    assert adapter._score(context, new)[1]
    assert not adapter._score(context, new[:-1] + [(new[-1] + 1) % len(tokenizer)])[1]


def test_rolling_loglikelihood_scores_every_token_once(model, tokenizer):
    """Each token is scored once, conditioned on as many previous tokens as fit in n_ctx."""
    text = "one two three four five six seven eight nine ten " * 8
    ids = tokenizer.encode(text, add_special_tokens=False)
    n_ctx = model.cfg.n_ctx
    assert len(ids) > n_ctx  # several windows
    full = [tokenizer.eos_token_id] + ids
    expected = 0.0
    with torch.no_grad():
        for start in range(0, len(ids), n_ctx):
            n = min(n_ctx, len(ids) - start)
            seq = full[max(0, start + n - n_ctx):start + n + 1]  # n_ctx inputs (fewer at the start), +1 target
            logprobs = F.log_softmax(model(torch.tensor([seq[:-1]]))[0].double(), dim=-1)
            for k in range(n):
                position = start + k  # ids[position] is predicted from full[:position + 1]
                row = position - max(0, start + n - n_ctx)
                expected += logprobs[row, ids[position]].item()
    (got,) = LanguageModelEval(model, tokenizer).loglikelihood_rolling([request("loglikelihood_rolling", text)])
    assert got == pytest.approx(expected, abs=1e-3)


def test_generate_until_is_greedy_decoding_cut_at_the_stop_string(model, tokenizer):
    context = "The dog"
    ids = torch.tensor([[tokenizer.eos_token_id] + tokenizer.encode(context, add_special_tokens=False)])
    full = tokenizer.decode(model.generate(ids, max_new_tokens=12)[0, ids.shape[1]:].tolist())
    stop = full[len(full) // 2:len(full) // 2 + 2] or "\n"
    (text,) = LanguageModelEval(model, tokenizer).generate_until(
        [request("generate_until", context, {"until": [stop], "max_gen_toks": 12})])
    assert text == full[:full.index(stop)] if stop in full else full


@pytest.mark.pipeline
def test_story_tasks_are_well_formed_and_run_through_the_harness(model, tokenizer, smoke_data, tmp_path):
    import datasets

    stories = list(datasets.load_from_disk(str(smoke_data["stories"]))["validation"])
    names = write_story_tasks(stories, tmp_path / "tasks", n=6, seed=0)
    for line in (tmp_path / "tasks" / "stories_next_line.jsonl").read_text().splitlines():
        item = json.loads(line)
        assert len(item["choices"]) == len(set(item["choices"])) == CHOICES
        truth = item["choices"][item["label"]]
        story = next(s for s in stories if s["text"].startswith(item["context"]))
        assert story["text"][len(item["context"]):].split("\n")[0] == truth
    for line in (tmp_path / "tasks" / "stories_cloze.jsonl").read_text().splitlines():
        item = json.loads(line)
        story = next(s for s in stories if s["text"].startswith(item["context"] + item["target"]))
        assert item["target"] == " " + story["hero"]
    results = evaluate(LanguageModelEval(model, tokenizer), names, include_path=tmp_path / "tasks")["results"]
    assert results["stories_cloze"]["sample_len"] == 6 and 0 <= results["stories_next_line"]["acc,none"] <= 1


def test_the_harness_finds_the_registered_model(model, tokenizer, tmp_path, smoke_data):
    from lm_eval.api.registry import get_model

    from common.models.lm import save_language_model

    save_language_model(model, tmp_path / "m")
    adapter = get_model("hybrid-lm").create_from_arg_string(
        f"model={tmp_path / 'm'},tokenizer={smoke_data['tokenizer']}")
    (logprob, _), = adapter.loglikelihood([request("loglikelihood", "The cat", " sat")])
    assert logprob == pytest.approx(by_hand(model, tokenizer, "The cat", " sat")[0], abs=1e-4)


def test_model_args_name_what_is_wrong(smoke_data):
    from lm_eval.api.registry import get_model

    from common.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^hybrid-lm model_args: unknown pretrained; missing model; allowed: "):
        get_model("hybrid-lm").create_from_arg_obj({"pretrained": "x", "tokenizer": str(smoke_data["tokenizer"])})


@pytest.mark.parametrize("raised, expected", [
    ("Tasks not found: piqa_typo, arc", "--tasks: piqa_typo, arc: not lm-eval tasks; list them with "),
    ("some other harness error", None)])
def test_the_cli_names_misspelt_tasks_in_one_line(raised, expected, monkeypatch, capsys):
    """The harness's own error for unknown task names is the user's input; any other error is not."""
    import lm_eval.__main__

    from common.eval import lm_eval_cli

    def harness():
        raise ValueError(raised)

    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", harness)
    if expected is None:
        with pytest.raises(ValueError, match=raised):
            lm_eval_cli.main()
        return
    with pytest.raises(SystemExit) as stop:
        lm_eval_cli.main()
    assert stop.value.code == 2 and capsys.readouterr().err.strip().endswith(
        expected + "`python -m common.eval.lm_eval_cli ls tasks`")


@pytest.mark.slow
def test_the_harness_cli_refuses_a_misspelt_task_in_one_line(tmp_path):
    cli = subprocess.run([sys.executable, "-m", "common.eval.lm_eval_cli", "run", "--model", "hybrid-lm",
                          "--model_args", "model=x,tokenizer=y", "--tasks", "piqa_typo"],
                         capture_output=True, text=True, timeout=600)
    assert cli.returncode == 2 and "--tasks: piqa_typo: not lm-eval tasks" in cli.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_the_harness_cli_scores_local_tasks_as_the_python_api_does(model, tokenizer, smoke_data, tmp_path):
    """`python -m common.eval.lm_eval_cli run --model hybrid-lm ...` as the README writes it, against
    `evaluate` in this process on the same saved model and tasks."""
    import datasets

    from common.models.lm import save_language_model

    stories = list(datasets.load_from_disk(str(smoke_data["stories"]))["validation"])
    names = write_story_tasks(stories, tmp_path / "tasks", n=6, seed=0)
    save_language_model(model, tmp_path / "m")
    cli = subprocess.run([sys.executable, "-m", "common.eval.lm_eval_cli", "run", "--model", "hybrid-lm",
                          "--model_args", f"model={tmp_path / 'm'},tokenizer={smoke_data['tokenizer']}",
                          "--tasks", *names, "--include_path", str(tmp_path / "tasks"),
                          "--output_path", str(tmp_path / "out"), "--batch_size", "4", "--seed", "0"],
                         capture_output=True, text=True, timeout=600)
    assert cli.returncode == 0, cli.stderr[-3000:]
    (results_file,) = (tmp_path / "out").rglob("results_*.json")
    from_cli = json.loads(results_file.read_text())["results"]
    from_api = evaluate(LanguageModelEval(model, tokenizer), names, include_path=tmp_path / "tasks")["results"]
    for name in names:
        numbers = {k: v for k, v in from_api[name].items() if isinstance(v, float) and "stderr" not in k}
        assert numbers, from_api[name]
        assert {k: from_cli[name][k] for k in numbers} == pytest.approx(numbers, abs=1e-6)


@pytest.mark.slow
def test_the_paper_tasks_read_their_standins(model, tokenizer, tmp_path, monkeypatch):
    """With HYBRID_STANDINS set, the harness's own downloads of the `paper` tasks read the stand-ins:
    every task scores exactly the stand-in's documents, in the split its task file names."""
    from rehearsal.standins import HARNESS_ROWS, write_standins

    tasks = {"piqa": "baber/piqa/default", "lambada_openai": "EleutherAI/lambada_openai/default",
             "winogrande": "allenai/winogrande/winogrande_xl", "hellaswag": "Rowan/hellaswag/default",
             "arc_challenge": "allenai/ai2_arc/ARC-Challenge", "openbookqa": "allenai/openbookqa/main"}
    write_standins(tmp_path, only=set(tasks.values()))
    monkeypatch.setenv("HYBRID_STANDINS", str(tmp_path))
    results = evaluate(LanguageModelEval(model, tokenizer), list(tasks))
    for task in tasks:
        assert results["n-samples"][task]["effective"] == HARNESS_ROWS
        assert 0.0 <= results["results"][task]["acc,none"] <= 1.0


def test_a_missing_harness_standin_is_one_error(tmp_path, monkeypatch):
    """A stand-in directory without the task's data set is one error naming the file it expected."""
    from common.errors import DataError
    from common.standins import harness_datasets

    monkeypatch.setenv("HYBRID_STANDINS", str(tmp_path))
    import datasets

    with harness_datasets(), pytest.raises(DataError, match="baber/piqa.*default"):
        datasets.load_dataset(path="baber/piqa", name=None)
