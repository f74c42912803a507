"""Stage `mad_sizing`: how many training steps the networks of the MAD tables need before they are
measurably above chance, at the tasks, widths and recipe `mad_experiments` trains them with (the
`mad_tasks` section of params, which both stages read; this one reads nothing of the hybrids').

Tables 2, 5 and 6 compare the test losses of networks trained from scratch; between networks that
have not left chance such a comparison ranks noise. For every task of `mad_tasks` and every
network it trains alone (its components and its existing hybrids), one complete run per budget of
`budgets` (each with its own warmup and cosine schedule, as `mad_experiments` would train at that
`max_steps`; its optimizer, batch size and first seed), validating on the whole test split
`validations` times. The tables' own budget (`mad_tasks`' `max_steps`) is not one of them:
`mad_experiments` trains those networks at it on every seed, and the report reads its runs there,
so nothing trains twice. With no budgets (`tiny`) the stage trains nothing and writes the chance
levels the report judges the tables' runs against.

Chance is the majority-class rate of the scored test targets: a network that always answers the
most frequent target scores it without reading its input. A run is above chance when the exact
one-sided binomial test over the scored positions rejects that rate at `alpha`. Written per task:
chance, the unigram loss of the targets, every run's accuracy, loss and curve, the smallest budget
at which each network is above chance, and the smallest at which all of them are (null: none of
`budgets`).
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "run-dir", "out")

import logging
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from common.claims.rules import run_above_chance
from common.config import bounded, stage_config
from common.data.mad import IGNORE_INDEX, MADTaskConfig, generate, sequence_length
from common.errors import ConfigError, exit_on_user_error
from common.io import write_json
from common.models.lm import LMConfig
from common.parallel import run_jobs
from common.training.mad import build_mad_model, train_module_on_mad
from common.training.modules import CausalLMModule
from papers.manticore.mad_config import MADTasksConfig, baseline_configs, component_configs
from papers.manticore.sizing import smallest

log = logging.getLogger("mad_sizing")


@dataclass
class MADSizingConfig:
    budgets: list[int] = field(default_factory=lambda: [80, 1000])  # training steps, one run each; may be none
    validations: int = bounded(4, ge=1)  # per run, evenly spaced
    alpha: float = bounded(0.01, gt=0, le=0.5)  # of the binomial test against chance
    workers: int | None = bounded(None, ge=1)  # training processes; None: one per core

    def check(self) -> None:
        if any(b < self.validations for b in self.budgets) or len(set(self.budgets)) != len(self.budgets):
            raise ConfigError(f"budgets: distinct step counts, each of at least validations ({self.validations}); "
                              f"got {self.budgets}")


def target_chance(task: MADTaskConfig) -> dict[str, float]:
    """The majority-class rate and the unigram loss (nats) of the task's scored test targets."""
    targets = generate(task)["test_targets"]
    scored = targets[targets != IGNORE_INDEX]
    counts = np.bincount(scored)
    p = counts[counts > 0] / scored.size
    return {"chance": float(counts.max() / scored.size), "chance_loss": float(-(p * np.log(p)).sum()),
            "scored_positions": int(scored.size)}


def size_run(task: MADTaskConfig, lm: LMConfig, budget: int, cfg: MADTasksConfig, sizing: MADSizingConfig,
             run_dir: Path) -> dict:
    """One network trained alone for `budget` steps (a worker job): final scores and the curve."""
    val_batches = math.ceil(task.num_test_examples / cfg.batch_size)
    trainer = replace(cfg.trainer, max_steps=budget, val_every_n_steps=budget // sizing.validations,
                      limit_val_batches=val_batches, checkpoint_every_n_steps=budget, progress_bar=False)

    def build() -> CausalLMModule:
        return CausalLMModule(build_mad_model(lm, task), vocab_size=task.vocab_size, optim=cfg.optim,
                              shift_labels=False, full_window=True)

    scores, run = train_module_on_mad(build, task, trainer, run_dir, cfg.batch_size, cfg.seeds[0],
                                      run_config={"lm": asdict(lm), "optim": asdict(cfg.optim)})
    curve = [[row["step"], row["val/acc"], row["val/loss"]] for row in run.history if "val/acc" in row]
    return {"accuracy": scores["accuracy"], "loss": scores["loss"], "curve": curve}


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    sizing, profile, params = load_stage(args.params, "mad_sizing", MADSizingConfig)
    cfg = stage_config(params, "mad_tasks", MADTasksConfig, profile)
    table_budget = cfg.trainer.max_steps
    if table_budget in sizing.budgets:
        raise ConfigError(f"mad_sizing.budgets: {table_budget} is the tables' own budget (mad_tasks' max_steps), "
                          "which mad_experiments' runs measure; list other budgets")
    budgets = sorted(sizing.budgets)

    tasks, jobs = {}, []
    for entry, task in cfg.tasks().items():
        n_ctx = sequence_length(task)
        networks = {**component_configs(cfg, task.vocab_size, n_ctx), **baseline_configs(cfg, task.vocab_size, n_ctx)}
        tasks[entry] = {"task": task, "networks": list(networks), **target_chance(task)}
        jobs += [{"task": task, "lm": lm, "budget": budget, "cfg": cfg, "sizing": sizing,
                  "run_dir": args.run_dir / entry.replace("/", "_") / name / f"steps{budget}"}
                 for name, lm in networks.items() for budget in budgets]
    # The longest runs first, so that no worker is left with one long run at the end.
    order = sorted(range(len(jobs)), key=lambda i: -jobs[i]["budget"])
    runs = dict(zip(order, run_jobs(size_run, [jobs[i] for i in order], cfg.trainer.job_workers(sizing.workers))))
    args.run_dir.mkdir(parents=True, exist_ok=True)  # an output of the stage, empty without budgets

    results, k = {}, 0
    for entry, info in tasks.items():
        chance, n = info["chance"], info["scored_positions"]
        row = {key: info[key] for key in ("chance", "chance_loss", "scored_positions")}
        row["networks"] = {}
        for name in info["networks"] if budgets else []:  # no budgets: the chance levels alone
            by_budget = {}
            for budget in budgets:
                run = runs[k]
                k += 1
                above = run_above_chance(run["accuracy"], n, chance, sizing.alpha)
                by_budget[budget] = {**run, "above_chance": bool(above)}
            row["networks"][name] = {
                "runs": {str(b): r for b, r in by_budget.items()},
                "above_chance_from": smallest(budgets, {b: r["above_chance"] for b, r in by_budget.items()})}
        froms = [net["above_chance_from"] for net in row["networks"].values()]
        row["all_above_chance_from"] = None if not froms or None in froms else max(froms)
        results[entry] = row
        log.info("%s: chance %.3f; above chance from %s steps", entry, chance,
                 {name: net["above_chance_from"] for name, net in row["networks"].items()})

    summary = {"table_budget": table_budget, "budgets": budgets, "runs": len(jobs)}
    write_json(args.out, {"profile": profile, "seed": cfg.seeds[0], "batch_size": cfg.batch_size,
                          "config": asdict(sizing), "summary": summary, "tasks": results})
    log.info("wrote %s: %s", args.out, summary)


if __name__ == "__main__":
    main()
