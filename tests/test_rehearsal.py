"""The `paper` rehearsal's parts: Hub stand-ins, the cut configs, and the stand-in switch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from common.config import PROFILES, deep_merge
from common.data.hub import HUB_CLASSIFICATION_SOURCES, HUB_SOURCES, load_hub_classification, load_hub_text
from common.errors import DataError
from common.standins import ENV, dataset_file, model_source
from rehearsal import profile
from rehearsal.profile import rehearsal_params
from rehearsal.standins import GPT2_SPECIALS, LLAMA3_CHAT, LLAMA3_SPECIALS, NEOX_SPECIALS, standin_tokenizer
from tests.conftest import ROOT

pytestmark = pytest.mark.pipeline  # end to end: `make test-pipeline`

PARAMS_FILES = ["params.yaml", *sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("papers/*/params.yaml"))]


# --- the stand-in switch --------------------------------------------------------------------

def test_without_standins_hub_ids_pass_through(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert model_source("EleutherAI/gpt-neo-125m") == "EleutherAI/gpt-neo-125m"
    assert dataset_file("tinystories", "train") is None


def test_a_missing_standin_is_an_error_not_the_hub(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV, str(tmp_path))
    with pytest.raises(DataError, match="no stand-in for EleutherAI/gpt-neo-125m"):
        model_source("EleutherAI/gpt-neo-125m")
    with pytest.raises(DataError, match="no stand-in for the ptb data set's train split"):
        load_hub_text("ptb", "train")
    assert model_source(str(tmp_path)) == str(tmp_path)  # a local directory is used as it is
    monkeypatch.setenv(ENV, str(tmp_path / "absent"))
    with pytest.raises(DataError, match="not a directory"):
        dataset_file("ptb", "train")


# --- data set stand-ins ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def standin_root(tmp_path_factory):
    from rehearsal.standins import write_standins
    root = tmp_path_factory.mktemp("standins")
    write_standins(root, only=set(HUB_SOURCES) | set(HUB_CLASSIFICATION_SOURCES))
    return root


@pytest.mark.parametrize("name", sorted(HUB_SOURCES))
def test_every_hub_text_source_has_a_standin_in_its_schema(name, standin_root, monkeypatch):
    monkeypatch.setenv(ENV, str(standin_root))
    # The loader checks the Hub schema's columns; rows must come out as non-empty text.
    for split in HUB_SOURCES[name].splits:
        texts = load_hub_text(name, split, limit=5)["text"]
        assert len(texts) == 5 and all(t.strip() for t in texts)


@pytest.mark.parametrize("name", sorted(HUB_CLASSIFICATION_SOURCES))
def test_every_hub_classification_source_has_a_standin_in_its_schema(name, standin_root, monkeypatch):
    monkeypatch.setenv(ENV, str(standin_root))
    source = HUB_CLASSIFICATION_SOURCES[name]
    for split in source.splits:
        rows = load_hub_classification(name, split, limit=8)
        assert len(rows) == 8
        assert all(0 <= i < source.vocab_size for row in rows["input_ids"] for i in row)
        assert {*rows["label"]} <= set(range(source.num_classes))
    if name == "cifar10":  # every image is 32 x 32 pixels
        assert {len(row) for row in rows["input_ids"]} == {1024}


# --- tokenizers of the real length and special ids ------------------------------------------

@pytest.mark.parametrize("length, specials, kwargs", [
    (50257, GPT2_SPECIALS, {"bos": "<|endoftext|>", "eos": "<|endoftext|>"}),
    (50277, NEOX_SPECIALS, {"bos": "<|endoftext|>", "eos": "<|endoftext|>", "pad": "<|padding|>"}),
    (128256, LLAMA3_SPECIALS, {"bos": "<|begin_of_text|>", "eos": "<|eot_id|>", "add_bos": True,
                               "chat_template": LLAMA3_CHAT}),
])
def test_standin_tokenizers_have_the_real_length_and_special_ids(length, specials, kwargs):
    tokenizer = standin_tokenizer(length, specials, seed=0, **kwargs)
    assert len(tokenizer) == length
    assert sorted(tokenizer.get_vocab().values()) == list(range(length))
    for i, token in specials.items():
        assert tokenizer.convert_tokens_to_ids(token) == i
    text = "Once upon a time, Mia found 3 shells.\nShe smiled!"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text  # byte-level: any text round-trips
    assert len(ids) < len(text.encode())  # merges were learned
    first = tokenizer(text)["input_ids"][0]
    assert (first == tokenizer.bos_token_id) == kwargs.get("add_bos", False)
    if "chat_template" in kwargs:
        rendered = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                                 add_generation_prompt=True)
        assert rendered == ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                            "<|start_header_id|>assistant<|end_header_id|>\n\n")


def test_shallower_standins_keep_every_real_setting_but_depth():
    """A stand-in cut in depth (one that cannot train in 24 GiB) differs from the real config in its
    layer count only; the readiness tables count the real depth."""
    from rehearsal.standins import CHECKPOINTS

    cut = [c for c in CHECKPOINTS.values() if c.standin_layers is not None]
    assert {c.hub_id for c in cut} == {"EleutherAI/pythia-410m", "state-spaces/mamba-370m-hf"}
    for checkpoint in cut:
        with torch.device("meta"):
            real, standin = checkpoint.build().config.to_dict(), checkpoint.build_standin().config.to_dict()
        assert standin["num_hidden_layers"] == checkpoint.standin_layers < real["num_hidden_layers"]
        assert {k: v for k, v in standin.items() if k != "num_hidden_layers"} == \
            {k: v for k, v in real.items() if k != "num_hidden_layers"}


# --- the cut configs ------------------------------------------------------------------------

def _paper_sections(params: dict) -> dict[str, dict]:
    return {name: deep_merge(block.get("base") or {}, block.get("paper") or {})
            for name, block in params.items()
            if isinstance(block, dict) and set(block) <= {"base", *PROFILES} and "paper" in block}


def _walk(value, path=()):
    """(path, leaf) for every leaf of a nested mapping; lists are leaves."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, (*path, k))
    else:
        yield path, value


