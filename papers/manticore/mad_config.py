"""The MAD tables' configuration and the networks it names, in two sections of params.yaml:

- `mad_tasks` (`MADTasksConfig`): the tasks, the networks trained on them alone (components and
  existing hybrids) and their recipe. Read by the `mad_experiments` stage, which trains the tables,
  and by `mad_sizing`, which measures how many steps those same networks need to leave chance on
  those same tasks.
- `mad_experiments` (`MADExperimentsConfig`, which reads `mad_tasks` too): the Manticore hybrids,
  their search and retraining. Only `mad_experiments` reads it, so changing the search reruns only it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from common.config import bounded, check_distinct, from_dict, seeds_field
from common.data.mad import MADSelection
from common.errors import ConfigError
from common.models.lm import LMConfig
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig
from papers.manticore.search import SearchConfig

Retraining = Literal["discretized", "frozen"]


@dataclass
class HybridConfig:
    """A further Manticore hybrid: component names from `components` or `baselines`, in order."""

    components: list[str] = field(default_factory=list)
    n_blocks: int = bounded(2, ge=1)  # Manticore blocks; must divide every component's depth
    # After search, rewind and retrain: argmax alphas ("discretized") or the searched ones ("frozen").
    retrain: list[Retraining] = field(default_factory=lambda: ["discretized"])
    compare: Literal["search", "discretized", "frozen"] = "discretized"  # the result compared with baselines

    def check(self) -> None:
        if len(self.components) < 2:
            raise ConfigError(f"components: a hybrid needs at least two, got {self.components}")
        check_distinct(self.components, "components")
        check_distinct(self.retrain, "retrain", at_least=0)
        if self.compare != "search" and self.compare not in self.retrain:
            raise ConfigError(f"compare: {self.compare!r} is not retrained (retrain: {self.retrain}); "
                              f"allowed: search, {', '.join(self.retrain) or 'nothing else'}")


@dataclass
class ProgrammingSearch:
    """The MAD search whose alphas program Figure 2 (right): the paper's appendix E.3 runs it with
    its own mixture-weight rate (0.01, simultaneous updates) and, as every from-scratch hybrid here,
    no projectors. `n_blocks` must match the `programmed` stage's."""

    n_blocks: int = bounded(2, ge=1)
    search: SearchConfig = field(default_factory=lambda: SearchConfig(arch_lr=0.01, update="simultaneous"))


@dataclass
class MADTasksConfig(MADSelection):
    # Every network of every task trains once per seed (the tables); `mad_sizing` trains the first.
    seeds: list[int] = seeds_field(0, 1, 2)
    # Components as LanguageModel configs without vocab_size / n_ctx (set by each task).
    components: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Existing hybrids trained alone, as the components are (LanguageModel configs, same form).
    baselines: dict[str, dict[str, Any]] = field(default_factory=dict)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    batch_size: int = bounded(32, ge=1)

    def check(self) -> None:
        super().check()
        check_distinct(self.seeds, "seeds")
        if len(self.components) < 2:
            raise ConfigError(f"components: a hybrid needs at least two, got {list(self.components)}")
        if any(t.task == "compression" for t in self.tasks().values()):
            raise ConfigError("settings: compression is not a next-token task; Manticore's MAD table leaves it out")
        if both := sorted(set(self.components) & set(self.baselines)):
            raise ConfigError(f"baselines.{both[0]}: also a component; give it another name")
        for group, models in (("components", self.components), ("baselines", self.baselines)):
            for name, raw in models.items():
                from_dict(LMConfig, raw, where=f"{group}.{name}")


MAD_TASKS = ("mad_tasks", MADTasksConfig)  # the section `mad_experiments` reads besides its own


