"""Stage `lra_experiments`: the paper's Table 3 and Table 7, Long Range Arena from scratch.

For every task: a GPT-Neo-style transformer alone, a Mamba alone, and Manticore[GPT-Neo, Mamba]
built from fresh copies of the same two, each trained as a sequence classifier (final hidden
states, pooled, then a linear head; `common.training.modules.SequenceClassificationModule`).

- Every component can read the task's sequences (Table 3: ListOps, Pathfinder-32, and at `paper`
  IMDb and CIFAR-10): the hybrid's mixture weights are searched while it trains, on their own
  optimizer (`ManticoreSearchModule`'s split and schedule, with a classification loss).
- Some component cannot (Table 7 and Table 3's Pathfinder-X: Pathfinder-64 and -128, 4096 and
  16384 pixels, against GPT-Neo's table of learned positions): the task's metadata programs the
  weights instead. That component gets an exact zero in every block (`alphas.exclude`, fixed
  alphas), so the hybrid never calls it and reduces to the others. The component alone is not
  run; it is reported as unable to read the sequence.

A component "can read" a task when it has no learned positions, or when its `n_ctx` (its number of
positions, a property of the component, never stretched to fit) covers the longest sequence.

Tasks come from the root `lra_generate` stage's directories (`data`) or are generated here from an
`LRATaskConfig` (`task`), as `LRADataModule` does. Claims checked: Manticore matches or beats the
better component on most searched tasks; the programmed hybrid trains where GPT-Neo cannot.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "lra", "run-dir", "out")

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Subset

from common.config import bounded, deep_merge, from_dict
from common.data.lra import LRATaskConfig, num_classes, vocab_size
from common.data.manifest import MANIFEST
from common.data.task_datamodules import LRADataModule, collate_arrays
from common.errors import ConfigError, DataError, exit_on_user_error
from common.io import write_json
from common.models.lm import LanguageModel, LMConfig
from common.training.lra import evaluate_classifier
from common.training.mad import lm_backbone
from common.training.modules import SequenceClassificationModule
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig, TrainingRun, run_training
from papers.manticore.alphas import exclude
from papers.manticore.hybrid import Manticore, ManticoreConfig
from papers.manticore.search import ManticoreSearchModule, SearchConfig, alpha_trajectory

log = logging.getLogger("lra_experiments")

GENERATE_HINT = "run `dvc repro lra_generate` first"


# --- a hybrid as a sequence classifier ----------------------------------------------------------------


class HybridHidden(nn.Module):
    """A hybrid as a backbone: ids -> its final hidden states `[B, T, D]`, the `net` that
    `SequenceClassificationModule` pools (fixed mixture weights)."""

    def __init__(self, hybrid: Manticore):
        super().__init__()
        self.hybrid = hybrid

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.hybrid.hidden(input_ids)


class HybridClassifier(nn.Module):
    """Class logits from a hybrid: its final hidden states, pooled as `SequenceClassificationModule`
    pools, through a linear head. It shows the hybrid's mixture weights (`cfg`, `mixture_weights`,
    `arch_parameters`), so `ManticoreSearchModule` drives it as it drives a hybrid; the head is part
    of this network, so the weights' optimizer trains it."""

    pool = SequenceClassificationModule.pool

    def __init__(self, hybrid: Manticore, n_classes: int, pooling: Literal["last", "mean"] = "last"):
        super().__init__()
        if pooling not in ("last", "mean"):
            raise ValueError(f"pooling must be 'last' or 'mean', got {pooling!r}")
        self.hybrid, self.pooling = hybrid, pooling
        self.head = nn.Linear(hybrid.d_model, n_classes)

    @property
    def cfg(self) -> ManticoreConfig:
        return self.hybrid.cfg

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape, device=input_ids.device)
        return self.head(self.pool(self.hybrid.hidden(input_ids), attention_mask))

    def mixture_weights(self, sample: bool = True) -> torch.Tensor:
        return self.hybrid.mixture_weights(sample)

    def arch_parameters(self) -> list[nn.Parameter]:
        return self.hybrid.arch_parameters()

    def aux_loss(self) -> torch.Tensor | None:
        return self.hybrid.aux_loss()