CUT_KEYS = (profile.STEP_KEYS | profile.EVERY_STEP_KEYS | profile.ONE_KEYS | profile.ROW_KEYS | profile.TOKEN_KEYS
            | profile.ENDS_AND_MIDDLE_KEYS | profile.FIRST_KEYS | profile.FIRST_TWO_KEYS | profile.LAST_KEYS
            | profile.EVAL_EXAMPLE_KEYS | profile.GENERATED_ROW_KEYS | {"budgets", "landscape"})


def _without_mad_example_cuts(section: dict) -> dict:
    """`section` less the example counts the rehearsal adds to a MAD section's task_overrides (an
    emptied mapping has no leaves)."""
    if "task_overrides" not in section:
        return section
    return {**section, "task_overrides": {task: {k: v for k, v in values.items() if k not in profile.MAD_EXAMPLE_KEYS}
                                          for task, values in section["task_overrides"].items()}}


@pytest.mark.parametrize("params_file", PARAMS_FILES)
def test_rehearsal_keeps_every_paper_shape_and_cuts_only_run_lengths(params_file):
    params = yaml.safe_load((ROOT / params_file).read_text())
    before = _paper_sections(params)
    after = _paper_sections(rehearsal_params(params))
    assert before.keys() == after.keys()
    for name in before:
        old_leaves, new_leaves = list(_walk(before[name])), list(_walk(_without_mad_example_cuts(after[name])))
        assert [p for p, _ in old_leaves] == [p for p, _ in new_leaves], name
        for (path, a), (_, b) in zip(old_leaves, new_leaves):
            key = path[-1]
            if key not in CUT_KEYS and "budgets" not in path:
                assert a == b, f"{params_file}: {name}.{'.'.join(path)} changed from {a!r} to {b!r}"
            elif key in profile.STEP_KEYS and isinstance(b, int):
                assert b <= profile.STEPS
            elif key in profile.ROW_KEYS and isinstance(b, int):
                assert b <= (profile.CORPUS_ROWS if name in profile.CORPUS_SECTIONS else profile.ROWS)
            elif key == "seeds" and b is not None:
                assert len(b) == 1
            if "budgets" in path:  # a list of steps, or a list per task (lra_sizing)
                assert max(b) <= profile.STEPS + 1, f"{params_file}: {name}.{'.'.join(path)} = {b}"
    if "profile" in params:
        assert rehearsal_params(params)["profile"] == "paper"
    batches = [(path, b) for section in _paper_sections(rehearsal_params(params, batch_rows=2)).values()
               for path, b in _walk(section) if path[-1] == "batch_size"]
    assert all(b is None or b <= 2 for _, b in batches)
    held_out = [(name, b) for name, section in _paper_sections(rehearsal_params(params, batch_rows=2)).items()
                if name not in profile.CORPUS_SECTIONS
                for path, b in _walk(section) if path[-1] in profile.EVAL_ROW_KEYS | profile.EVAL_EXAMPLE_KEYS]
    assert all(b <= profile.EVAL_BATCHES * 2 for _, b in held_out)
    cut = _paper_sections(rehearsal_params(params, precision="32-true")).values()
    precisions = [(path, b) for section in cut for path, b in _walk(section) if path[-1] == "precision"]
    assert all(b == "32-true" for _, b in precisions)


