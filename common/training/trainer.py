"""The one way this project trains a network: `run_training`.

Given what builds the network (not a built one), a data module, the trainer config, a seed, the
run's config and a run directory, it seeds, builds, seeds again, fits with checkpoints and resume,
and returns the module, the trainer and the metric history; a run already finished with the same
settings is loaded instead of trained again. Every stage trains through it, so seeding, resume,
reuse and metrics behave the same everywhere.

Everything that decides where and how training runs (accelerator, devices, strategy, nodes,
precision) comes from `TrainerConfig`, so the same config scales from a laptop to multi-node DDP
or FSDP: only those five values change.
"""

from __future__ import annotations

import ctypes
import gc
import hashlib
import json
import logging
import os
import shutil
import time
import typing
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import lightning as L
import torch
from lightning.fabric.plugins import TorchCheckpointIO
from lightning.pytorch.callbacks import ModelCheckpoint, TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.strategies import DDPStrategy
from lightning.pytorch.utilities.exceptions import MisconfigurationException

from common.config import bounded
from common.errors import ConfigError
from common.io import write_json
from common.logs import on_a_terminal
from common.parallel import progress_queue
from common.training.callbacks import MetricsJSON, NonFiniteLossGuard, WallClockBudget

log = logging.getLogger(__name__)


@dataclass
class TrainerConfig:
    accelerator: str = "cpu"
    devices: int | str = 1
    strategy: str = "auto"
    num_nodes: int = bounded(1, ge=1)
    precision: str = "32-true"
    max_steps: int = bounded(1000, ge=1)
    max_time_s: float | None = bounded(None, gt=0)  # wall-clock budget; None means no budget
    val_every_n_steps: int = bounded(200, ge=1)
    limit_val_batches: int = bounded(20, ge=1)
    gradient_clip_val: float | None = bounded(1.0, gt=0)
    accumulate_grad_batches: int = bounded(1, ge=1)
    log_every_n_steps: int = bounded(10, ge=1)
    checkpoint_every_n_steps: int = bounded(100, ge=1)
    deterministic: bool = True
    progress_bar: bool = True
    # At most this many torch intra-op threads; None keeps torch's choice. A ceiling, never raised,
    # so a run inside a one-thread worker (`common.parallel`) stays at one thread.
    threads: int | None = bounded(None, ge=1)

    def check(self) -> None:
        """Lightning's own names for the free-form settings, so that a typo stops the stage before any
        work rather than inside `L.Trainer`."""
        from lightning.fabric.connector import _PRECISION_INPUT_STR
        from lightning.pytorch.accelerators import AcceleratorRegistry
        from lightning.pytorch.strategies import StrategyRegistry

        allowed = {"accelerator": ["auto", "gpu", *sorted(AcceleratorRegistry.available_accelerators())],
                   "precision": list(typing.get_args(_PRECISION_INPUT_STR)),
                   "strategy": ["auto", *StrategyRegistry.available_strategies()]}
        for key, names in allowed.items():
            if getattr(self, key) not in names:
                raise ConfigError(f"{key}: {getattr(self, key)!r} is not one of {', '.join(names)}")
        if not (self.devices == "auto" or (isinstance(self.devices, int) and self.devices >= 1)):
            raise ConfigError(f"devices: a count of at least 1 or 'auto', got {self.devices!r}")

    def spans_processes(self) -> bool:
        """Whether training runs in several processes (DDP, FSDP, several nodes); `devices: auto` may."""
        return self.devices != 1 or self.num_nodes > 1

    def job_workers(self, workers: int | None) -> int | None:
        """How many worker processes a stage's independent runs may use under this trainer: its
        `workers`, or 1 when training spans several processes. Lightning's launcher starts the other
        ranks by running the stage's command again, which a pool of workers would do once per
        worker; the ranks are the parallelism then, and the runs go one after another."""
        if self.spans_processes() and workers != 1:
            log.info("training spans several processes (devices %s, nodes %d): the stage's runs go one "
                     "after another", self.devices, self.num_nodes)
            return 1
        return workers


class AtomicCheckpointIO(TorchCheckpointIO):
    """Writes each checkpoint to a temporary file and renames it into place, so a process killed
    mid-write leaves the previous `last.ckpt` intact instead of a truncated one."""

    def save_checkpoint(self, checkpoint, path, storage_options=None):
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        super().save_checkpoint(checkpoint, tmp, storage_options)
        os.replace(tmp, path)


