"""`run_training`, the one entry point every stage trains through: seeding independent of what ran
before, and a resume key that holds the input data's fingerprint."""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import platform
import re
import subprocess
import sys
import weakref
from dataclasses import replace

import lightning as L
import pytest
import torch

from common.data.mad import MADTaskConfig
from common.data.task_datamodules import MADDataModule
from common.models.lm import LanguageModel, LMConfig
from common.training import trainer as trainer_module
from common.training.mad import train_on_mad
from common.training.modules import CausalLMModule
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig, build_trainer, run_training
from tests.conftest import ROOT

pytestmark = pytest.mark.pipeline  # end to end: `make test-pipeline`

TASK = MADTaskConfig(task="in-context-recall", vocab_size=16, seq_len=32, num_train_examples=64,
                     num_test_examples=32, seed=3)
TRAINER = TrainerConfig(max_steps=6, val_every_n_steps=3, limit_val_batches=1, log_every_n_steps=1,
                        checkpoint_every_n_steps=2, progress_bar=False)
OPTIM = OptimConfig(lr=1e-2, warmup_steps=0)
MODEL_A = LMConfig(d_model=16, pattern="attn,swiglu", blocks={"attn": {"n_heads": 2}})
MODEL_B = LMConfig(d_model=16, pattern="mamba,swiglu")


def test_a_run_does_not_depend_on_what_ran_before_it(tmp_path):
    """B alone, and B after A (and after unrelated draws), train to exactly the same scores."""
    alone = train_on_mad(MODEL_B, TASK, TRAINER, tmp_path / "b_alone", OPTIM, batch_size=8, seed=1)
    train_on_mad(MODEL_A, TASK, TRAINER, tmp_path / "a", OPTIM, batch_size=8, seed=0)
    torch.rand(1000)
    after = train_on_mad(MODEL_B, TASK, TRAINER, tmp_path / "b_after_a", OPTIM, batch_size=8, seed=1)
    assert after == alone


class StopAt(L.Callback):
    """Dies at `step` like a killed process: after that step's training, or during its validation."""

    def __init__(self, step: int, in_validation: bool = False):
        self.step, self.in_validation = step, in_validation

    def on_train_batch_end(self, trainer, *args):
        if not self.in_validation and trainer.global_step == self.step:
            raise RuntimeError("killed")

    def on_validation_start(self, trainer, *args):
        if self.in_validation and trainer.global_step == self.step:
            raise RuntimeError("killed")


def _run(task: MADTaskConfig, run_dir, callbacks=(), trainer: TrainerConfig = TRAINER):
    def build():
        return CausalLMModule(LanguageModel(replace(MODEL_B, vocab_size=task.vocab_size, n_ctx=task.seq_len)),
                              vocab_size=task.vocab_size, optim=OPTIM, shift_labels=False)

    return run_training(build, MADDataModule(task, batch_size=8, seed=0), trainer, run_dir, seed=0,
                        run_config={"model": "b", "layers": ("mamba", "swiglu")}, callbacks=list(callbacks))


@pytest.fixture
def terminal(monkeypatch):
    """As if the run's output went to a terminal, the one place bars are drawn."""
    monkeypatch.setattr("common.training.trainer.on_a_terminal", lambda: True)


def test_the_progress_bar_counts_steps_of_the_whole_run(tmp_path, capfd, terminal):
    """One bar counting optimizer steps to `max_steps`; Lightning's own bar counts the batches of an
    epoch of unknown length (`Epoch 0: 5/?`)."""
    _run(TASK, tmp_path, trainer=replace(TRAINER, progress_bar=True))
    bar = capfd.readouterr().out.replace("\r", "\n")  # Lightning's bars write to stdout
    counts = [int(m.group(1)) for line in bar.splitlines() if (m := re.match(r"steps:.*\| (\d+)/6 ", line))]
    assert counts == sorted(counts) and set(counts) == set(range(7)), bar[-2000:]
    assert "Epoch" not in bar


def test_no_bar_is_drawn_into_a_log(tmp_path, capfd):
    """Off a terminal (here pytest's capture) a bar's `\r` redraws would fill the log: none is drawn."""
    _run(TASK, tmp_path, trainer=replace(TRAINER, progress_bar=True))
    out = capfd.readouterr()
    assert "steps:" not in out.out + out.err and "\r" not in out.out + out.err