@pytest.mark.parametrize("params_file", [f for f in PARAMS_FILES if "settings:" in (ROOT / f).read_text()])
def test_rehearsal_cuts_the_example_counts_of_every_mad_task(params_file):
    """MAD example counts live in code (common.data.mad.SETTINGS), so a cut by key name cannot see
    them: every paper MAD run scored all 1,280 test rows, most of mad_experiments' 27 minutes."""
    from common.data.mad import MADSelection

    params = rehearsal_params(yaml.safe_load((ROOT / params_file).read_text()), batch_rows=2)
    mad_sections = {name: s for name, s in _paper_sections(params).items() if "settings" in s}
    assert mad_sections
    for name, section in mad_sections.items():
        tasks = MADSelection(section["settings"], section.get("overrides") or {},
                             section.get("task_overrides") or {}).tasks()
        assert len(tasks) == len(section["settings"]), name
        for entry, task in tasks.items():
            assert task.num_test_examples <= profile.EVAL_BATCHES * 2, (name, entry)
            assert task.num_train_examples <= profile.ROWS, (name, entry)
        paper = _paper_sections(yaml.safe_load((ROOT / params_file).read_text()))[name]
        for task, values in (paper.get("task_overrides") or {}).items():  # the section's own survive the cut
            for key, value in values.items():
                if key not in profile.MAD_EXAMPLE_KEYS:
                    assert section["task_overrides"][task][key] == value


def test_rehearsal_cuts_the_retrieval_pools_to_the_largest_candidate_count():
    """Every row of retrieval's pools is embedded by each source model at full width (about 6
    minutes a source at 256 rows); the pools need only hold the largest candidate count."""
    section = _paper_sections(rehearsal_params(yaml.safe_load((ROOT / "papers/masked_mixers/params.yaml").read_text()),
                                               batch_rows=2))["retrieval"]
    assert section["n_train"] == section["n_test"] == max(section["candidates"])


def test_rehearsal_runs_the_landscape_once_and_every_task():
    """finetune_tasks at paper runs the whole landscape on five sets (69 of the Manticore rehearsal's
    123 minutes); one runs every path of it, and every set's data, mixed with Alpaca or not, still loads."""
    params = yaml.safe_load((ROOT / "papers/manticore/params.yaml").read_text())
    paper = _paper_sections(params)["finetune_tasks"]["tasks"]
    cut = _paper_sections(rehearsal_params(params))["finetune_tasks"]["tasks"]
    assert list(cut) == list(paper), "every task still runs"
    assert [name for name, task in cut.items() if task.get("landscape")] == ["es_alpaca"]
    assert {name for name, task in paper.items() if task.get("landscape")} >= {"zh_alpaca", "xquad_ar", "openorca_ja"}
    assert {task.get("mix_with") is not None for task in cut.values()} == {True, False}


def test_rehearsal_sizing_budgets_train_runs_of_their_own():
    """mad_sizing refuses a budget equal to the tables' (their own runs, which it does not train
    twice): the cut budgets stopped a rehearsal half an hour in."""
    params = _paper_sections(rehearsal_params(yaml.safe_load((ROOT / "papers/manticore/params.yaml").read_text())))
    tables = params["mad_tasks"]["trainer"]["max_steps"]
    assert params["mad_sizing"]["budgets"] and tables not in params["mad_sizing"]["budgets"]
    assert all(tables_budget not in budgets for budgets in params["lra_sizing"]["budgets"].values()
               for tables_budget in [params["lra_tasks"]["trainer"]["max_steps"]])
    assert params["projector_budget"]["budgets"] == [0, profile.STEPS]


def test_every_rehearsal_config_builds_its_stage_config(tmp_path):
    """The cut `paper` blocks pass every stage's own checks (mad_sizing refused its cut budgets, which
    were shorter than its validations, an hour into a rehearsal)."""
    from tests.test_config import validate_params_files

    for name in PARAMS_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        params = rehearsal_params(yaml.safe_load((ROOT / name).read_text()), batch_rows=2, precision="32-true")
        (tmp_path / name).write_text(yaml.safe_dump(params))
    validate_params_files(tmp_path)


def test_rehearsal_rows_fit_every_paper_batch_and_every_standin():
    from rehearsal.standins import N_ROWS
    batches = [v for f in PARAMS_FILES for section in _paper_sections(yaml.safe_load((ROOT / f).read_text())).values()
               for path, v in _walk(section) if path[-1] == "batch_size" and isinstance(v, int)]
    assert max(batches) <= profile.ROWS <= profile.CORPUS_ROWS <= N_ROWS


