"""Each user mistake gives one line on stderr, exit status 2, and leaves no output behind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from common.stages import generate_stories, lm_baseline
from tests.conftest import ROOT, report_argv, run_module, smoke_params, write_params


def outputs(tmp_path):
    return {"run": tmp_path / "out" / "run", "metrics": tmp_path / "out" / "metrics.json",
            "plot": tmp_path / "out" / "loss.png"}


def run_baseline(tmp_path, params, data, tokenizer):
    out = outputs(tmp_path)
    return lm_baseline.main(["--params", str(params), "--data", str(data), "--tokenizer", str(tokenizer),
                             "--run-dir", str(out["run"]), "--metrics", str(out["metrics"]),
                             "--plot", str(out["plot"])])


def assert_one_line_exit(capsys, excinfo, expected):
    assert excinfo.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0] == err[-1], err
    assert expected in errors[0], errors[0]


def assert_nothing_written(tmp_path):
    for path in outputs(tmp_path).values():
        assert not path.exists(), path
    leftovers = list((tmp_path / "out").glob("*")) if (tmp_path / "out").exists() else []
    assert leftovers == []


BAD_PARAMS = {
    "malformed_yaml": ("profile: smoke\nlm_baseline: {base: {seed: 0}\n", "malformed YAML"),
    "unknown_key": ({"lm_baseline.trainer.max_stepz": 5},
                    "lm_baseline.smoke.trainer.max_stepz: unknown key; allowed: accelerator,"),
    "negative_batch_size": ({"lm_baseline.data.batch_size": -8},
                            "lm_baseline.smoke.data.batch_size: must be >= 1, got -8"),
    "wrong_type": ({"lm_baseline.optim.lr": "fast"}, "lm_baseline.smoke.optim.lr: expected a number, got str 'fast'"),
    "bad_choice": ({"lm_baseline.optim.schedule": "step"},
                   "lm_baseline.smoke.optim.schedule: 'step' is not allowed; allowed: cosine, linear, constant"),
    "impossible_heads": ({"lm_baseline.model.n_heads": 3}, "lm_baseline.smoke.model.n_heads: must divide d_model=32"),
    "profile_block_not_a_mapping": ("profile: smoke\nlm_baseline: {smoke: oops}\n",
                                    "lm_baseline.smoke: expected a mapping of settings, got str 'oops'"),
    "accelerator_typo": ({"lm_baseline.trainer.accelerator": "gpux"},
                         "lm_baseline.smoke.trainer.accelerator: 'gpux' is not one of auto, gpu,"),
    "precision_typo": ({"lm_baseline.trainer.precision": "fp17"},
                       "lm_baseline.smoke.trainer.precision: 'fp17' is not one of"),
    "no_devices": ({"lm_baseline.trainer.devices": 0}, "lm_baseline.smoke.trainer.devices: a count of at least 1"),
}


@pytest.mark.parametrize("case", sorted(BAD_PARAMS))
def test_bad_params(case, smoke_data, tmp_path, capsys):
    spec, expected = BAD_PARAMS[case]
    params = tmp_path / "params.yaml"
    if isinstance(spec, str):
        params.write_text(spec)
    else:
        write_params(params, smoke_params(**spec))
    with pytest.raises(SystemExit) as excinfo:
        run_baseline(tmp_path, params, smoke_data["tokenized"] / "packed", smoke_data["tokenizer"])
    assert_one_line_exit(capsys, excinfo, expected)
    assert_nothing_written(tmp_path)


def test_missing_data_directory(smoke_data, tmp_path, capsys):
    with pytest.raises(SystemExit) as excinfo:
        run_baseline(tmp_path, smoke_data["params"], tmp_path / "no_such_dir", smoke_data["tokenizer"])
    assert_one_line_exit(capsys, excinfo, "no_such_dir: data directory not found")
    assert_nothing_written(tmp_path)


def test_corrupted_arrow_file(smoke_data, tmp_path, capsys):
    data = tmp_path / "packed"
    shutil.copytree(smoke_data["tokenized"] / "packed", data)
    arrow = next((data / "train").glob("*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])  # a truncated file
    with pytest.raises(SystemExit) as excinfo:
        run_baseline(tmp_path, smoke_data["params"], data, smoke_data["tokenizer"])
    assert_one_line_exit(capsys, excinfo, "corrupted (content hash differs from the manifest)")
    assert_nothing_written(tmp_path)


def test_unknown_profile_leaves_no_stories(tmp_path, capsys):
    params = write_params(tmp_path / "params.yaml", {**smoke_params(), "profile": "huge"})
    with pytest.raises(SystemExit) as excinfo:
        generate_stories.main(["--params", str(params), "--out", str(tmp_path / "out" / "stories")])
    assert_one_line_exit(capsys, excinfo, "profile: 'huge' is not a profile; allowed: smoke, tiny, paper")
    assert not (tmp_path / "out").exists()


def test_real_cli_prints_exactly_one_line(tmp_path):
    """The installed entry point itself: stderr is exactly the error line, the exit status is 2."""
    (tmp_path / "params.yaml").write_text("profile: smoke\nstories: [unclosed\n")
    result = run_module("common.stages.generate_stories", "--params", tmp_path / "params.yaml",
                        "--out", tmp_path / "stories")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert "malformed YAML" in result.stderr and "params.yaml:" in result.stderr
    assert not (tmp_path / "stories").exists()


def test_a_vocabulary_beyond_int32_ids_is_refused_before_training(smoke_data, tmp_path, capsys):
    """The BPE trainer aborted the process (a Rust panic) for 5e9; ids are stored as int32."""
    from common.stages import train_tokenizer

    params = write_params(tmp_path / "params.yaml", smoke_params(**{"tokenizer.vocab_size": 5_000_000_000}))
    with pytest.raises(SystemExit) as excinfo:
        train_tokenizer.main(["--params", str(params), "--stories", str(smoke_data["stories"]),
                              "--out", str(tmp_path / "out" / "tokenizer")])
    assert_one_line_exit(capsys, excinfo, "tokenizer.smoke.vocab_size: must be <= 2147483647, got 5000000000")
    assert not (tmp_path / "out").exists()


COMMAND_LINES = {
    "stage, missing path": (("common.stages.generate_stories", "--params", "params.yaml"),
                            "the following arguments are required: --out (usage: generate_stories.py [-h]"),
    "stage, unknown option": (("common.stages.train_tokenizer", "--params", "p", "--stories", "s", "--out", "o",
                               "--vocab", "9"), "unrecognized arguments: --vocab 9 (usage: "),
    "benchmark, bad count": (("benchmarks.blackmamba_step", "--reps", "0"), "argument --reps: 0 is below 1"),
    "tool, not a checkout": (("reruns.compare", "no_such_checkout"), "no_such_checkout: not a checkout"),
    "gpu tool, bad count": (("rehearsal.gpu_steps", "--steps", "0"), "argument --steps: 0 is below 1"),
}


@pytest.mark.parametrize("case", sorted(COMMAND_LINES))
def test_a_bad_command_line_is_one_line(case):
    """argparse's own error is the usage over several lines and then the error; ours is one line
    that holds both (`common.errors.ArgumentParser`)."""
    args, expected = COMMAND_LINES[case]
    result = run_module(*args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    assert expected in result.stderr, result.stderr


def test_every_command_line_is_read_by_the_one_line_parser():
    """A script that builds argparse's parser itself would print its errors over several lines."""
    sources = [p for p in ROOT.rglob("*.py") if not {".venv", "tests"} & set(p.relative_to(ROOT).parts)]
    assert len(sources) > 100
    builds_its_own = [p.relative_to(ROOT).as_posix() for p in sources if "argparse.ArgumentParser(" in p.read_text()]
    assert builds_its_own == []


