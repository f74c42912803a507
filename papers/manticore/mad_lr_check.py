"""Stage `mad_lr_check`: are the MAD tables' networks trained at their best learning rate?

Tables 2 and 5 compare networks trained from scratch, each run at its rate (`mad_tasks`' `optim.lr`
unless `mad_experiments.model_lr` names another for that task); a rate that suits Manticore and not
a component (or an existing hybrid) would make the table say so. For every MAD task, the first seed
of `mad_experiments` runs again as that stage runs it (every network alone, Manticore's search and
the hybrids' searches with their retrainings; the programming search, which no table compares, is
left out) at each run's rate times each of `factors` but 1. The run at its own rate is
`mad_experiments`' first seed, not trained again here: the claims ledger reads both files, and a
run whose best test loss is lower at another rate, by more than its seeds' spread, gates the MAD rows.

Apart from `mad_experiments`, so that the check is paid for once: it reruns when the sections it
reads or its factors change, and a fresh clone keeps the committed result. Its runs' directory is
scratch (kept for resuming), not a DVC output. No factors: nothing is checked.

Writes `results/mad_lr_check.json`: the seed, the factors, the tables' rate (`own_lr`), each run's
own rate per task (`lr`), and per task and multiple of the tables' rate the row `mad_experiments`
writes per seed.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "run-dir", "out")

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

from common.config import bounded, check_distinct, stage_config
from common.data.mad import sequence_length
from common.errors import ConfigError, exit_on_user_error
from common.io import write_json
from common.parallel import run_jobs
from papers.manticore.mad_config import MAD_TASKS, MADExperimentsConfig, baseline_configs, component_configs
from papers.manticore.mad_runs import job_cost, run_job, table_row

log = logging.getLogger("mad_lr_check")


@dataclass
class MADLRCheckConfig:
    # Multiples of each run's rate to try; 1 is mad_experiments' own run, not trained again.
    factors: list[float] = field(default_factory=list)
    workers: int | None = bounded(None, ge=1)  # training processes; None: one per core

    def check(self) -> None:
        check_distinct(self.factors, "factors", at_least=0)
        if bad := [factor for factor in self.factors if not factor > 0]:
            raise ConfigError(f"factors: multiples of a learning rate must be positive; got {bad}")


def check_jobs(cfg: MADExperimentsConfig, factors: list[float], run_root: Path) -> list[dict]:
    """Every job of `mad_experiments`' first seed but the programming search, at its rate times each
    factor but 1; each job's `cfg` carries its rates (`scaled`)."""
    jobs, seed = [], cfg.seeds[0]
    for factor in factors:
        if factor == 1:
            continue
        at = replace(cfg.scaled(factor), programming=None)
        for entry, task in cfg.tasks().items():
            n_ctx = sequence_length(task)
            alone = [*component_configs(cfg, task.vocab_size, n_ctx), *baseline_configs(cfg, task.vocab_size, n_ctx)]
            kinds = [*(("alone", name) for name in alone), ("manticore", "manticore"),
                     *(("hybrid", name) for name in cfg.hybrids)]
            jobs += [{"kind": kind, "name": name, "entry": entry, "seed": seed, "cfg": at,
                      "run_root": run_root / f"lr{at.optim.lr:g}" / entry.replace("/", "_")} for kind, name in kinds]
    return jobs


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    check, profile, params = load_stage(args.params, "mad_lr_check", MADLRCheckConfig)
    cfg = stage_config(params, "mad_experiments", MADExperimentsConfig, profile, shared=MAD_TASKS)
    factors = sorted(check.factors)
    jobs = check_jobs(cfg, factors, args.run_dir)
    args.run_dir.mkdir(parents=True, exist_ok=True)
    done = run_jobs(run_job, jobs, cfg.trainer.job_workers(check.workers), cost=job_cost) if jobs else []
    tasks = {entry: {} for entry in cfg.tasks()}
    for lr in dict.fromkeys(job["cfg"].optim.lr for job in jobs):
        at = next(job["cfg"] for job in jobs if job["cfg"].optim.lr == lr)
        for entry in tasks:
            tasks[entry][f"{lr:g}"] = table_row(at, {job["name"]: result for job, result in zip(jobs, done)
                                                     if job["entry"] == entry and job["cfg"].optim.lr == lr})
    write_json(args.out, {"profile": profile, "seed": cfg.seeds[0], "factors": factors, "own_lr": cfg.optim.lr,
                          "lr": cfg.run_rates(), "tasks": tasks})
    log.info("wrote %s: %d runs", args.out, len(jobs))


if __name__ == "__main__":
    main()