class CheckpointAfterValidation(ModelCheckpoint):
    """`last.ckpt` every n steps, written after that step's validation when one falls on it.

    Lightning resumes from a checkpoint of a validation step as if that validation had run, while
    `ModelCheckpoint` writes it before the validation: a resumed run's curve lacked the row."""

    def on_train_batch_end(self, trainer, pl_module, *args):
        epoch_loop = trainer.fit_loop.epoch_loop
        if not epoch_loop._should_check_val_fx(trainer.fit_loop._data_fetcher):
            super().on_train_batch_end(trainer, pl_module, *args)

    def on_validation_end(self, trainer, pl_module):
        if trainer.global_step % self._every_n_train_steps == 0 and not self._should_skip_saving_checkpoint(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))


class StepProgressBar(TQDMProgressBar):
    """One bar for the whole run, counting optimizer steps out of `max_steps`. Runs here are
    budgeted in steps over one endless epoch, where Lightning's own bar counts the batches of an
    epoch of unknown length (`Epoch 0: 37/?`)."""

    def on_train_start(self, trainer, pl_module):
        super().on_train_start(trainer, pl_module)
        bar = self.train_progress_bar
        bar.reset(total=trainer.max_steps)
        bar.n = bar.initial = trainer.global_step  # a resumed run starts where it stopped
        bar.set_description("steps")

    def on_train_epoch_start(self, trainer, *_):
        pass  # Lightning resets the bar for every epoch

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        if self._should_update(step, trainer.max_steps):
            self.train_progress_bar.n = step
            self.train_progress_bar.set_postfix(self.get_metrics(trainer, pl_module))


class ReportProgress(L.Callback):
    """In a `run_jobs` worker, sends this run's steps to the caller's bar (at most one report a second)."""

    def __init__(self, queue, run: str):
        self.queue, self.run = queue, run
        self._sent = 0.0

    def on_train_start(self, trainer, pl_module):
        self.queue.put(("start", self.run, trainer.max_steps, trainer.global_step))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if time.monotonic() - self._sent >= 1.0 or trainer.global_step >= trainer.max_steps:
            self.queue.put(("step", self.run, trainer.global_step))
            self._sent = time.monotonic()

    def on_train_end(self, trainer, pl_module):
        self.queue.put(("step", self.run, trainer.global_step))
        self.queue.put(("end", self.run))