@pytest.mark.parametrize("root", ["missing", "empty", "no_profile"])
def test_a_paper_stage_never_guesses_its_profile(root, tmp_path, monkeypatch, capsys):
    """A paper's params file has no `profile`; without a root params.yaml that names one, the stage
    stops instead of running at some default."""
    from papers.blackmamba import sinkhorn_study

    monkeypatch.chdir(tmp_path)
    paper_params = tmp_path / "blackmamba.yaml"
    paper_params.write_text((ROOT / "papers/blackmamba/params.yaml").read_text())
    if root != "missing":
        (tmp_path / "params.yaml").write_text("" if root == "empty" else "stories: {}\n")
    with pytest.raises(SystemExit) as excinfo:
        sinkhorn_study.main(["--params", str(paper_params), "--out", str(tmp_path / "out" / "sinkhorn.json")])
    expected = ("not found" if root == "missing"
                else "params.yaml: no `profile` key; set it to one of smoke, tiny, paper")
    assert_one_line_exit(capsys, excinfo, expected)
    assert not (tmp_path / "out").exists()


# --- Corrupt files and unwritable outputs ----------------------------------------------------------

def damaged_copy(source: Path, tmp_path: Path, name: str, damage) -> Path:
    """A copy of the directory `source` with `damage(bytes) -> bytes` applied to its file `name`."""
    copy = tmp_path / source.name
    shutil.copytree(source, copy)
    intact = (copy / name).read_bytes()
    (copy / name).write_bytes(damage(intact))
    assert (copy / name).read_bytes() != intact
    return copy


def truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def edit(data: bytes) -> bytes:
    """A change that keeps the file valid JSON: a special token renamed."""
    return data.replace(b'"<unk>"', b'"<unq>"', 1)


@pytest.mark.parametrize("damage", [truncate, edit])
def test_a_damaged_tokenizer_is_one_line(damage, smoke_data, tmp_path, capsys):
    tokenizer = damaged_copy(smoke_data["tokenizer"], tmp_path, "tokenizer.json", damage)
    with pytest.raises(SystemExit) as excinfo:
        run_baseline(tmp_path, smoke_data["params"], smoke_data["tokenized"] / "packed", tokenizer)
    assert_one_line_exit(capsys, excinfo, "tokenizer.json: corrupted (content hash differs from the manifest)")
    assert_nothing_written(tmp_path)


def test_a_tokenizer_without_manifest_that_does_not_parse_is_one_line(smoke_data, tmp_path, capsys):
    """A tokenizer from elsewhere has no manifest to check; one that does not parse is still one line
    (through a command that takes any tokenizer directory)."""
    from common.models import hf_causal_lm
    from common.models.lm import LanguageModel, LMConfig, save_language_model

    tokenizer = damaged_copy(smoke_data["tokenizer"], tmp_path, "tokenizer.json", truncate)
    (tokenizer / "manifest.json").unlink()
    save_language_model(LanguageModel(LMConfig(vocab_size=8, d_model=8, pattern="swiglu", n_ctx=4)), tmp_path / "m")
    with pytest.raises(SystemExit) as excinfo:
        hf_causal_lm.main([str(tmp_path / "m"), str(tmp_path / "hf"), "--tokenizer", str(tokenizer)])
    assert_one_line_exit(capsys, excinfo, "unreadable tokenizer (JSONDecodeError")
    assert not (tmp_path / "hf").exists()


def flip_weight_byte(data: bytes) -> bytes:
    """One byte of a tensor flipped: the file still parses, with a wrong weight in it."""
    last = len(data) - 1
    return data[:last] + bytes([data[last] ^ 0x01])


MODEL_DAMAGE = {  # without a manifest (a directory saved elsewhere or earlier), the loader's own checks
    "truncated weights": ("model.safetensors", truncate, "model.safetensors: unreadable"),
    "broken config": ("config.json", truncate, "config.json: not valid JSON"),
    "config without lm_config": ("config.json", lambda _: b'{"format": "language-model"}', "no lm_config mapping"),
    "flipped weight byte": ("model.safetensors", flip_weight_byte, None),  # only the manifest can see it
}