def test_the_rehearsal_corpus_holds_what_the_specialists_draw_from_it():
    """The specialists stage draws its held-out stories and its training stories from the corpus's
    validation split: the rehearsal's cut corpus must hold both (it did not, at ROWS for all)."""
    from papers.manticore.specialists import SpecialistsConfig

    root = _paper_sections(rehearsal_params(yaml.safe_load((ROOT / "params.yaml").read_text())))
    manticore = _paper_sections(rehearsal_params(yaml.safe_load((ROOT / "papers/manticore/params.yaml").read_text())))
    cfg = SpecialistsConfig(**{k: v for k, v in manticore["specialists"].items()
                               if k in ("n_train", "n_validation", "fraction_instructions")})
    need = cfg.n_validation + cfg.n_train - round(cfg.n_train * cfg.fraction_instructions)
    assert need <= root["stories"]["n_validation"]


# --- the runner ------------------------------------------------------------------------------

@pytest.mark.slow
def test_root_pipeline_rehearses_at_paper_shapes(tmp_path):
    out = tmp_path / "rehearsal.json"
    command = [sys.executable, "-m", "rehearsal.run", "--pipelines", "root", "--work", str(tmp_path / "work"),
               "--standins", str(tmp_path / "standins"), "--out", str(out), "--no-readiness"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    records = json.loads(out.read_text())
    stages = list(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"])
    assert [r["stage"] for r in records] == stages
    assert all(r["rc"] == 0 for r in records)
    # at the paper's shapes: its tokenizer's full vocabulary (from params) and the model's window
    baseline = json.loads((tmp_path / "work/results/lm_baseline.json").read_text())
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    paper = {s: deep_merge(params[s]["base"], params[s]["paper"]) for s in ("tokenizer", "tokenize")}
    assert baseline["profile"] == "paper"
    assert baseline["vocab_size"] == paper["tokenizer"]["vocab_size"]
    assert baseline["n_ctx"] == paper["tokenize"]["packed_n_ctx"]

    # One stage again, on the stories and tokenizer the first rehearsal left: only its record is replaced.
    result = subprocess.run([*command, "--stages", "tokenize", "--keep-outputs"], cwd=ROOT, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    again = json.loads(out.read_text())
    assert sorted(r["stage"] for r in again) == sorted(stages)
    assert [r for r in again if r["stage"] != "tokenize"] == [r for r in records if r["stage"] != "tokenize"]


def test_a_stage_rehearsed_again_runs_again(tmp_path):
    """DVC skips a stage whose run it has seen ("cached - skipping run"): a rehearsal with
    --keep-outputs recorded the root data stages as passed in under 2 s without running them."""
    from rehearsal.run import run_stage

    work, logs = tmp_path / "work", tmp_path / "logs"
    work.mkdir(), logs.mkdir()
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=work, check=True)
    (work / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"write": {
        "cmd": "python -c \"open('ran', 'a').write('x'); open('out.txt', 'w').write('same')\"",
        "outs": ["out.txt"]}}}))
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    for _ in range(2):
        assert run_stage(work, "write", env, logs)["rc"] == 0
    assert (work / "ran").read_text() == "xx"


def test_without_dvc_a_stage_runs_its_cmd_in_its_wdir_and_fails_on_a_missing_output(tmp_path):
    """--without-dvc replaces `dvc repro` on machines without DVC: it must run what DVC would run,
    where DVC would run it, and fail a stage as DVC does when a declared output is not written."""
    from rehearsal.run import run_stage, stage_command

    work, logs = tmp_path / "work", tmp_path / "logs"
    (work / "papers/p").mkdir(parents=True), logs.mkdir()
    (work / "papers/p/dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "writes": {"cmd": ["python -c \"open('a.txt', 'w').write('a')\"", "python -c \"open('b.txt', 'w')\""],
                   "wdir": "../..", "outs": ["a.txt"], "metrics": [{"b.txt": {"cache": False}}]},
        "forgets": {"cmd": "python -c \"open('a.txt', 'w')\"", "wdir": "../..", "outs": ["c.txt"]},
        "templated": {"cmd": "python -m x --n ${n}", "outs": ["d.txt"]}}}))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    assert run_stage(work, "papers/p/dvc.yaml:writes", env, logs, without_dvc=True)["rc"] == 0
    assert (work / "a.txt").read_text() == "a" and (work / "b.txt").is_file()  # at the wdir, every command
    record = run_stage(work, "papers/p/dvc.yaml:forgets", env, logs, without_dvc=True)
    assert record["rc"] == 1
    assert record["log_tail"][-1] == "declared outputs not written: c.txt"
    with pytest.raises(ValueError, match="interpolation"):
        stage_command(work, "papers/p/dvc.yaml:templated")