def quiet_lightning() -> None:
    """Lightning repeats, for every trainer, banners (GPU and TPU availability), a logging tip and
    notices that a setting took effect; a stage training 18 runs printed 7 such lines per run.
    Its warnings still show."""
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)` is deprecated")
    # Under DDP, for values that are global already (`CausalLMModule.on_validation_epoch_end`).
    warnings.filterwarnings("ignore",
                            message=r"It is recommended to use `self.log\('val/(loss|ppl)', \.\.\., sync_dist=True\)`")


def keep_freed_memory() -> None:
    """Have glibc's malloc serve large allocations from its heap and keep freed memory for reuse.

    By default glibc maps every allocation above 32 MB straight from the kernel and unmaps it when
    it is freed, so each training step pays the page faults of first touching its largest tensors
    (a batch's logits: 16 x 256 tokens x 4096 words is 67 MB) again. Zero-filling a 67 MB tensor
    took 31 ms that way and 3 ms from reused memory on a 2-core EPYC (`benchmarks/allocator.py`).
    Only where memory comes from changes, never a computed value. At most 2 GB freed at the top of
    the heap stay with the process. Without glibc (macOS, musl) nothing changes."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt(_M_MMAP_MAX, 0)
        mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)


_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's malloc.h


def build_trainer(cfg: TrainerConfig, run_dir: str | Path, callbacks: list[L.Callback] = (),
                  skips_parameters: bool = False) -> L.Trainer:
    """The Lightning trainer of `cfg`. `skips_parameters`: the module's steps leave some parameters
    without a gradient, which DDP refuses unless it searches the graph for them every step; only
    such modules pay for that search."""
    run_dir = Path(run_dir)
    quiet_lightning()
    if cfg.threads is not None:
        torch.set_num_threads(min(cfg.threads, torch.get_num_threads()))
    checkpoint = CheckpointAfterValidation(dirpath=run_dir / "checkpoints", save_last=True, save_top_k=0,
                                           every_n_train_steps=cfg.checkpoint_every_n_steps)
    guards: list[L.Callback] = [NonFiniteLossGuard(), checkpoint]
    if cfg.max_time_s is not None:
        guards.append(WallClockBudget(cfg.max_time_s))
    # In a worker, the stage's one bar in the caller shows this run's steps (`common.parallel`).
    if (queue := progress_queue()) is not None:
        guards.append(ReportProgress(queue, f"{os.getpid()}:{run_dir}"))
    # A bar's `\r` redraws would fill a log file with one long line.
    bar = cfg.progress_bar and queue is None and on_a_terminal()
    if cfg.accelerator not in (runnable := runnable_accelerators()):  # a valid name, `cuda` with no GPU
        raise ConfigError(f"trainer.accelerator: {cfg.accelerator!r} cannot run on this machine; it runs: "
                          f"{', '.join(runnable)}")
    try:
        trainer = L.Trainer(
            accelerator=cfg.accelerator, devices=cfg.devices, strategy=cfg.strategy, num_nodes=cfg.num_nodes,
            precision=cfg.precision, max_steps=cfg.max_steps, max_epochs=-1,
            val_check_interval=cfg.val_every_n_steps, check_val_every_n_epoch=None,
            limit_val_batches=cfg.limit_val_batches, num_sanity_val_steps=0,
            gradient_clip_val=cfg.gradient_clip_val, accumulate_grad_batches=cfg.accumulate_grad_batches,
            log_every_n_steps=cfg.log_every_n_steps, deterministic=cfg.deterministic,
            enable_progress_bar=bar, enable_model_summary=False,
            logger=CSVLogger(run_dir, name="logs", version=""), default_root_dir=run_dir,
            callbacks=[*guards, *([StepProgressBar()] if bar else []), *callbacks],
            plugins=[AtomicCheckpointIO()],
        )
    # Settings this machine cannot run (more devices than it has; Lightning's `fsdp` on CPU, a ValueError).
    except (MisconfigurationException, ValueError) as err:
        raise ConfigError(f"trainer: {err}") from None
    # The one keyword Lightning's `ddp_find_unused_parameters_true` sets; set here, it also reaches the
    # DDP that `strategy: auto` picks on several GPUs.
    if skips_parameters and isinstance(trainer.strategy, DDPStrategy):
        trainer.strategy._ddp_kwargs["find_unused_parameters"] = True
    return trainer


def runnable_accelerators() -> list[str]:
    """The `accelerator` values that can run here (`auto` always can; `gpu` where CUDA or MPS can)."""
    from lightning.pytorch.accelerators import AcceleratorRegistry

    names = [name for name in AcceleratorRegistry.available_accelerators()
             if AcceleratorRegistry[name]["accelerator"].is_available()]
    return ["auto", *(["gpu"] if {"cuda", "mps"} & set(names) else []), *sorted(names)]


RUN_STATE = "run_state.json"
RUN_WEIGHTS = "weights.pt"  # a complete run's trained module, so that a rerun need not train it again
# Set to 0, complete runs keep no weights (a rerun trains them again): the rehearsal's throwaway copy
# never reruns a run, and at the paper's shapes its runs' weights (up to 1.9 GB each, tens a stage)
# overran the disk.
KEEP_RUN_WEIGHTS = "HYBRID_KEEP_RUN_WEIGHTS"


@dataclass
class TrainingRun:
    """What `run_training` returns: the trained module, its trainer, and the metrics callback
    (`history` holds the curves). `reused`: the run was complete in `run_dir` with the same key,
    so it was loaded, not trained (its trainer never fitted)."""
    module: L.LightningModule
    trainer: L.Trainer
    metrics: MetricsJSON
    reused_steps: int | None = None

    @property
    def reused(self) -> bool:
        return self.reused_steps is not None

    @property
    def history(self) -> list[dict[str, float]]:
        return self.metrics.history

    @property
    def steps(self) -> int:
        return self.trainer.global_step if self.reused_steps is None else self.reused_steps


def run_training(build: Callable[[], L.LightningModule], datamodule: L.LightningDataModule, cfg: TrainerConfig,
                 run_dir: str | Path, *, seed: int, run_config: dict, metrics_path: str | Path | None = None,
                 metrics_extra: dict | None = None, callbacks: list[L.Callback] = ()) -> TrainingRun:
    """Train the module `build()` makes on `datamodule`, resuming a run that was cut short.

    1. Seed, then build: the initial weights depend only on `seed`, never on what ran before in the
       process.
    2. Seed again: the training's random stream (Gumbel samples, dataloader seeds) does not depend
       on how many numbers building drew.
    3. Fit with checkpoints in `run_dir`. A run resumes only if it never finished and its key is
       unchanged: `run_config`, the trainer config (its progress bar aside), the seed, and the
       fingerprint of the input data (`datamodule.fingerprint()`), so a half-finished run never
       resumes on regenerated data.
    4. A run that finished with the same key, whose saved weights match the checksum it recorded
       and whose metrics file reads back, is not trained again: its weights and metrics are loaded.
       So a stage stopped after some of its runs (Ctrl-C, a crash) loses only the run in progress.
       Runs with `callbacks` of their own always train, since what those do is not in the key.
    5. Release what only training needed (optimizer states, the last gradients); the trained
       module stays.
    """
    run_dir = Path(run_dir)
    made = top_missing_directory(run_dir)
    # A finished run's trainer and module refer to each other, so only the cycle collector frees
    # them, and it runs on object counts, not bytes: without this, a stage that trains runs in turn
    # holds several runs' weights at once (paper-shape nl_experiments was killed at 24 GB).
    gc.collect()
    keep_freed_memory()
    L.seed_everything(seed, workers=True, verbose=False)
    module = build()
    L.seed_everything(seed, workers=True, verbose=False)
    metrics = MetricsJSON(metrics_path or run_dir / "metrics.json", extra=metrics_extra)
    skips = any(getattr(part, "skips_parameters", False) for part in module.modules())
    trainer = build_trainer(cfg, run_dir, callbacks=[metrics, *callbacks], skips_parameters=skips)
    # The bar is display only: turning it on or off never restarts a run.
    trainer_key = {k: v for k, v in asdict(cfg).items() if k != "progress_bar"}
    key = {"config": run_config, "trainer": trainer_key, "seed": seed, "data": datamodule.fingerprint()}
    # As it will read back from run_state.json (tuples become lists), or it would never match.
    key = json.loads(json.dumps(key, default=str))
    if not callbacks and (steps := _reuse_complete_run(module, metrics, run_dir, key)) is not None:
        # As fit would have left it: callers score the trained module on the data module's loaders.
        datamodule.prepare_data()
        datamodule.setup("fit")
        return TrainingRun(module, trainer, metrics, reused_steps=steps)
    _fit(trainer, module, datamodule, run_dir, key, made)
    _release_training_state(trainer, module)
    return TrainingRun(module, trainer, metrics)


def _read_state(run_dir: Path) -> dict:
    """`run_dir`'s run_state.json, or {} when there is none or it cannot be read."""
    state_path = run_dir / RUN_STATE
    try:
        state = json.loads(state_path.read_text()) if state_path.is_file() else {}
    except (UnicodeDecodeError, json.JSONDecodeError):
        state = None
    if not isinstance(state, dict):
        log.warning("%s is unreadable: this run starts afresh", state_path)
        state = {}
    return state


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _reuse_complete_run(module: L.LightningModule, metrics: MetricsJSON, run_dir: Path, key: dict) -> int | None:
    """Load a run that already finished with `key` into `module` and `metrics`, and return its step
    count; None (and nothing loaded) when there is no such run or any part of it fails to verify."""
    state = _read_state(run_dir)
    weights = run_dir / RUN_WEIGHTS
    if not (state.get("complete") and state.get("key") == key and state.get("weights_sha256") and weights.is_file()):
        return None
    if _sha256(weights) != state["weights_sha256"] or not metrics.restore():
        log.warning("%s: complete, but its weights or metrics do not verify; training it again", run_dir)
        return None
    module.load_state_dict(torch.load(weights, weights_only=True))
    log.info("%s: already trained with these settings (weights verified); not training it again", run_dir)
    return state["global_step"]


def _release_training_state(trainer: L.Trainer, module: L.LightningModule) -> None:
    """Drop the optimizer states (twice the weights under Adam) and the last gradients: a caller
    that keeps the trained module while the next run trains would otherwise keep them too."""
    trainer.strategy.optimizers = []
    trainer.strategy.lr_scheduler_configs = []
    module.zero_grad(set_to_none=True)


def unreadable_checkpoint(path: Path) -> str | None:
    """Why `path` cannot be resumed from, or None. A checkpoint is a zip archive whose members carry
    CRCs: a truncated file has no central directory, a damaged one fails a CRC. Checked before
    Lightning reads it, whose errors for either are long tracebacks on every rerun."""
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        return f"{type(err).__name__}: {err}"
    return f"{damaged} fails its CRC check" if damaged else None


def top_missing_directory(path: Path) -> Path | None:
    """The outermost of `path` and its parents that does not exist yet, or None if `path` exists."""
    top = None
    while not path.exists():
        top, path = path, path.parent
    return top


def _fit(trainer: L.Trainer, module: L.LightningModule, datamodule: L.LightningDataModule,
         run_dir: Path, run_key: dict, made: Path | None) -> None:
    """`trainer.fit`, resuming from `run_dir/checkpoints/last.ckpt` when that run was cut short.

    A run resumes only if it never finished and was started with exactly the same `run_key`;
    otherwise its old checkpoints are removed and training starts afresh. That makes a killed
    `dvc repro` pick up where it stopped, without ever resuming into a changed experiment. A run
    that finishes saves its weights with their checksum and removes its checkpoints. `made`: the
    outermost directory this run created.
    """
    state_path, ckpt_dir = run_dir / RUN_STATE, run_dir / "checkpoints"
    state = _read_state(run_dir)
    resumable = state.get("key") == run_key and not state.get("complete") and (ckpt_dir / "last.ckpt").is_file()
    if resumable and (problem := unreadable_checkpoint(ckpt_dir / "last.ckpt")):
        log.warning("%s is unreadable (%s): this run starts afresh", ckpt_dir / "last.ckpt", problem)
        resumable = False
    if trainer.is_global_zero:
        if not resumable:
            shutil.rmtree(ckpt_dir, ignore_errors=True)
            (run_dir / RUN_WEIGHTS).unlink(missing_ok=True)
            write_json(state_path, {"key": run_key, "complete": False})
        else:
            log.info("resuming from %s", ckpt_dir / "last.ckpt")
        # Lightning deletes an earlier metrics file itself, but warns first, on every rerun and
        # resume: the logs start afresh either way, here without the warning.
        if trainer.logger is not None:
            shutil.rmtree(trainer.logger.log_dir, ignore_errors=True)
    trainer.strategy.barrier()
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path="last" if resumable else None)
    except BaseException:
        # A run that stopped before its first checkpoint (bad data, for one) has nothing to resume
        # from: it leaves no state, logs or empty directory behind, up to the directories it made.
        if trainer.is_global_zero and not (ckpt_dir / "last.ckpt").is_file():
            state_path.unlink(missing_ok=True)
            if trainer.logger is not None:
                shutil.rmtree(trainer.logger.log_dir, ignore_errors=True)
            shutil.rmtree(ckpt_dir, ignore_errors=True)
            for directory in [run_dir, *run_dir.parents]:
                try:
                    directory.rmdir()
                except OSError:  # not empty: another run's, or the caller's
                    break
                if directory == made or made is None:
                    break
        raise
    # Every rank takes part in gathering a sharded module's state; only rank zero writes it.
    weights = module.state_dict()
    if trainer.is_global_zero:
        keep = os.environ.get(KEEP_RUN_WEIGHTS, "1") != "0"
        if keep:
            torch.save(weights, run_dir / RUN_WEIGHTS)
        write_json(state_path, {"key": run_key, "complete": True, "global_step": trainer.global_step,
                                "weights_sha256": _sha256(run_dir / RUN_WEIGHTS) if keep else None})
        # Checkpoints exist to resume a cut run, and a complete one never resumes (a rerun trains
        # afresh). Kept, they fill the disk: at `paper` each holds the optimizer states, 3 GB per
        # Manticore run and tens of runs per stage.
        shutil.rmtree(ckpt_dir, ignore_errors=True)
