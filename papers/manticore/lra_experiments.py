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
`LRATaskConfig` (`task`), as `LRADataModule` does. Every network trains once per seed (its
initialisation and the order of its batches), in worker processes. The results hold no verdicts: the report
judges Table 3 (Manticore against the better component) and Table 7 (the programmed hybrid against the
component that reads the task) from every seed's run, with `lra_sizing`'s chance levels and budgets.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "lra", "run-dir", "out")

import logging
import statistics
from dataclasses import asdict, replace
from pathlib import Path
from typing import Literal

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn

from common.data.lra import vocab_size
from common.errors import ConfigError, exit_on_user_error
from common.io import write_json
from common.models.lm import LanguageModel, LMConfig
from common.parallel import run_jobs
from common.training.modules import SequenceClassificationModule
from common.training.optim import OptimConfig
from papers.manticore.alphas import exclude
from papers.manticore.hybrid import Manticore, ManticoreConfig
from papers.manticore.lra_config import (
    LRA_TASKS,
    LRAExperimentsConfig,
    can_read,
    component_classifier,
    max_positions,
    prepare_task,
    run_base,
    train_and_score,
)
from papers.manticore.search import ManticoreSearchModule, SearchConfig, alpha_trajectory

log = logging.getLogger("lra_experiments")


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
        return F.cross_entropy(logits.float(), label), logits, label


# --- config --------------------------------------------------------------------------------------------


def programmed_alphas(n_blocks: int, n_components: int, excluded: list[int]) -> torch.Tensor:
    """Exactly 0 on every excluded component in every block, uniform on the others."""
    alphas = exclude(n_blocks, n_components, excluded[0])
    alphas[:, excluded] = 0.0
    return alphas / alphas.sum(-1, keepdim=True)


# --- one network on one task, one seed (a worker job) -----------------------------------------------


def excluded_components(configs: dict[str, LMConfig], length: int) -> list[int]:
    """The components that cannot read `length`-token sequences, by index."""
    return [m for m, lm in enumerate(configs.values()) if not can_read(lm, length)]


def train_network(cfg: LRAExperimentsConfig, task: str, model: str, seed: int, lra_dir: Path, run_dir: Path) -> dict:
    """A component alone, or the hybrid of all of them (`model="manticore"`), trained on `task` with
    `seed` and scored: searched mixture weights where every component reads the task, programmed
    ones (the unreadable components at exactly 0) where some cannot."""
    entry = cfg.tasks[task]
    trainer = replace(cfg.trainer, max_steps=entry.max_steps or cfg.trainer.max_steps)
    prepared = prepare_task(cfg, task, lra_dir, seed)
    configs, n_classes, base = prepared.configs, prepared.n_classes, run_base(cfg, prepared, seed)
    if model != "manticore":
        lm = configs[model]
        result, _ = train_and_score(lambda: component_classifier(lm, n_classes, cfg), prepared.data, trainer,
                                    run_dir, {**base, "model": model, "lm": asdict(lm)}, prepared.scored, seed)
        return {"seed": seed, **result}

    n_blocks = entry.n_blocks or cfg.n_blocks
    excluded = excluded_components(configs, prepared.length)
    programmed = bool(excluded)
    alphas = programmed_alphas(n_blocks, len(configs), excluded) if programmed else None
    built: dict[str, Manticore] = {}
    hybrid_cfg = ManticoreConfig(n_blocks=n_blocks, vocab_size=vocab_size(prepared.data.task),
                                 alpha_mode="fixed" if programmed else "softmax", use_projectors=cfg.projectors)

    def hybrid_module() -> L.LightningModule:
        hybrid = built["hybrid"] = Manticore([LanguageModel(lm) for lm in configs.values()], hybrid_cfg)
        if programmed:
            hybrid.set_alphas(alphas)
            return SequenceClassificationModule(HybridHidden(hybrid), hybrid.d_model, n_classes, cfg.pooling,
                                                cfg.optim)
        return SearchedClassificationModule(hybrid, n_classes, cfg.pooling, cfg.optim, cfg.search)

    hybrid_config = {**base, "model": "manticore", "components": {c: asdict(lm) for c, lm in configs.items()},
                     "n_blocks": n_blocks, "projectors": cfg.projectors}
    if programmed:
        result, _ = train_and_score(hybrid_module, prepared.data, trainer, run_dir,
                                    {**hybrid_config, "alphas": alphas.tolist()}, prepared.scored, seed)
    else:
        searched = replace(trainer, gradient_clip_val=None)  # the search module clips
        result, run = train_and_score(hybrid_module, prepared.data, searched, run_dir,
                                      {**hybrid_config, "search": asdict(cfg.search)}, prepared.scored, seed)
        result["trajectory"] = alpha_trajectory(run.history, n_blocks, len(configs))
    return {"seed": seed, **result, "mode": "programmed" if programmed else "searched",
            "alphas": built["hybrid"].mixture_weights(sample=False).detach().tolist()}