@dataclass
class MADExperimentsConfig(MADTasksConfig):
    n_blocks: int = bounded(1, ge=1)  # of Manticore[components]: the paper's Table 2 (right) uses one
    # The paper trains from-scratch hybrids without projectors (its section 3.2); the official code
    # maps only the Mamba path through one ungated linear layer.
    projectors: bool = False
    retrain: list[Retraining] = field(default_factory=lambda: ["discretized"])  # of Manticore[components]
    hybrids: dict[str, HybridConfig] = field(default_factory=dict)
    search: SearchConfig = field(default_factory=lambda: SearchConfig(arch_lr=0.1, update="simultaneous"))
    programming: ProgrammingSearch | None = None
    # Rates other than `optim.lr`, per task (its name in `settings`) and run (a component, a
    # baseline, `manticore` or a hybrid, with its retrainings): where `mad_lr_check` found one better.
    model_lr: dict[str, dict[str, float]] = field(default_factory=dict)
    workers: int | None = bounded(None, ge=1)  # training processes; None: one per core

    def lr_of(self, entry: str, name: str) -> float:
        """The rate run `name` trains at on task `entry` (`<setting set>/<task>`)."""
        return self.model_lr.get(entry.split("/")[1], {}).get(name, self.optim.lr)

    def run_names(self) -> list[str]:
        """The runs a rate can be named for: each network alone, Manticore's search, each hybrid."""
        return [*self.components, *self.baselines, "manticore", *self.hybrids]

    def run_rates(self) -> dict[str, dict[str, float]]:
        """Every task's and run's rate, as the results record them."""
        return {entry: {name: self.lr_of(entry, name) for name in self.run_names()} for entry in self.tasks()}

    def scaled(self, factor: float) -> MADExperimentsConfig:
        """This config with every rate, `optim.lr` and each of `model_lr`, times `factor`."""
        return replace(self, optim=replace(self.optim, lr=self.optim.lr * factor),
                       model_lr={task: {name: lr * factor for name, lr in rates.items()}
                                 for task, rates in self.model_lr.items()})

    def check(self) -> None:
        super().check()
        check_distinct(self.retrain, "retrain", at_least=0)
        depths = {name: len(from_dict(LMConfig, raw, where=name).layers)
                  for name, raw in {**self.components, **self.baselines}.items()}
        if self.hybrids and not self.baselines:
            raise ConfigError("hybrids: compared with existing hybrids, but baselines is empty")
        runs = [*depths, "manticore", *(f"manticore_{mode}" for mode in self.retrain), "programming"]
        for name, hybrid in self.hybrids.items():
            for run in (name, *(f"{name}_{mode}" for mode in hybrid.retrain)):
                if run in runs:
                    raise ConfigError(f"hybrids.{name}: its run {run!r} would share a run directory; "
                                      f"taken: {', '.join(runs)}")
                runs.append(run)
        layouts = [("components", "n_blocks", list(self.components), self.n_blocks),
                   *((f"hybrids.{h}.components", f"hybrids.{h}.n_blocks", hy.components, hy.n_blocks)
                     for h, hy in self.hybrids.items())]
        if self.programming is not None:
            layouts.append(("components", "programming.n_blocks", list(self.components), self.programming.n_blocks))
        for label, blocks_key, names, n_blocks in layouts:
            for name in names:
                if name not in depths:
                    raise ConfigError(f"{label}: {name!r} is neither a component nor a baseline; "
                                      f"known: {', '.join(depths)}")
                if depths[name] % n_blocks:
                    raise ConfigError(f"{blocks_key}: {n_blocks} must divide the depth of every hybrid component; "
                                      f"{name} has {depths[name]} blocks (in {label})")
        tasks, runs = [entry.split("/")[1] for entry in self.tasks()], self.run_names()
        for task, rates in self.model_lr.items():
            if task not in tasks:
                raise ConfigError(f"model_lr.{task}: not a task of settings; allowed: {', '.join(tasks)}")
            for name, lr in rates.items():
                if name not in runs:
                    raise ConfigError(f"model_lr.{task}.{name}: not a run of the tables; allowed: {', '.join(runs)}")
                if not (isinstance(lr, (int, float)) and lr > 0):
                    raise ConfigError(f"model_lr.{task}.{name}: a learning rate must be a positive number; got {lr!r}")


def lm_configs(models: dict[str, dict[str, Any]], vocab_size: int, n_ctx: int, where: str) -> dict[str, LMConfig]:
    return {name: from_dict(LMConfig, {**raw, "vocab_size": vocab_size, "n_ctx": n_ctx}, where=f"{where}.{name}")
            for name, raw in models.items()}


def component_configs(cfg: MADTasksConfig, vocab_size: int, n_ctx: int) -> dict[str, LMConfig]:
    return lm_configs(cfg.components, vocab_size, n_ctx, "mad_tasks.components")


def baseline_configs(cfg: MADTasksConfig, vocab_size: int, n_ctx: int) -> dict[str, LMConfig]:
    return lm_configs(cfg.baselines, vocab_size, n_ctx, "mad_tasks.baselines")

