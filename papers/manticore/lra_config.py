"""The LRA tables' configuration, its tasks, and how a network is trained on one and scored. Two
sections of params.yaml:

- `lra_tasks` (`LRATasksConfig`): the tasks, the components and their recipe. Read by the
  `lra_experiments` stage, which trains the tables, and by `lra_sizing`, which measures how many
  steps the same components need to leave chance on the same tasks.
- `lra_experiments` (`LRAExperimentsConfig`, which reads `lra_tasks` too): the Manticore hybrids and
  their search, read only by `lra_experiments`. A task's own `n_blocks` stays with the task.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import lightning as L
from torch.utils.data import DataLoader, Subset

from common.config import bounded, check_distinct, deep_merge, from_dict, seeds_field
from common.data.lra import LRATaskConfig, num_classes, vocab_size
from common.data.manifest import MANIFEST
from common.data.task_datamodules import LRADataModule, collate_arrays
from common.errors import ConfigError, DataError
from common.models.lm import LMConfig
from common.training.lra import evaluate_classifier
from common.training.mad import lm_backbone
from common.training.modules import SequenceClassificationModule
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig, TrainingRun, run_training
from papers.manticore.search import SearchConfig

GENERATE_HINT = "run `dvc repro lra_generate` first"


@dataclass
class LRATask:
    """One task: a directory of the root `lra_generate` stage (`data`, a name under `--lra`) or an
    `LRATaskConfig` generated here (`task`), with optional per-task sizes (the paper's component
    sizes and step counts differ by task)."""
    data: str | None = None
    task: dict[str, Any] | None = None  # an LRATaskConfig
    components: dict[str, dict[str, Any]] = field(default_factory=dict)  # merged over the stage's components
    n_blocks: int | None = bounded(None, ge=1)
    max_steps: int | None = bounded(None, ge=1)
    batch_size: int | None = bounded(None, ge=1)
    eval_examples: int | None = bounded(None, ge=1)  # None: the stage's

    def check(self) -> None:
        if (self.data is None) == (self.task is None):
            raise ConfigError("data: give exactly one of data (a directory written by lra_generate) or task "
                              "(an LRATaskConfig generated here)")
        if self.task is not None:
            self.lra_task()

    def lra_task(self) -> LRATaskConfig:
        return from_dict(LRATaskConfig, self.task, where="task")


@dataclass
class LRATasksConfig:
    seeds: list[int] = seeds_field(0)  # every network of every task trains once per seed
    tasks: dict[str, LRATask] = field(default_factory=dict)
    # Components as LanguageModel configs without vocab_size (set by each task); a component with
    # learned positions states its `n_ctx`, the longest sequence it can read.
    components: dict[str, dict[str, Any]] = field(default_factory=dict)
    pooling: Literal["last", "mean"] = "last"
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    batch_size: int = bounded(32, ge=1)
    eval_examples: int | None = bounded(None, ge=1)  # validation examples scored after training; None: all

    def check(self) -> None:
        check_distinct(self.seeds, "seeds")
        if not self.tasks:
            raise ConfigError("tasks: empty; name at least one, e.g. listops: {data: listops}")
        if len(self.components) < 2:
            raise ConfigError(f"components: a hybrid needs at least two, got {list(self.components)}")
        for name, raw in self.components.items():
            if "vocab_size" in raw:
                raise ConfigError(f"components.{name}.vocab_size: set by each task, leave it out")
        for task_name, task in self.tasks.items():
            if not task_name.replace("_", "").isalnum():
                raise ConfigError(f"tasks.{task_name}: a task name must be letters, digits and _ "
                                  "(it names a directory)")
            unknown = sorted(set(task.components) - set(self.components))
            if unknown:
                raise ConfigError(f"tasks.{task_name}.components.{unknown[0]}: not a component; "
                                  f"allowed: {', '.join(self.components)}")
            self.component_configs(task_name, vocab=2, length=1)

    def component_configs(self, task_name: str, vocab: int, length: int) -> dict[str, LMConfig]:
        """The task's component configs: its overrides merged in, its vocabulary, and `n_ctx` the
        component's own (learned positions) or the task's sequence length (no position table)."""
        out = {}
        for name, raw in self.components.items():
            raw = deep_merge(raw, self.tasks[task_name].components.get(name, {}))
            where = f"tasks.{task_name}.components.{name}"
            if raw.get("pos_embedding") == "learned" and "n_ctx" not in raw:
                raise ConfigError(f"{where}.n_ctx: a component with learned positions must state how many it has")
            n_ctx = raw["n_ctx"] if raw.get("pos_embedding") == "learned" else max(raw.get("n_ctx", 1), length)
            out[name] = from_dict(LMConfig, {**raw, "vocab_size": vocab, "n_ctx": n_ctx}, where=where)
        return out


LRA_TASKS = ("lra_tasks", LRATasksConfig)  # the section `lra_experiments` reads besides its own


@dataclass
class LRAExperimentsConfig(LRATasksConfig):
    n_blocks: int = bounded(2, ge=1)  # Manticore blocks; must divide every component's depth
    projectors: bool = False  # the paper trains from-scratch hybrids without projectors
    search: SearchConfig = field(default_factory=lambda: SearchConfig(arch_lr=0.1, update="simultaneous"))
    equivalence_margin: float = bounded(0.01, ge=0)  # Table 7: programmed hybrid = its reader alone, within it
    workers: int | None = bounded(None, ge=1)  # training processes; None: one per core

    def check(self) -> None:
        super().check()
        for task_name, task in self.tasks.items():
            n_blocks = task.n_blocks or self.n_blocks
            for name, lm in self.component_configs(task_name, vocab=2, length=1).items():
                if len(lm.layers) % n_blocks:
                    raise ConfigError(f"tasks.{task_name}: n_blocks {n_blocks} must divide every component's depth; "
                                      f"{name} has {len(lm.layers)} blocks")


def max_positions(lm: LMConfig) -> int | None:
    """The longest sequence a component can read: its learned position table, else unbounded."""
    return lm.n_ctx if lm.pos_embedding == "learned" else None


def can_read(lm: LMConfig, length: int) -> bool:
    """Whether a component reads sequences of `length` tokens: no learned positions, or enough of them."""
    return max_positions(lm) is None or max_positions(lm) >= length


def load_task(entry: LRATask, lra_dir: Path, batch_size: int, seed: int) -> tuple[LRADataModule, str]:
    """The task's DataModule, set up; a `data` entry is read back (its manifest names its config)."""
    if entry.task is not None:
        data, source = LRADataModule(entry.lra_task(), batch_size=batch_size, seed=seed), "generated"
    else:
        directory = lra_dir / entry.data
        if not (directory / MANIFEST).is_file():
            raise DataError(f"{directory}: no LRA task directory with a manifest; {GENERATE_HINT}")
        made = json.loads((directory / MANIFEST).read_text()).get("params", {})
        task = from_dict(LRATaskConfig, made, where=f"{directory}/{MANIFEST}:params")
        data, source = LRADataModule(task, batch_size=batch_size, seed=seed, data_dir=directory), str(directory)
    data.setup()
    return data, source