class SearchedClassificationModule(ManticoreSearchModule):
    """`ManticoreSearchModule` (weights and mixture weights on their own optimizers, alternating or
    simultaneous updates) with a classification loss on `LRADataModule` batches
    (`input_ids`, `attention_mask`, `label`); its accuracy metrics count classes."""

    def __init__(self, hybrid: Manticore, n_classes: int, pooling: Literal["last", "mean"] = "last",
                 optim: OptimConfig | None = None, search: SearchConfig | None = None):
        super().__init__(HybridClassifier(hybrid, n_classes, pooling), n_classes, optim, search, shift_labels=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.net(input_ids, attention_mask)

    def _step(self, batch):
        logits, label = self(batch["input_ids"], batch.get("attention_mask")), batch["label"]
        return F.cross_entropy(logits.float(), label), logits.argmax(-1), label


# --- config --------------------------------------------------------------------------------------------


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
class LRAExperimentsConfig:
    seed: int = 0
    tasks: dict[str, LRATask] = field(default_factory=dict)
    # Components as LanguageModel configs without vocab_size (set by each task); a component with
    # learned positions states its `n_ctx`, the longest sequence it can read.
    components: dict[str, dict[str, Any]] = field(default_factory=dict)
    n_blocks: int = bounded(2, ge=1)  # Manticore blocks; must divide every component's depth
    projectors: bool = False  # the paper trains from-scratch hybrids without projectors
    pooling: Literal["last", "mean"] = "last"
    search: SearchConfig = field(default_factory=lambda: SearchConfig(arch_lr=0.1, update="simultaneous"))
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    batch_size: int = bounded(32, ge=1)
    eval_examples: int | None = bounded(None, ge=1)  # validation examples scored after training; None: all
    match_tolerance: float = bounded(0.01, ge=0)  # accuracy below the better component still counted as a match

    def check(self) -> None:
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
            configs = self.component_configs(task_name, vocab=2, length=1)
            n_blocks = task.n_blocks or self.n_blocks
            for name, lm in configs.items():
                if len(lm.layers) % n_blocks:
                    raise ConfigError(f"tasks.{task_name}: n_blocks {n_blocks} must divide every component's depth; "
                                      f"{name} has {len(lm.layers)} blocks")

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


def max_positions(lm: LMConfig) -> int | None:
    """The longest sequence a component can read: its learned position table, else unbounded."""
    return lm.n_ctx if lm.pos_embedding == "learned" else None


def programmed_alphas(n_blocks: int, n_components: int, excluded: list[int]) -> torch.Tensor:
    """Exactly 0 on every excluded component in every block, uniform on the others."""
    alphas = exclude(n_blocks, n_components, excluded[0])
    alphas[:, excluded] = 0.0
    return alphas / alphas.sum(-1, keepdim=True)


# --- one task ------------------------------------------------------------------------------------------


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


def run_task(cfg: LRAExperimentsConfig, name: str, lra_dir: Path, run_root: Path) -> dict:
    entry = cfg.tasks[name]
    batch_size = entry.batch_size or cfg.batch_size
    trainer = replace(cfg.trainer, max_steps=entry.max_steps or cfg.trainer.max_steps)
    data, source = load_task(entry, lra_dir, batch_size, cfg.seed)
    task = data.task
    length = max(split["input_ids"].shape[1] for split in data.splits.values())
    n_classes, n_blocks = num_classes(task), entry.n_blocks or cfg.n_blocks
    configs = cfg.component_configs(name, vocab_size(task), length)
    names = list(configs)
    scored = eval_loader(data, entry.eval_examples or cfg.eval_examples, batch_size)
    base = {"task": asdict(task), "source": source, "batch_size": batch_size, "seed": cfg.seed,
            "optim": asdict(cfg.optim), "pooling": cfg.pooling}
    positions = [max_positions(lm) for lm in configs.values()]
    excluded = [m for m, n in enumerate(positions) if n is not None and n < length]
    if len(excluded) == len(names):
        raise ConfigError(f"tasks.{name}: no component can read its {length}-token sequences "
                          f"(positions: {positions})")

    models = {}
    for m, (comp, lm) in enumerate(configs.items()):
        if m in excluded:
            models[comp] = {"runs": False, "reason": f"sequence length {length} exceeds its {lm.n_ctx} positions"}
            continue
        def component(lm: LMConfig = lm) -> SequenceClassificationModule:
            return SequenceClassificationModule(lm_backbone(lm), lm.d_model, n_classes, cfg.pooling, cfg.optim)

        models[comp], _ = train_and_score(component, data, trainer, run_root / comp,
                                          {**base, "model": comp, "lm": asdict(lm)}, scored, cfg.seed)
        models[comp]["runs"] = True

    programmed = bool(excluded)
    built: dict[str, Manticore] = {}

    def hybrid_module() -> L.LightningModule:
        hybrid = built["hybrid"] = Manticore([LanguageModel(lm) for lm in configs.values()],
                                             ManticoreConfig(n_blocks=n_blocks, vocab_size=vocab_size(task),
                                                             alpha_mode="fixed" if programmed else "softmax",
                                                             use_projectors=cfg.projectors))
        if programmed:
            hybrid.set_alphas(alphas)
            return SequenceClassificationModule(HybridHidden(hybrid), hybrid.d_model, n_classes, cfg.pooling,
                                                cfg.optim)
        return SearchedClassificationModule(hybrid, n_classes, cfg.pooling, cfg.optim, cfg.search)

    hybrid_config = {**base, "model": "manticore", "components": {c: asdict(lm) for c, lm in configs.items()},
                     "n_blocks": n_blocks, "projectors": cfg.projectors}
    if programmed:
        alphas = programmed_alphas(n_blocks, len(names), excluded)
        hybrid_config["alphas"] = alphas.tolist()
        result, _ = train_and_score(hybrid_module, data, trainer, run_root / "manticore", hybrid_config, scored,
                                    cfg.seed)
    else:
        result, run = train_and_score(hybrid_module, data, replace(trainer, gradient_clip_val=None),  # it clips
                                      run_root / "manticore", {**hybrid_config, "search": asdict(cfg.search)},
                                      scored, cfg.seed)
        result["trajectory"] = alpha_trajectory(run.history, n_blocks, len(names))
    hybrid = built["hybrid"]
    result.update(runs=True, mode="programmed" if programmed else "searched",
                  alphas=hybrid.mixture_weights(sample=False).detach().tolist())
    models["manticore"] = result

    ran = [c for c in names if models[c]["runs"]]
    best = max(models[c]["accuracy"] for c in ran)
    row = {"source": source, "task": asdict(task), "sequence_length": length, "num_classes": n_classes,
           "n_blocks": n_blocks, "steps": trainer.max_steps, "batch_size": batch_size,
           "programmed": programmed, "excluded": [names[m] for m in excluded], "models": models,
           "best_component_accuracy": best,
           "manticore_matches_best_component": result["accuracy"] >= best - cfg.match_tolerance}
    log.info("%s (%d tokens): %s", name, length,
             {k: round(v["accuracy"], 3) if v["runs"] else "n/a" for k, v in models.items()})
    return row


def summarise(rows: dict[str, dict], tolerance: float) -> dict:
    """The claims: on searched tasks where some model beats chance (the majority-class rate),
    Manticore matches or beats the better component; on programmed tasks the hybrid trains at all."""
    def above(r, m):
        return r["models"][m]["runs"] and r["models"][m]["accuracy"] > r["models"][m]["majority_rate"]

    searched = {k: r for k, r in rows.items() if not r["programmed"]}
    decided = [k for k, r in searched.items() if any(above(r, m) for m in r["models"])]
    matched = sum(searched[k]["manticore_matches_best_component"] for k in decided)
    programmed = {
        k: {"sequence_length": r["sequence_length"], "excluded": r["excluded"], "hybrid_runs": True,
            "accuracy": r["models"]["manticore"]["accuracy"], "above_chance": above(r, "manticore"),
            "alone": {c: v["accuracy"] for c, v in r["models"].items() if c != "manticore" and v["runs"]}}
        for k, r in rows.items() if r["programmed"]}
    return {"searched_tasks": len(searched), "tasks_above_chance": decided,
            "at_chance": sorted(set(searched) - set(decided)),
            "manticore_matches_or_beats_best_component": matched,
            "on_most_tasks_above_chance": matched > len(decided) / 2 if decided else None,
            "match_tolerance": tolerance, "programmed": programmed}


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "lra_experiments", LRAExperimentsConfig)

    rows = {name: run_task(cfg, name, args.lra, args.run_dir / name) for name in cfg.tasks}
    summary = summarise(rows, cfg.match_tolerance)
    write_json(args.out, {"profile": profile, "components": list(cfg.components), "summary": summary, "tasks": rows})
    log.info("wrote %s: %s", args.out, {k: v for k, v in summary.items() if k != "programmed"})


if __name__ == "__main__":
    main()
