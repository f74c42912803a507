"""Stage `mad_suite`: train one `LanguageModel` config on a list of named MAD settings and score it.

Each entry of `settings` is `<setting set>/<task>`, e.g. `manticore/in-context-recall`, with the
sets of `common/data/mad.py` (`mad_baseline`, `manticore`, `manticore_as_run`). `overrides` change
fields of every entry's task config (e.g. fewer examples at `tiny`), `task_overrides` those of one
task. Every entry trains a fresh model from the same seed, in a worker process (`workers`;
`common.parallel`).

Writes a JSON with, per entry, the task config, test accuracy over scored positions, class-averaged
accuracy, loss, the accuracy of a uniform guess over the answer tokens, and the MAD score (mean
accuracy over entries, and its class-averaged twin); and the same as a markdown table.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "run-dir", "metrics", "table")

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from common.config import bounded, seed_field
from common.data import mad
from common.errors import exit_on_user_error
from common.io import atomic_file, write_json
from common.models.lm import LMConfig
from common.parallel import run_jobs
from common.training.mad import train_on_mad
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig

log = logging.getLogger("mad_suite")


@dataclass
class MADSuiteConfig(mad.MADSelection):
    seed: int = seed_field()
    model: LMConfig = field(default_factory=LMConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    batch_size: int = bounded(32, ge=1)
    workers: int | None = bounded(None, ge=1)  # training processes, one entry each; None: one per core


def chance_accuracy(task: mad.MADTaskConfig) -> float:
    """Accuracy of a uniform guess over the tokens that can be an answer (the value tokens; for
    compression the content tokens, though its last position, the compression token, is fixed)."""
    V = task.vocab_size
    if task.task in ("in-context-recall", "noisy-in-context-recall"):
        ns = (V if task.multi_query else V - 1) - task.noise_vocab_size
        return 1 / (ns - ns // 2)
    if task.task == "fuzzy-in-context-recall":
        ns = V - (1 if task.multi_query else 2) - task.noise_vocab_size
        return 1 / (ns - ns // 2)
    if task.task == "memorization":
        return 1 / ((V - 1) // 2)
    return 1 / (V - 2) if task.task == "selective-copying" else 1 / (V - 1)


def markdown_table(results: dict[str, Any]) -> str:
    lines = [f"MAD suite ({results['profile']}): model `{results['model']['pattern']}` x {results['model']['repeat']}, "
             f"d_model {results['model']['d_model']}",
             "",
             "| setting | vocab | seq_len | train | accuracy | class-averaged | loss | chance |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in results["tasks"].items():
        t = r["task"]
        scores = " | ".join(f"{r[key]:.3f}" for key in ("accuracy", "class_averaged_accuracy", "loss", "chance"))
        lines.append(f"| {name} | {t['vocab_size']} | {t['seq_len']} | {t['num_train_examples']} | {scores} |")
    lines += ["", f"MAD score (mean accuracy): **{results['mad_score']:.3f}**; "
                  f"class-averaged: {results['mad_score_class_averaged']:.3f}", ""]
    return "\n".join(lines)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "mad_suite", MADSuiteConfig)

    tasks = cfg.tasks()
    results: dict[str, Any] = {"profile": profile, "seed": cfg.seed, "model": asdict(cfg.model),
                               "optim": asdict(cfg.optim), "batch_size": cfg.batch_size,
                               "max_steps": cfg.trainer.max_steps, "tasks": {}}
    jobs = [{"lm": cfg.model, "task": task, "trainer": cfg.trainer, "run_dir": args.run_dir / name.replace("/", "__"),
             "optim": cfg.optim, "batch_size": cfg.batch_size, "seed": cfg.seed} for name, task in tasks.items()]
    for (name, task), scores in zip(tasks.items(), run_jobs(train_on_mad, jobs, cfg.trainer.job_workers(cfg.workers))):
        results["tasks"][name] = {**scores, "chance": chance_accuracy(task), "task": asdict(task)}
        log.info("%s: accuracy %.3f (chance %.3f)", name, scores["accuracy"], results["tasks"][name]["chance"])
    results["mad_score"] = mad.mad_score({n: r["accuracy"] for n, r in results["tasks"].items()})
    results["mad_score_class_averaged"] = mad.mad_score(
        {n: r["class_averaged_accuracy"] for n, r in results["tasks"].items()})

    write_json(args.metrics, results)
    with atomic_file(args.table) as handle:
        handle.write(markdown_table(results))
    log.info("MAD score %.3f; wrote %s and %s", results["mad_score"], args.metrics, args.table)


if __name__ == "__main__":
    main()
