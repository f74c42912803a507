"""Whether the synthetic tasks are learnable at `tiny`: a small Llama-style model and a small Mamba,
both from the block library, trained on MAD in-context recall (the `tiny` block of section
`mad_suite` in `params.yaml`) and on ListOps (the `tiny` block of `lra_generate`), scored on the
held-out split against each task's chance level. The four runs go to `common.parallel.run_jobs`
(one thread each); about a minute a run on one core.

    python -m benchmarks.task_learnability [--out PATH]

Chance is the uniform guess over the value tokens for recall (half the vocabulary: at 16, keys 0-7
and values 8-15) and the majority class of the validation labels for ListOps. `tests/test_task_learnability.py`
(`make test-slow`) runs the same functions and asserts both models beat chance.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from common.config import load_yaml, stage_config
from common.data.lra import lra_splits
from common.errors import ArgumentParser, exit_on_user_error
from common.io import write_json
from common.parallel import run_jobs
from common.stage_times import machine
from common.stages.lra_generate import LRAGenerateConfig
from common.stages.mad_suite import MADSuiteConfig
from common.training.lra import train_on_lra
from common.training.mad import train_on_mad

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "task_learnability.json"
MODELS = {"Llama-style": {"pattern": "attn,swiglu", "blocks": {"attn": {"n_heads": 4}}},
          "Mamba": {"pattern": "mamba,swiglu", "blocks": {}}}
LISTOPS_STEPS, LISTOPS_BATCH = 600, 32


def tiny_suite() -> MADSuiteConfig:
    return stage_config(load_yaml(ROOT / "params.yaml"), "mad_suite", MADSuiteConfig, profile="tiny")


def recall(model: str, run_dir: Path) -> dict:
    """In-context recall at the suite's `tiny` settings: test accuracy and chance."""
    cfg = tiny_suite()
    task = cfg.tasks()["mad_baseline/in-context-recall"]
    scores = train_on_mad(replace(cfg.model, **MODELS[model]), task, cfg.trainer, run_dir, optim=cfg.optim,
                          batch_size=cfg.batch_size, seed=cfg.seed)
    return {"name": f"in-context recall, V {task.vocab_size}, L {task.seq_len}", "steps": cfg.trainer.max_steps,
            "accuracy": scores["accuracy"], "chance": 2 / task.vocab_size,  # half the vocabulary are values
            "chance_is": f"1 of {task.vocab_size // 2} values"}


def listops(model: str, run_dir: Path) -> dict:
    """ListOps at the `tiny` sizes of `lra_generate`: validation accuracy and the majority class."""
    cfg = tiny_suite()
    task = stage_config(load_yaml(ROOT / "params.yaml"), "lra_generate", LRAGenerateConfig, profile="tiny")
    task = task.tasks["listops"]
    trainer = replace(cfg.trainer, max_steps=LISTOPS_STEPS, val_every_n_steps=LISTOPS_STEPS,
                      checkpoint_every_n_steps=LISTOPS_STEPS)
    scores = train_on_lra(replace(cfg.model, **MODELS[model]), task, trainer, run_dir, optim=cfg.optim,
                          batch_size=LISTOPS_BATCH, seed=cfg.seed)
    labels = lra_splits(task)["validation"]["label"]
    return {"name": f"ListOps, {task.min_len}-{task.max_len} tokens, depth <= {task.max_depth}",
            "steps": LISTOPS_STEPS, "accuracy": scores["accuracy"],
            "chance": float(np.bincount(labels).max() / len(labels)), "chance_is": "majority class"}


TASKS = {"recall": recall, "listops": listops}


def job(task: str, model: str, run_dir: str) -> dict:
    return TASKS[task](model, Path(run_dir))


@exit_on_user_error
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT, help="where the results go (a check run: elsewhere)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        jobs = [{"task": task, "model": model, "run_dir": f"{work}/{task}_{model}"}
                for task in TASKS for model in MODELS]
        scores = run_jobs(job, jobs)
    tasks = []
    for task in TASKS:
        mine = [(j["model"], s) for j, s in zip(jobs, scores) if j["task"] == task]
        tasks.append({key: mine[0][1][key] for key in ("name", "steps", "chance", "chance_is")}
                     | {"accuracy": {model: s["accuracy"] for model, s in mine}})
    cpu, suite = machine(), tiny_suite()
    write_json(args.out, {"models": {m: f"{MODELS[m]['pattern']} x {suite.model.repeat}" for m in MODELS},
                          "tasks": tasks, "seed": suite.seed, "date": datetime.date.today().isoformat(),
                          "machine": f"{cpu['cpu']}, {cpu['torch_cpu_capability']}"})
    for task in tasks:
        print(task["name"], task["accuracy"], f"chance {task['chance']:.3f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