@pytest.mark.parametrize("manifest", [True, False], ids=["manifest", "no-manifest"])
@pytest.mark.parametrize("case", sorted(MODEL_DAMAGE))
def test_a_damaged_model_directory_is_one_line(case, manifest, tmp_path, capsys):
    from common.models import hf_causal_lm
    from common.models.lm import LanguageModel, LMConfig, save_language_model

    name, damage, expected = MODEL_DAMAGE[case]
    save_language_model(LanguageModel(LMConfig(vocab_size=8, d_model=8, pattern="swiglu", n_ctx=4)), tmp_path / "m")
    model = damaged_copy(tmp_path / "m", tmp_path / "damaged", name, damage)
    if not manifest:
        (model / "manifest.json").unlink()
        if expected is None:
            hf_causal_lm.main([str(model), str(tmp_path / "hf")])  # a flipped byte still parses: unnoticed
            assert (tmp_path / "hf" / "config.json").is_file()
            return
    with pytest.raises(SystemExit) as excinfo:
        hf_causal_lm.main([str(model), str(tmp_path / "hf")])
    assert_one_line_exit(capsys, excinfo,
                         f"{name}: corrupted (content hash differs from the manifest)" if manifest else expected)
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("errno_name", ["ENOSPC", "EROFS", "EACCES"])
def test_a_full_disk_or_unwritable_output_is_one_line_and_leaves_nothing(errno_name, tmp_path, monkeypatch, capsys):
    """The disk fills (or the path turns out read-only) in the middle of writing the stories: one line
    naming the file and what to do, exit 2, no half-written output and no scratch directory."""
    import errno
    import os

    import datasets

    params = write_params(tmp_path / "params.yaml", smoke_params())
    save = datasets.DatasetDict.save_to_disk

    def fails_midway(self, path, *args, **kwargs):
        save(self, path, *args, **kwargs)
        code = getattr(errno, errno_name)
        raise OSError(code, os.strerror(code), str(path) + "/train/data.arrow")

    monkeypatch.setattr(datasets.DatasetDict, "save_to_disk", fails_midway)
    with pytest.raises(SystemExit) as excinfo:
        generate_stories.main(["--params", str(params), "--out", str(tmp_path / "out" / "stories")])
    code = getattr(errno, errno_name)
    assert_one_line_exit(capsys, excinfo, f"data.arrow: {os.strerror(code)}; ")
    assert list((tmp_path / "out").iterdir()) == []


def test_other_os_errors_stay_tracebacks(tmp_path, monkeypatch):
    """Only what the user fixes is turned into a line: a bug's OSError still raises."""
    import errno

    import datasets

    params = write_params(tmp_path / "params.yaml", smoke_params())

    def broken(self, path, *args, **kwargs):
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(datasets.DatasetDict, "save_to_disk", broken)
    with pytest.raises(OSError, match="Invalid argument"):
        generate_stories.main(["--params", str(params), "--out", str(tmp_path / "out" / "stories")])


