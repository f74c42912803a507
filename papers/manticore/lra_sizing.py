"""Stage `lra_sizing`: how many training steps the components of the LRA tables need before they are
measurably above chance, at the tasks, widths and recipe `lra_experiments` trains them with (the
`lra_tasks` section of params, which both stages read; this one reads nothing of the hybrids').

Table 3 compares the accuracies of Manticore and its components trained from scratch; between
networks that have not left chance such a comparison ranks noise. For every task named in
`budgets` and every component that can read its sequences, one complete run per budget (each with
its own warmup and cosine schedule, as `lra_experiments` would train at that `max_steps`; its
optimizer, batch size, pooling and first seed), scored on the examples the table scores. The table's own
budget for the task is always one of the budgets: its run is the table's first seed's, read from
`lra_experiments`' results (`--tables`), the same run bit for bit, so nothing trains twice.

Chance is the majority-class rate of the scored examples: a classifier that always answers the most
frequent label scores it without reading its input. A run is above chance when the exact one-sided
binomial test over the scored examples rejects that rate at `alpha`. A component's curve has
flattened at a budget when no larger budget measured scores more than two standard errors of a
difference of two runs above it (`sizing.flat_from`). Written per task: chance, every run's accuracy
and loss, the smallest budget from which each component is above chance and from which it is flat,
and the smallest from which all of them are (null: none of the budgets). The report turns this into
the LRA rows of the claims ledger.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "lra", "tables", "run-dir", "out")

import logging
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from common.claims.rules import run_above_chance
from common.config import bounded, stage_config
from common.errors import ConfigError, DataError, exit_on_user_error
from common.io import load_json, write_json
from common.parallel import run_jobs
from papers.manticore.lra_config import (
    LRATasksConfig,
    can_read,
    component_classifier,
    prepare_task,
    run_base,
    train_and_score,
)
from papers.manticore.sizing import flat_from, smallest

log = logging.getLogger("lra_sizing")


@dataclass
class LRASizingConfig:
    budgets: dict[str, list[int]] = field(default_factory=dict)  # per task of lra_tasks: steps, one run each
    alpha: float = bounded(0.01, gt=0, le=0.5)  # of the binomial test against chance
    workers: int | None = bounded(None, ge=1)  # training processes; None: one per core

    def check(self) -> None:
        if not self.budgets:
            raise ConfigError("budgets: name at least one task of lra_tasks, e.g. listops: [150, 600]")
        for task, budgets in self.budgets.items():
            if not budgets or min(budgets) < 1:
                raise ConfigError(f"budgets.{task}: at least one budget, each of at least 1 step; got {budgets}")


def size_run(cfg: LRATasksConfig, task: str, component: str, budget: int, lra_dir: Path,
             run_dir: Path) -> dict:
    """One component trained alone on `task` for `budget` steps (a worker job): its scores."""
    seed = cfg.seeds[0]
    prepared = prepare_task(cfg, task, lra_dir, seed)
    lm = prepared.configs[component]
    trainer = replace(cfg.trainer, max_steps=budget, checkpoint_every_n_steps=budget)
    scores, _ = train_and_score(lambda: component_classifier(lm, prepared.n_classes, cfg), prepared.data, trainer,
                                run_dir, {**run_base(cfg, prepared, seed), "model": component, "lm": asdict(lm)},
                                prepared.scored, seed)
    return scores


def table_run(tables: dict, task: str, component: str, budget: int, seed: int) -> dict:
    """The table's run of `component` on `task` at the table's `budget` with `seed`, from
    lra_experiments' results, in the form `size_run` returns."""
    row = tables["tasks"].get(task)
    runs = [] if row is None else [r for r in row["models"][component]["seeds"] if r["seed"] == seed]
    if not runs or runs[0]["steps"] != budget:
        raise DataError(f"lra_experiments.json has no run of {component} on {task} at {budget} steps with seed {seed}; "
                        "rerun lra_experiments with lra_tasks' settings")
    return {key: value for key, value in runs[0].items() if key != "seed"}


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    sizing, profile, params = load_stage(args.params, "lra_sizing", LRASizingConfig)
    cfg = stage_config(params, "lra_tasks", LRATasksConfig, profile)
    unknown = sorted(set(sizing.budgets) - set(cfg.tasks))
    if unknown:
        raise ConfigError(f"lra_sizing.budgets.{unknown[0]}: not a task of lra_tasks; "
                          f"allowed: {', '.join(cfg.tasks)}")

    tables = load_json(args.tables, "run the lra_experiments stage first")
    tasks, jobs = {}, []
    for name, listed in sizing.budgets.items():
        table_budget = cfg.tasks[name].max_steps or cfg.trainer.max_steps
        budgets = sorted({*listed, table_budget})
        prepared = prepare_task(cfg, name, args.lra, cfg.seeds[0])  # a task that does not load stops the stage here
        readers = [c for c, lm in prepared.configs.items() if can_read(lm, prepared.length)]
        tasks[name] = {"table_budget": table_budget, "budgets": budgets, "components": readers,
                       "sequence_length": prepared.length}
        jobs += [{"cfg": cfg, "task": name, "component": c, "budget": b, "lra_dir": args.lra,
                  "run_dir": args.run_dir / name / c / f"steps{b}"} for c in readers for b in budgets]
    trained = [job for job in jobs if job["budget"] != tasks[job["task"]]["table_budget"]]
    done = iter(run_jobs(size_run, trained, cfg.trainer.job_workers(sizing.workers), cost=lambda job: job["budget"]))
    runs = [next(done) if job["budget"] != tasks[job["task"]]["table_budget"] else
            table_run(tables, job["task"], job["component"], job["budget"], cfg.seeds[0]) for job in jobs]

    results, k = {}, 0
    for name, info in tasks.items():
        row = {**info, "networks": {}}
        for component in info["components"]:
            by_budget = {}
            for budget in info["budgets"]:
                run = runs[k]
                k += 1
                above = run_above_chance(run["accuracy"], run["n"], run["majority_rate"], sizing.alpha)
                by_budget[budget] = {**run, "above_chance": bool(above)}
            row["chance"] = by_budget[info["budgets"][0]]["majority_rate"]  # the same scored examples in every run
            row["networks"][component] = {
                "runs": {str(b): r for b, r in by_budget.items()},
                "above_chance_from": smallest(info["budgets"], {b: r["above_chance"] for b, r in by_budget.items()}),
                "flat_from": flat_from(info["budgets"], {b: r["accuracy"] for b, r in by_budget.items()},
                                       by_budget[info["budgets"][0]]["n"])}
        for key in ("above_chance_from", "flat_from"):
            froms = [net[key] for net in row["networks"].values()]
            row[f"all_{key}"] = None if None in froms else max(froms)
        results[name] = row
        log.info("%s: chance %.3f; above chance from %s steps; flat from %s", name, row["chance"],
                 {c: net["above_chance_from"] for c, net in row["networks"].items()},
                 {c: net["flat_from"] for c, net in row["networks"].items()})
    write_json(args.out, {"profile": profile, "alpha": sizing.alpha, "components": list(cfg.components),
                          "tasks": results})
    log.info("wrote %s", args.out)


if __name__ == "__main__":
    main()