def eval_loader(data: LRADataModule, n: int | None, batch_size: int) -> DataLoader:
    rows = data.val if n is None or n >= len(data.val) else Subset(data.val, range(n))
    return DataLoader(rows, batch_size=batch_size, shuffle=False, collate_fn=collate_arrays)


def train_and_score(build: Callable[[], L.LightningModule], data: LRADataModule, trainer: TrainerConfig,
                    run_dir: Path, run_config: dict, scored: DataLoader, seed: int) -> tuple[dict, TrainingRun]:
    run = run_training(build, data, trainer, run_dir, seed=seed, run_config=run_config,
                       metrics_extra={"model": run_config["model"]})
    params = sum(p.numel() for p in run.module.parameters())
    return {**evaluate_classifier(run.module, scored), "steps": run.steps, "parameters": params}, run


@dataclass
class PreparedTask:
    """One task of the tables, loaded: its data, the components' configs for it, and the examples a
    trained network is scored on."""
    data: LRADataModule
    source: str  # the lra_generate directory it was read from, or "generated"
    length: int  # the longest sequence
    n_classes: int
    batch_size: int
    configs: dict[str, LMConfig]
    scored: DataLoader


def prepare_task(cfg: LRATasksConfig, name: str, lra_dir: Path, seed: int) -> PreparedTask:
    """The task loaded for a run with `seed` (which orders its training batches)."""
    entry = cfg.tasks[name]
    batch_size = entry.batch_size or cfg.batch_size
    data, source = load_task(entry, lra_dir, batch_size, seed)
    length = max(split["input_ids"].shape[1] for split in data.splits.values())
    return PreparedTask(data, source, length, num_classes(data.task), batch_size,
                        cfg.component_configs(name, vocab_size(data.task), length),
                        eval_loader(data, entry.eval_examples or cfg.eval_examples, batch_size))


def component_classifier(lm: LMConfig, n_classes: int, cfg: LRATasksConfig) -> SequenceClassificationModule:
    """A component alone as a sequence classifier: its final hidden states, pooled, then a linear head."""
    return SequenceClassificationModule(lm_backbone(lm), lm.d_model, n_classes, cfg.pooling, cfg.optim)


def run_base(cfg: LRATasksConfig, prepared: PreparedTask, seed: int) -> dict:
    """What every run on the task with `seed` has in its run configuration (and resume key)."""
    return {"task": asdict(prepared.data.task), "source": prepared.source, "batch_size": prepared.batch_size,
            "seed": seed, "optim": asdict(cfg.optim), "pooling": cfg.pooling}