def test_a_params_file_that_is_not_text_is_one_line(smoke_data, tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_bytes(b"profile: smoke\n\xff\xfe\x00")
    with pytest.raises(SystemExit) as excinfo:
        run_baseline(tmp_path, params, smoke_data["tokenized"] / "packed", smoke_data["tokenizer"])
    assert_one_line_exit(capsys, excinfo, "params.yaml: not UTF-8 text")
    assert_nothing_written(tmp_path)


def test_an_output_under_a_file_is_refused_before_any_work(smoke_data, tmp_path, capsys):
    """The parent of an output is made only when the output is written, at the end of the work; a
    file standing in its way is named first."""
    (tmp_path / "out").write_text("a file, not a directory")
    with pytest.raises(SystemExit) as excinfo:
        run_baseline(tmp_path, smoke_data["params"], smoke_data["tokenized"] / "packed", smoke_data["tokenizer"])
    assert_one_line_exit(capsys, excinfo, f"{tmp_path / 'out'} is a file, not a directory")
    assert (tmp_path / "out").read_text() == "a file, not a directory"


def test_a_directory_where_an_output_file_goes_is_refused_before_any_work(smoke_data, tmp_path, capsys):
    """It was found only when the metrics were written, after the training, naming a scratch file."""
    metrics = outputs(tmp_path)["metrics"]
    metrics.mkdir(parents=True)
    with pytest.raises(SystemExit) as excinfo:
        run_baseline(tmp_path, smoke_data["params"], smoke_data["tokenized"] / "packed", smoke_data["tokenizer"])
    assert_one_line_exit(capsys, excinfo, f"--metrics {metrics}: a directory stands where this file goes")
    assert not outputs(tmp_path)["run"].exists()


@pytest.mark.parametrize(("files", "expected"), [([], "the manifest lists no files"),
                                                 ({}, "the manifest lists no files")])
def test_a_manifest_without_files_is_one_line(files, expected, smoke_data, tmp_path, capsys):
    data = tmp_path / "packed"
    shutil.copytree(smoke_data["tokenized"] / "packed", data)
    (data / "manifest.json").write_text(json.dumps({"stage": "tokenize", "files": files}))
    with pytest.raises(SystemExit) as excinfo:
        run_baseline(tmp_path, smoke_data["params"], data, smoke_data["tokenizer"])
    assert_one_line_exit(capsys, excinfo, expected)
    assert_nothing_written(tmp_path)


def test_stories_that_are_tokenized_rows_are_one_line(smoke_data, tmp_path, capsys):
    """Another stage's data, with a valid manifest of its own, where stories are wanted."""
    from common.stages import train_tokenizer

    with pytest.raises(SystemExit) as excinfo:
        train_tokenizer.main(["--params", str(smoke_data["params"]), "--stories",
                              str(smoke_data["tokenized"] / "packed"), "--out", str(tmp_path / "out" / "tok")])
    assert_one_line_exit(capsys, excinfo, "train: no text column (have input_ids")
    assert not (tmp_path / "out").exists()


def test_a_tokenizer_file_that_is_json_but_no_tokenizer_is_one_line(smoke_data, tmp_path, capsys):
    tokenizer = tmp_path / "tokenizer"
    tokenizer.mkdir()
    (tokenizer / "tokenizer.json").write_text("{}")
    with pytest.raises(SystemExit) as excinfo:
        run_baseline(tmp_path, smoke_data["params"], smoke_data["tokenized"] / "packed", tokenizer)
    assert_one_line_exit(capsys, excinfo, "unreadable tokenizer")
    assert_nothing_written(tmp_path)


def test_a_report_checks_its_readme_before_writing(tmp_path, capsys):
    """A README without the table blocks stops the report before the ledger and metrics are written."""
    from papers.blackmamba import report

    readme = tmp_path / "README.md"
    readme.write_text("# no tables here\n")
    claims, metrics = tmp_path / "results" / "claims.json", tmp_path / "results" / "metrics.json"
    with pytest.raises(SystemExit) as excinfo:
        report.main(report_argv("blackmamba", tmp_path / "results", readme))
    assert_one_line_exit(capsys, excinfo, f"table 'claims': no <!-- table:claims --> ... <!-- /table --> block in "
                                          f"{readme}")
    assert not claims.exists() and not metrics.exists()


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda text: text.replace("judge: difference", "judge: vibes", 1), "judge 'vibes'; allowed: difference"),
    (lambda text: text.replace("extract: flops_saving", "extract: flops_savings", 1),
     "extract 'flops_savings' is not a function of papers.blackmamba.evidence"),
    (lambda text: text.replace("paper: blackmamba", "paper: manticore", 1), "declares the claims of 'manticore'"),
    (lambda text: text + "  - [not, a, claim]\n", "not a mapping of keys"),
])
def test_a_broken_claims_file_is_one_line_and_writes_nothing(tmp_path, capsys, edit, expected):
    """claims.yaml is an input a researcher edits: each mistake is one line naming the claim and what
    is allowed, before any output is touched."""
    from papers.blackmamba import report

    results = tmp_path / "results"
    shutil.copytree(ROOT / "papers/blackmamba/results", results)
    shutil.copy(ROOT / "papers/blackmamba/README.md", tmp_path / "README.md")
    spec = tmp_path / "claims.yaml"
    spec.write_text(edit((ROOT / "papers/blackmamba/claims.yaml").read_text()))
    before = {path.name: path.read_bytes() for path in [*results.iterdir(), tmp_path / "README.md"]}
    argv = report_argv("blackmamba", results, tmp_path / "README.md")
    argv[argv.index("--spec") + 1] = str(spec)
    with pytest.raises(SystemExit) as excinfo:
        report.main(argv)
    assert_one_line_exit(capsys, excinfo, expected)
    assert {path.name: path.read_bytes() for path in [*results.iterdir(), tmp_path / "README.md"]} == before


def test_masked_mixer_weights_missing_or_foreign_are_one_line(tmp_path):
    from torch import nn

    from common.errors import DataError
    from papers.masked_mixers.train import WEIGHTS, load_weights

    with pytest.raises(DataError, match="no trained weights"):
        load_weights(nn.Linear(2, 2), tmp_path)
    (tmp_path / WEIGHTS).write_text("not a checkpoint")
    with pytest.raises(DataError, match="not weights of this model"):
        load_weights(nn.Linear(2, 2), tmp_path)