def test_the_rehearsal_never_copies_over_what_a_stage_wrote_but_the_readmes():
    from rehearsal.run import kept_outputs, stage_outputs

    written, kept = stage_outputs(ROOT), kept_outputs(ROOT)
    assert {Path("results/lm_baseline.json"), Path("data/tokenized"), Path("papers/blackmamba/results/table1.json"),
            Path("papers/masked_mixers/results/clm.json")} <= kept
    assert not {Path("params.yaml"), Path("papers/manticore/params.yaml"), Path("common")} & written
    # A report rewrites its README's generated blocks: a kept old README lacks those of new stages.
    assert Path("papers/manticore/README.md") in written - kept


def test_a_stage_the_pipelines_do_not_have_is_refused(tmp_path):
    result = subprocess.run([sys.executable, "-m", "rehearsal.run", "--pipelines", "blackmamba", "--stages", "tabel1",
                             "--work", str(tmp_path / "work")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2
    assert "--stages: tabel1 is not a stage of blackmamba" in result.stderr
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize("flag", ["--work", "--standins"])
def test_a_directory_the_rehearsal_did_not_write_is_never_deleted(flag, tmp_path):
    """The runner deletes and rewrites its work copy and stand-ins: a directory that is not one of
    them (a typo, or `.`, the checkout itself) is refused before anything is touched."""
    victim = tmp_path / "thesis"
    (victim / "chapters").mkdir(parents=True)
    (victim / "chapters" / "one.tex").write_text("months of work")
    other = "--standins" if flag == "--work" else "--work"
    result = subprocess.run([sys.executable, "-m", "rehearsal.run", "--pipelines", "root", flag, str(victim),
                             other, str(tmp_path / "fresh"), "--out", str(tmp_path / "records.json")],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"{flag} {victim}: a directory this runner did not write" in result.stderr
    assert (victim / "chapters" / "one.tex").read_text() == "months of work"
    assert not (tmp_path / "fresh").exists() and not (tmp_path / "records.json").exists()


def test_the_checkout_and_its_parents_are_never_the_rehearsals_to_delete(tmp_path):
    # Checked on the function: a regression in a run would delete the checkout itself.
    from rehearsal.run import WORK_MARKERS, not_ours

    assert not_ours(ROOT, WORK_MARKERS) == not_ours(ROOT.parent, WORK_MARKERS) == "it holds this checkout"
    assert not_ours(tmp_path / "new", WORK_MARKERS) is None and not_ours(tmp_path, WORK_MARKERS) is None
    (tmp_path / "rehearsal_logs").mkdir()
    (tmp_path / "params.yaml").write_text("")
    assert not_ours(tmp_path, WORK_MARKERS) is None, "an earlier rehearsal's work copy"


@pytest.mark.parametrize("args, expected", [(["--seed", "-1"], "--seed -1: allowed 0 to 4294967295"),
                                            (["--out", "FILE"], "is a file, not a directory")])
def test_standins_refuse_a_bad_seed_or_an_output_under_a_file(args, expected, tmp_path, capsys):
    from rehearsal.standins import main

    (tmp_path / "file").write_text("")
    argv = ["--out", str(tmp_path / "out"), "--only", "ptb", *args]
    argv = [str(tmp_path / "file") if a == "FILE" else a for a in argv]
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2 and expected in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_rehearsal_searches_with_every_method_and_runs_every_update_rule_somewhere():
    """Searches run with the first update rule only; every method the paper searches with still
    runs, and each update rule the paper uses still runs in some stage of the pipeline."""
    params = yaml.safe_load((ROOT / "papers/manticore/params.yaml").read_text())

    def used(sections: dict, key: str) -> set[str]:
        return {v for section in sections.values() for path, leaf in _walk(section)
                if path[-1] == key for v in ([leaf] if isinstance(leaf, str) else leaf)}

    paper, cut = _paper_sections(params), _paper_sections(rehearsal_params(params))
    assert len(paper["specialists"]["pairs"]["specialists"]["updates"]) == 2
    assert cut["specialists"]["pairs"]["specialists"]["updates"] == ["alternating"]
    assert used(cut, "methods") == used(paper, "methods") == {"darts", "dash", "gaea"}
    assert used(cut, "updates") | used(cut, "update") == {"alternating", "simultaneous"}