# --- one task, every seed ------------------------------------------------------------------------------


def task_plan(cfg: LRAExperimentsConfig, name: str, lra_dir: Path) -> dict:
    """What a task's row needs before training: its sequences' length, steps, batch size and the
    components that cannot read it (a task no component can read stops the stage)."""
    prepared = prepare_task(cfg, name, lra_dir, cfg.seeds[0])
    names, length = list(prepared.configs), prepared.length
    excluded = excluded_components(prepared.configs, length)
    if len(excluded) == len(names):
        positions = [max_positions(lm) for lm in prepared.configs.values()]
        raise ConfigError(f"tasks.{name}: no component can read its {length}-token sequences "
                          f"(positions: {positions})")
    reasons = {names[m]: f"sequence length {length} exceeds its {prepared.configs[names[m]].n_ctx} positions"
               for m in excluded}
    return {"source": prepared.source, "task": asdict(prepared.data.task), "sequence_length": length,
            "num_classes": prepared.n_classes, "n_blocks": cfg.tasks[name].n_blocks or cfg.n_blocks,
            "steps": cfg.tasks[name].max_steps or cfg.trainer.max_steps, "batch_size": prepared.batch_size,
            "programmed": bool(excluded), "excluded": list(reasons), "reasons": reasons, "components": names,
            "networks": [n for n in names if n not in reasons] + ["manticore"]}


def task_row(plan: dict, seeds: list[int], runs: dict[str, list[dict]]) -> dict:
    """A task's results: per network its runs (one per seed) and mean accuracy; the better component
    by mean, and Manticore's accuracy minus that component's, per seed."""
    models = {}
    for net in [*plan["components"], "manticore"]:
        if net in plan["reasons"]:
            models[net] = {"runs": False, "reason": plan["reasons"][net]}
            continue
        per_seed = runs[net]
        accuracies = [r["accuracy"] for r in per_seed]
        models[net] = {"runs": True, "accuracy": statistics.fmean(accuracies),
                       "accuracy_std": statistics.stdev(accuracies) if len(accuracies) > 1 else 0.0,
                       "majority_rate": per_seed[0]["majority_rate"], "n": per_seed[0]["n"],
                       "parameters": per_seed[0]["parameters"], "seeds": per_seed}
    hybrid = models["manticore"]
    hybrid.update(mode=hybrid["seeds"][0]["mode"],
                  alphas=torch.tensor([r["alphas"] for r in hybrid["seeds"]]).mean(0).tolist())  # mean over seeds
    ran = [c for c in plan["networks"] if c != "manticore"]
    best = max(ran, key=lambda c: models[c]["accuracy"])
    minus_best = [h["accuracy"] - b["accuracy"] for h, b in zip(hybrid["seeds"], models[best]["seeds"])]
    row = {k: v for k, v in plan.items() if k not in ("reasons", "components", "networks")}
    return {**row, "seeds": seeds, "models": models,
            "best_component": best, "best_component_accuracy": models[best]["accuracy"],
            "manticore_minus_best": minus_best}


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "lra_experiments", LRAExperimentsConfig, shared=LRA_TASKS)

    plans = {name: task_plan(cfg, name, args.lra) for name in cfg.tasks}
    jobs = [{"cfg": cfg, "task": name, "model": net, "seed": seed, "lra_dir": args.lra,
             "run_dir": args.run_dir / name / net / f"seed{seed}"}
            for name, plan in plans.items() for net in plan["networks"] for seed in cfg.seeds]
    def cost(job: dict) -> int:
        """Tokens trained over the run, times the networks that read them (the hybrid runs every
        component that reads the task): the estimate that starts the longest jobs first."""
        plan = plans[job["task"]]
        networks = len(plan["networks"]) - 1 if job["model"] == "manticore" else 1
        return plan["steps"] * plan["sequence_length"] * plan["batch_size"] * networks

    done = run_jobs(train_network, jobs, cfg.trainer.job_workers(cfg.workers), cost=cost)

    rows = {}
    for name, plan in plans.items():
        runs = {net: [done[i] for i, j in enumerate(jobs) if j["task"] == name and j["model"] == net]
                for net in plan["networks"]}
        rows[name] = row = task_row(plan, cfg.seeds, runs)
        log.info("%s (%d tokens, %d seeds): %s", name, row["sequence_length"], len(cfg.seeds),
                 {k: round(v["accuracy"], 3) if v["runs"] else "n/a" for k, v in row["models"].items()})
    # No verdicts here: the report judges every task from the seeds' runs and the sizing stage.
    write_json(args.out, {"profile": profile, "components": list(cfg.components), "seeds": cfg.seeds,
                          "equivalence_margin": cfg.equivalence_margin, "tasks": rows})
    log.info("wrote %s", args.out)


if __name__ == "__main__":
    main()