def test_comparing_with_a_checkout_that_is_not_there_is_one_line(tmp_path, capsys):
    from reruns import compare

    with pytest.raises(SystemExit) as excinfo:
        compare.main([str(tmp_path / "missing")])
    assert excinfo.value.code == 2
    assert "not a checkout of this project (no dvc.lock)" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_benchmark_sizes_must_be_positive_whole_numbers(value):
    import argparse

    from benchmarks import positive_int

    with pytest.raises(argparse.ArgumentTypeError):
        positive_int(value)


def test_a_run_that_fails_before_its_first_checkpoint_leaves_nothing(tmp_path):
    """Data that fails inside `fit` (the data module reads it there) leaves no run state, logs or
    empty run directory (nor the empty parents it made): nothing a rerun could mistake for a run to
    resume. A directory that was there before stays."""
    from common.data.datamodule import TextDataModule
    from common.errors import DataError
    from common.models.lm import LanguageModel, LMConfig
    from common.training.modules import CausalLMModule
    from common.training.optim import OptimConfig
    from common.training.trainer import TrainerConfig, run_training

    data = tmp_path / "data"  # a manifest naming a file that is not there: found only when fit reads it
    data.mkdir()
    (data / "manifest.json").write_text(json.dumps({"stage": "tokenize", "files": {"train/data.arrow": "0" * 64}}))
    run_dir = tmp_path / "runs" / "model" / "seed0"
    cfg = TrainerConfig(max_steps=2, val_every_n_steps=1, limit_val_batches=1, progress_bar=False, threads=1)
    with pytest.raises(DataError, match="file listed in the manifest is missing"):
        run_training(lambda: CausalLMModule(LanguageModel(LMConfig(vocab_size=8, d_model=8, pattern="swiglu",
                                                                   n_ctx=4)), 8, OptimConfig()),
                     TextDataModule(data, batch_size=2), cfg, run_dir, seed=0, run_config={})
    assert not run_dir.exists() and not (tmp_path / "runs").exists() and data.is_dir()


def test_representation_names_missing_clm_weights_before_any_job(smoke_data, tmp_path, capsys):
    from papers.masked_mixers import representation

    with pytest.raises(SystemExit) as excinfo:
        representation.main(["--params", str(ROOT / "papers/masked_mixers/params.yaml"), "--data",
                             str(smoke_data["tokenized"] / "padded"), "--tokenizer", str(smoke_data["tokenizer"]),
                             "--clm-dir", str(tmp_path / "no_clm"), "--out", str(tmp_path / "out" / "rep.json")])
    assert_one_line_exit(capsys, excinfo, "no_clm: no trained weights for mixer_flat seed 0")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("cls", "data", "expected"), [
    ("papers.masked_mixers.input_representation:RepresentationConfig", {"untrained_sizes": [[16]]},
     "x.untrained_sizes[0]: expected 2 items, got 1"),
    ("papers.masked_mixers.input_representation:RepresentationConfig", {"models": []},
     "models and seeds: list at least one of each"),
    ("papers.manticore.landscape:LandscapeConfig", {"methods": []},
     "methods and updates: name at least one of each"),
])
def test_config_shapes_are_checked(cls, data, expected):
    import importlib

    from common.config import from_dict
    from common.errors import ConfigError

    module, name = cls.split(":")
    with pytest.raises(ConfigError) as excinfo:
        from_dict(getattr(importlib.import_module(module), name), data, where="x")
    assert expected in str(excinfo.value)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("accelerator", ["cuda", "gpu", "tpu"])
def test_an_accelerator_this_machine_lacks_is_one_line(accelerator, smoke_data, tmp_path, capsys):
    """One line naming what this machine can run (Lightning's own words for `gpu` named nothing,
    and `tpu` without torch_xla was a traceback)."""
    params = write_params(tmp_path / "params.yaml", smoke_params(**{"lm_baseline.trainer.accelerator": accelerator}))
    with pytest.raises(SystemExit) as excinfo:
        run_baseline(tmp_path, params, smoke_data["tokenized"] / "packed", smoke_data["tokenizer"])
    assert_one_line_exit(capsys, excinfo, f"error: trainer.accelerator: {accelerator!r} cannot run on this "
                                          "machine; it runs: auto, cpu")
    assert_nothing_written(tmp_path)


