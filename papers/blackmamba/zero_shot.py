"""Stage `zero_shot`: Table I's downstream columns, through lm-evaluation-harness.

Every model and seed trained by `train_compare` (except the routing stage's deeper model) is
wrapped as a harness model (`common.eval.lm_eval_adapter`); the evaluations run in worker
processes (`common.parallel`, one torch thread each). At `smoke` and `tiny` the tasks are generated from the story
corpus's validation split and loaded through the harness's local-file task mechanism
(`common.eval.story_tasks`), so the integration runs for real offline. At `paper` the tasks are
the paper's (HellaSwag, PIQA, WinoGrande, LAMBADA, ARC-e/c, OpenBookQA), which the harness
downloads from the Hugging Face Hub.

The paper's claim is that BlackMamba scores above dense models with the same forward-pass
parameters (Table I). The report compares BlackMamba's accuracy with each baseline's, per seed.

A probe must show that it can see learning before it decides anything, so the stage also scores
BlackMamba as initialised, untrained (seed 0's architecture, the stage's seed), against which the
trained models are the positive case. A task decides the comparisons only where the trained models
score measurably above both its chance level and the untrained model (`papers/blackmamba/evidence.py`).
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "models", "tokenizer", "stories", "tasks-dir", "out")

import json
import logging
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase

from common.config import bounded, seed_field
from common.data.manifest import load_dataset_dir
from common.data.tokenizer import load_tokenizer
from common.device import compute_device
from common.errors import ConfigError, DataError, exit_on_user_error
from common.eval.lm_eval_adapter import LanguageModelEval, evaluate, task_manager
from common.eval.story_tasks import CHANCE as STORY_CHANCE
from common.eval.story_tasks import METRIC as STORY_METRIC
from common.eval.story_tasks import write_story_tasks
from common.io import atomic_dir, write_json
from common.models.lm import LanguageModel, load_language_model
from common.parallel import run_jobs
from papers.blackmamba.model import ROUTING_MODEL

log = logging.getLogger("zero_shot")
STORY_TASKS = "stories"
UNTRAINED = "untrained blackmamba"
# Accuracy at chance: one over the choices of a multiple-choice task (ARC's questions have 4 choices,
# a few 3 or 5); near 0 where the answer is a free word (LAMBADA). A task not listed has no known
# chance, and the report's verdicts on it are inconclusive.
CHANCE = {"lambada_openai": 0.0, "hellaswag": 0.25, "piqa": 0.5, "winogrande": 0.5, "arc_easy": 0.25,
          "arc_challenge": 0.25, "openbookqa": 0.25, **STORY_CHANCE}
# The harness's plain accuracy, except where choices differ in length and `acc_norm` is the fair read.
METRIC = {"hellaswag": "acc_norm,none", **STORY_METRIC}

@dataclass
class ZeroShotConfig:
    seed: int = seed_field()
    tasks: list[str] = field(default_factory=lambda: [STORY_TASKS])
    items_per_task: int = bounded(200, ge=1)  # story tasks only
    limit: int | None = bounded(None, ge=1)  # harness tasks: documents per task, None = all
    workers: int | None = bounded(None, ge=1)  # evaluation processes; None: one per core

    def check(self) -> None:
        if not self.tasks:
            raise ConfigError("tasks: at least one task, or 'stories' for the generated story tasks")


def accuracy(task: str, task_results: dict) -> float:
    return task_results.get(METRIC.get(task, "acc,none"), float("nan"))


def evaluate_one(model_dir: Path, tokenizer: Path, tasks: list[str], include_path: Path | None,
                 limit: int | None, seed: int, untrained: bool = False) -> dict:
    log.info("evaluating %s%s on %s", model_dir, " as initialised, untrained" if untrained else "", ", ".join(tasks))
    model = load_language_model(model_dir)
    if untrained:
        torch.manual_seed(seed)
        model = LanguageModel(model.cfg)
    adapter = LanguageModelEval(model.to(compute_device()), load_tokenizer(tokenizer))
    # The harness's standard errors are not reported (the spread is over seeds), so none is computed.
    raw = evaluate(adapter, tasks, include_path=include_path, limit=limit, seed=seed, bootstrap_iters=0)["results"]
    scores = {task: {k: v for k, v in raw[task].items() if isinstance(v, (int, float)) and "stderr" not in k}
              for task in tasks}
    return {"tasks": scores, "mean_acc": statistics.mean(accuracy(t, raw[t]) for t in tasks)}


def prepare_tasks(cfg: ZeroShotConfig, stories: Path, tasks_dir: Path, tokenizer: PreTrainedTokenizerBase,
                  window: int) -> tuple[list[str], Path | None]:
    """The harness task names, and the directory of local task files (None if all are built in); the
    story tasks keep the items whose continuations fit in the models' `window` of tokens.
    The directory is the stage's DVC output, so it is written in every profile: at `paper`, with
    only built-in tasks, it lists them, or DVC would fail the stage after a complete evaluation."""
    tasks = list(cfg.tasks)
    if STORY_TASKS not in tasks:
        with atomic_dir(tasks_dir) as tmp:
            write_json(tmp / "tasks.json", {"tasks": tasks, "source": "lm-eval's built-in task files"})
        return tasks, None
    validation = load_dataset_dir(stories, splits=("validation",), columns=("text",),
                                  hint="run `dvc repro generate_stories` first")["validation"]
    rows = [validation[i] for i in range(min(len(validation), 8 * cfg.items_per_task))]
    tasks.remove(STORY_TASKS)
    return tasks + write_story_tasks(rows, tasks_dir, cfg.items_per_task, cfg.seed, tokenizer, window), tasks_dir


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "zero_shot", ZeroShotConfig)
    tokenizer = load_tokenizer(args.tokenizer)  # a bad tokenizer is one line here, not a traceback in a worker
    model_dirs = (sorted(p for p in args.models.glob("*/seed*") if (p / "config.json").is_file()
                         and p.parent.name != ROUTING_MODEL) if args.models.is_dir() else [])
    if not model_dirs:
        raise DataError(f"{args.models}: no trained models; run the train_compare stage first")

    if harness := [t for t in cfg.tasks if t != STORY_TASKS]:
        # Checked before anything is written; indexing the harness's tasks takes about 40 s, and a
        # misspelt name would otherwise fail inside every worker.
        if unknown := sorted(set(harness) - set(task_manager(None).all_tasks)):
            raise ConfigError(f"zero_shot.tasks: {', '.join(unknown)}: not lm-eval tasks; name tasks `lm-eval ls "
                              f"tasks` lists, or {STORY_TASKS!r} for the generated story tasks")
    window = min(json.loads((d / "config.json").read_text())["lm_config"]["n_ctx"] for d in model_dirs)
    tasks, include_path = prepare_tasks(cfg, args.stories, args.tasks_dir, tokenizer, window)
    control = next((d for d in model_dirs if d.parent.name == "blackmamba"), model_dirs[0])
    shared = {"tokenizer": args.tokenizer, "tasks": tasks, "include_path": include_path, "limit": cfg.limit,
              "seed": cfg.seed}
    jobs = [{**shared, "model_dir": d} for d in model_dirs] + [{**shared, "model_dir": control, "untrained": True}]
    *scored, untrained = run_jobs(evaluate_one, jobs, cfg.workers)
    models: dict[str, dict] = {}
    for model_dir, scores in zip(model_dirs, scored):
        models.setdefault(model_dir.parent.name, {})[model_dir.name.removeprefix("seed")] = scores
    write_json(args.out, {"profile": profile, "tasks": tasks, "chance": {t: CHANCE.get(t) for t in tasks},
                          "metric": {t: METRIC.get(t, "acc,none") for t in tasks}, "models": models,
                          "controls": {UNTRAINED: {"architecture": f"{control.parent.name}/{control.name}",
                                                   **untrained}}})
    log.info("wrote %s", args.out)


if __name__ == "__main__":
    main()