def test_the_progress_bar_is_display_only(tmp_path, terminal):
    """A run with the bar trains to exactly the weights and curve of a run without it, so turning
    bars on in a stage's params changes none of its outputs (the locks were re-recorded on this)."""
    off = _run(TASK, tmp_path / "off")
    on = _run(TASK, tmp_path / "on", trainer=replace(TRAINER, progress_bar=True))
    assert _curve(on) == _curve(off) and len(_curve(off)) >= 2
    for (name, a), (_, b) in zip(off.module.state_dict().items(), on.module.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert (tmp_path / "on/run_state.json").read_text() == (tmp_path / "off/run_state.json").read_text()


@pytest.mark.parametrize("data_changed", [False, True])
def test_a_cut_run_resumes_only_on_the_same_data(tmp_path, caplog, data_changed):
    # The run config holds a tuple, which run_state.json reads back as a list: still the same key.
    with pytest.raises(RuntimeError, match="killed"):
        _run(TASK, tmp_path, [StopAt(3)])
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()
    task = replace(TASK, seed=TASK.seed + 1) if data_changed else TASK  # regenerated data, same config keys
    with caplog.at_level(logging.INFO, logger="common.training.trainer"):
        run = _run(task, tmp_path)
    assert run.steps == TRAINER.max_steps
    resumed = any("resuming from" in r.getMessage() for r in caplog.records)
    assert resumed is not data_changed
    assert not (tmp_path / "checkpoints").exists()  # a finished run never resumes: no disk spent on it


def test_the_progress_bar_is_not_part_of_the_resume_key(tmp_path, caplog):
    with pytest.raises(RuntimeError, match="killed"):
        _run(TASK, tmp_path, [StopAt(3)])
    with caplog.at_level(logging.INFO, logger="common.training.trainer"):
        run = _run(TASK, tmp_path, trainer=replace(TRAINER, progress_bar=True))
    assert any("resuming from" in r.getMessage() for r in caplog.records) and run.steps == TRAINER.max_steps


def _curve(run) -> list[dict[str, float]]:
    return [{k: v for k, v in row.items() if k != "elapsed_s"} for row in run.history]


@pytest.mark.parametrize("every", [(2, 2), (3, 2)], ids=["validate-every-2", "validate-every-3"])
@pytest.mark.parametrize("cut", ["train-3", "train-5", "validation-3", "validation-4", "validation-6"])
def test_a_resumed_run_reports_the_whole_curve_of_a_run_never_cut(tmp_path, every, cut):
    """Every row, validations at the checkpoint's step included (Lightning resumes a checkpoint of a
    validation step as if its validation had run, so a checkpoint written before it lost the row)."""
    trainer = replace(TRAINER, val_every_n_steps=every[0], checkpoint_every_n_steps=every[1])
    where, step = cut.split("-")
    if where == "validation" and int(step) % every[0]:
        pytest.skip("no validation at that step")
    with pytest.raises(RuntimeError, match="killed"):
        _run(TASK, tmp_path / "cut", [StopAt(int(step), in_validation=where == "validation")], trainer)
    assert (tmp_path / "cut" / "checkpoints" / "last.ckpt").is_file()
    resumed = _run(TASK, tmp_path / "cut", trainer=trainer)
    assert _curve(resumed) == _curve(_run(TASK, tmp_path / "straight", trainer=trainer))


@pytest.mark.parametrize("damage", ["truncated", "flipped byte"])
def test_an_unreadable_checkpoint_is_named_and_the_run_starts_afresh(tmp_path, caplog, damage):
    with pytest.raises(RuntimeError, match="killed"):
        _run(TASK, tmp_path, [StopAt(3)])
    checkpoint = tmp_path / "checkpoints" / "last.ckpt"
    data = bytearray(checkpoint.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:  # inside the largest stored member, so the archive still opens but a CRC fails
        import zipfile

        with zipfile.ZipFile(checkpoint) as archive:
            member = max(archive.infolist(), key=lambda info: info.file_size)
        at = member.header_offset  # the local header: 30 bytes, then the name and an extra field
        name_length, extra_length = (int.from_bytes(data[at + i:at + i + 2], "little") for i in (26, 28))
        start = at + 30 + name_length + extra_length
        data[start + member.file_size // 2] ^= 0xFF
    checkpoint.write_bytes(bytes(data))
    with caplog.at_level(logging.INFO, logger="common.training.trainer"):
        run = _run(TASK, tmp_path)
    messages = [r.getMessage() for r in caplog.records]
    assert any("last.ckpt is unreadable" in m and "starts afresh" in m for m in messages), messages
    assert not any("resuming from" in m for m in messages)
    assert run.steps == TRAINER.max_steps

    assert _curve(run) == _curve(_run(TASK, tmp_path / "fresh"))  # the same as a run that was never cut


def _same_weights(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.module.state_dict().values(), b.module.state_dict().values(),
                                                 strict=True))


def test_a_finished_run_is_loaded_not_trained_again(tmp_path, caplog):
    """A stage stopped after some of its runs loses only the run in progress: a rerun of a finished
    run with the same key loads its weights and metrics, and training it again would give the same."""
    first = _run(TASK, tmp_path / "run")
    metrics_file = (tmp_path / "run" / "metrics.json").read_text()
    with caplog.at_level(logging.INFO, logger="common.training.trainer"):
        again = _run(TASK, tmp_path / "run")
    assert again.reused and not first.reused
    assert any("not training it again" in r.getMessage() for r in caplog.records)
    assert again.trainer.global_step == 0 and again.steps == TRAINER.max_steps  # never fitted
    assert _same_weights(again, first) and _curve(again) == _curve(first)
    trained_for = json.loads(metrics_file)["timing"]["train_seconds"]
    assert again.metrics.state_dict()["elapsed_s"] == trained_for  # the first run's time, not a new one
    assert (tmp_path / "run" / "metrics.json").read_text() == metrics_file
    assert _same_weights(again, _run(TASK, tmp_path / "fresh"))


def test_without_kept_weights_a_finished_run_trains_again(tmp_path, monkeypatch):
    """The rehearsal's setting: no weights on disk, and a rerun trains the run afresh to the same weights."""
    from common.training.trainer import KEEP_RUN_WEIGHTS, RUN_WEIGHTS

    monkeypatch.setenv(KEEP_RUN_WEIGHTS, "0")
    first = _run(TASK, tmp_path)
    assert json.loads((tmp_path / "run_state.json").read_text())["complete"]
    assert not (tmp_path / RUN_WEIGHTS).exists()
    again = _run(TASK, tmp_path)
    assert not again.reused and again.trainer.global_step == TRAINER.max_steps
    assert _same_weights(again, first)


def test_a_loaded_run_scores_as_the_run_it_loads(tmp_path):
    """Callers score the module on the data module's loaders after `run_training`: a loaded run's
    data module is set up as a fitted one's, so its scores are the trained run's."""
    first = train_on_mad(MODEL_B, TASK, TRAINER, tmp_path, OPTIM, batch_size=8, seed=1)
    assert train_on_mad(MODEL_B, TASK, TRAINER, tmp_path, OPTIM, batch_size=8, seed=1) == first


@pytest.mark.parametrize("change", ["weights flipped", "weights missing", "metrics missing", "other config",
                                    "own callback"])
def test_a_finished_run_trains_again_when_anything_fails_to_match(tmp_path, caplog, change):
    first = _run(TASK, tmp_path)
    weights = tmp_path / "weights.pt"
    if change == "weights flipped":
        data = bytearray(weights.read_bytes())
        data[len(data) // 2] ^= 0xFF
        weights.write_bytes(bytes(data))
    elif change == "weights missing":
        weights.unlink()
    elif change == "metrics missing":
        (tmp_path / "metrics.json").unlink()
    with caplog.at_level(logging.INFO, logger="common.training.trainer"):
        if change == "other config":
            again = run_training(lambda: first.module, MADDataModule(TASK, batch_size=8, seed=0), TRAINER, tmp_path,
                                 seed=0, run_config={"model": "b", "layers": ("mamba", "swiglu"), "other": 1})
        else:
            again = _run(TASK, tmp_path, [L.Callback()] if change == "own callback" else [])
    assert not again.reused and again.trainer.global_step == TRAINER.max_steps
    assert not any("not training it again" in r.getMessage() for r in caplog.records)
    if change.startswith("weights flipped") or change == "metrics missing":
        assert any("do not verify" in r.getMessage() for r in caplog.records)
    if change != "other config":
        assert _same_weights(again, first)


def test_trainer_threads_is_a_ceiling(tmp_path):
    """A one-thread worker (common.parallel) keeps one thread whatever the config asks."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        build_trainer(replace(TRAINER, threads=2), tmp_path)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_runs_in_turn_never_hold_two_runs_training_state(tmp_path):
    """A finished run keeps its trained module but not its optimizer states or gradients, and a
    run nobody holds is freed before the next one builds, even with the cycle collector idle
    (it runs on object counts, so large weights can wait for it for a long time)."""
    gc.disable()
    try:
        first = _run(TASK, tmp_path / "first")
        assert first.trainer.optimizers == [] and first.trainer.lr_scheduler_configs == []
        assert all(p.grad is None for p in first.module.parameters())
        dropped = weakref.ref(first.module)
        del first

        def build():
            assert dropped() is None, "the previous run's module is still alive"
            return CausalLMModule(LanguageModel(replace(MODEL_B, vocab_size=TASK.vocab_size, n_ctx=TASK.seq_len)),
                                  vocab_size=TASK.vocab_size, optim=OPTIM, shift_labels=False)

        run_training(build, MADDataModule(TASK, batch_size=8, seed=0), TRAINER, tmp_path / "second", seed=0,
                     run_config={"model": "b"})
    finally:
        gc.enable()


@pytest.mark.parametrize("first", ["finished", "cut"])
def test_a_rerun_starts_its_logs_afresh_without_lightnings_warning(tmp_path, first):
    """Lightning warns that an existing logs directory's files "will be deleted" and deletes its
    metrics file on every rerun and resume (about 30 stderr lines in a stage of 18 runs). The run
    clears the directory itself before fitting, so the logs a rerun leaves are exactly a fresh run's."""
    import warnings

    _run(TASK, tmp_path / "fresh")
    with pytest.raises(RuntimeError, match="killed") if first == "cut" else contextlib.nullcontext():
        _run(TASK, tmp_path / "again", [StopAt(3)] if first == "cut" else [])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _run(TASK, tmp_path / "again")
    assert not [w for w in caught if "exists and is not empty" in str(w.message)]
    fresh, again = (tmp_path / name / "logs" / "metrics.csv" for name in ("fresh", "again"))
    if first == "finished":
        assert again.read_text() == fresh.read_text()
    else:  # the resumed run logs from its checkpoint on, as Lightning did; never the cut run's rows twice
        rows = again.read_text().splitlines()
        assert len(rows) == len(set(rows)) and rows[0] == fresh.read_text().splitlines()[0]


FAULTS_OF_A_REFILL = """
import resource, sys, torch
if sys.argv[1] == "keep":
    from common.training.trainer import keep_freed_memory
    keep_freed_memory()
for _ in range(4):  # until the heap holds the blocks a steady loop reuses
    torch.zeros(1 << 24)  # 64 MB, written and freed
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(8):
    torch.zeros(1 << 24)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="keep_freed_memory sets glibc's malloc")
def test_freed_memory_is_reused_without_new_page_faults():
    """The kernel's count of page faults: glibc's default unmaps a freed 64 MB tensor, so writing
    the next one faults in all of its 16,384 pages again; after `keep_freed_memory` they are reused."""
    faults = {mode: int(subprocess.run([sys.executable, "-c", FAULTS_OF_A_REFILL, mode], check=True,
                                       capture_output=True, text=True, cwd=ROOT).stdout)
              for mode in ("default", "keep")}
    assert faults["default"] > 8 * 16_000
    assert faults["keep"] < 1_000


def test_run_training_keeps_freed_memory(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(trainer_module, "keep_freed_memory", lambda: calls.append(1))
    train_on_mad(MODEL_A, TASK, replace(TRAINER, max_steps=1), tmp_path, OPTIM, batch_size=8, seed=0)
    assert calls