def test_the_blackmamba_step_benchmark_writes_where_it_is_told(tmp_path, monkeypatch):
    from benchmarks import blackmamba_step

    out = tmp_path / "step.json"
    monkeypatch.setattr("sys.argv", ["blackmamba_step", "--reps", "1", "--threads", "1", "--d-model", "16",
                                     "--layers", "2", "--d-ff", "16", "--batch", "2", "--n-ctx", "8",
                                     "--out", str(out)])
    blackmamba_step.main()
    assert json.loads(out.read_text())["config"]["layers"] == 2


def test_readiness_refuses_a_records_file_that_is_not_there(tmp_path, capsys):
    from rehearsal import readiness

    with pytest.raises(SystemExit) as excinfo:
        readiness.main(["--records", str(tmp_path / "none.json")])
    assert excinfo.value.code == 2
    assert "--records: no such file" in capsys.readouterr().err


CUDA_OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.02 GiB "
            "is free. Of the allocated memory 70.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved by PyTorch "
            "but unallocated.\nIf reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF")


@pytest.mark.parametrize("allocate, expected", [
    (lambda: torch.empty(10**13), "out of memory (can't allocate memory: you tried to allocate 40000000000000 bytes"),
    (lambda: (_ for _ in ()).throw(torch.OutOfMemoryError(CUDA_OOM)),
     "out of memory (CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which "
     "1.02 GiB is free): the settings ask for more memory"),
], ids=["cpu-allocator", "cuda"])
def test_an_allocation_the_machine_cannot_make_is_one_line(allocate, expected, capsys):
    """Settings too large for the machine (a batch, window or model) fail in the allocator: one line
    with its own words and what to lower, exit 2. The CPU case is a real allocation of 40 TB."""
    from common.errors import exit_on_user_error

    with pytest.raises(SystemExit) as excinfo:
        exit_on_user_error(allocate)()
    assert_one_line_exit(capsys, excinfo, expected)


def test_other_runtime_errors_stay_tracebacks():
    from common.errors import exit_on_user_error

    def bug():
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)")

    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        exit_on_user_error(bug)()


@pytest.mark.parametrize("paper, file, damage", [
    ("blackmamba", "train_compare.json", lambda r: r["models"]["transformer"]["seeds"]["0"].pop("final_val_loss")),
    ("blackmamba", "zero_shot.json", lambda r: r["models"]["mamba"]["0"].update(mean_acc="oops")),
    ("masked_mixers", "generation.json", lambda r: r["checkpoints"]["transformer"].pop("model")),
], ids=["missing-key", "string-for-a-number", "key-read-by-a-table"])
def test_a_report_over_results_it_cannot_read_is_one_line_and_writes_nothing(paper, file, damage, tmp_path, capsys):
    """Valid JSON of another shape (an edited file, a stage of another version) died with a
    traceback, and could leave a new claims.json beside the old README."""
    import importlib

    results = tmp_path / "results"
    shutil.copytree(ROOT / "papers" / paper / "results", results)
    shutil.copy(ROOT / "papers" / paper / "README.md", tmp_path / "README.md")
    data = json.loads((results / file).read_text())
    damage(data)
    (results / file).write_text(json.dumps(data))
    before = {path.name: path.read_bytes() for path in [*results.iterdir(), tmp_path / "README.md"]}
    with pytest.raises(SystemExit) as excinfo:
        importlib.import_module(f"papers.{paper}.report").main(report_argv(paper, results, tmp_path / "README.md"))
    assert_one_line_exit(capsys, excinfo, f"{results}: results of a shape this report does not read (")
    assert {path.name: path.read_bytes() for path in [*results.iterdir(), tmp_path / "README.md"]} == before


def test_a_one_token_benchmark_window_is_refused():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "benchmarks.blackmamba_step", "--n-ctx", "1", "--out", "/dev/null"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "--n-ctx: 1 leaves no next token to predict" in result.stderr
