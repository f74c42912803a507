"""Stage `zero_shot`: Table I's downstream columns, through lm-evaluation-harness.

Every model trained by `train_compare` is wrapped as a harness model
(`common.eval.lm_eval_adapter`). At `smoke` and `tiny` the tasks are generated from the story
corpus's validation split and loaded through the harness's local-file task mechanism
(`common.eval.story_tasks`), so the integration runs for real offline. At `paper` the tasks are
the paper's (HellaSwag, PIQA, WinoGrande, LAMBADA, ARC-e/c, OpenBookQA), which the harness
downloads from the Hugging Face Hub.

The paper's claim is that BlackMamba scores above dense models with the same forward-pass
parameters (Table I). The verdict compares BlackMamba's mean accuracy with each baseline's.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field

import datasets
import torch

from common.config import bounded
from common.data.tokenizer import load_tokenizer
from common.errors import ConfigError, DataError, exit_on_user_error
from common.eval.lm_eval_adapter import LanguageModelEval, evaluate
from common.eval.story_tasks import write_story_tasks
from common.io import write_json
from common.models.lm import load_language_model
from common.stages import load_stage, stage_args

log = logging.getLogger("zero_shot")
STORY_TASKS = "stories"
CHANCE = {"stories_cloze": 0.0, "stories_next_line": 0.25}


@dataclass
class ZeroShotConfig:
    seed: int = 0
    tasks: list[str] = field(default_factory=lambda: [STORY_TASKS])
    items_per_task: int = bounded(200, ge=1)  # story tasks only
    limit: int | None = bounded(None, ge=1)  # harness tasks: documents per task, None = all
    threads: int = bounded(2, ge=1)

    def check(self) -> None:
        if not self.tasks:
            raise ConfigError("tasks: at least one task, or 'stories' for the generated story tasks")


def accuracy(task_results: dict) -> float:
    return task_results.get("acc,none", float("nan"))


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = stage_args(argv, __doc__, "models", "tokenizer", "stories", "tasks-dir", "out")
    cfg, profile, _ = load_stage(args.params, "zero_shot", ZeroShotConfig)
    torch.set_num_threads(cfg.threads)
    tokenizer = load_tokenizer(args.tokenizer)
    model_dirs = (sorted(p for p in args.models.iterdir() if (p / "config.json").is_file())
                  if args.models.is_dir() else [])
    if not model_dirs:
        raise DataError(f"{args.models}: no trained models; run the train_compare stage first")

    tasks, include_path = list(cfg.tasks), None
    if STORY_TASKS in tasks:
        validation = datasets.load_from_disk(str(args.stories))["validation"]
        stories = [validation[i] for i in range(min(len(validation), 8 * cfg.items_per_task))]
        tasks.remove(STORY_TASKS)
        tasks += write_story_tasks(stories, args.tasks_dir, cfg.items_per_task, cfg.seed)
        include_path = args.tasks_dir

    results = {}
    for model_dir in model_dirs:
        log.info("evaluating %s on %s", model_dir.name, ", ".join(tasks))
        adapter = LanguageModelEval(load_language_model(model_dir), tokenizer)
        raw = evaluate(adapter, tasks, include_path=include_path, limit=cfg.limit, seed=cfg.seed)["results"]
        scores = {task: {k: v for k, v in raw[task].items() if isinstance(v, (int, float)) and "stderr" not in k}
                  for task in tasks}
        results[model_dir.name] = {"tasks": scores, "mean_acc": statistics.mean(accuracy(raw[t]) for t in tasks)}

    summary = {}
    if "blackmamba" in results:
        ours = results["blackmamba"]["mean_acc"]
        summary = {"blackmamba_mean_acc": ours,
                   "baselines_mean_acc": {n: r["mean_acc"] for n, r in results.items() if n != "blackmamba"},
                   "blackmamba_best": all(ours >= r["mean_acc"] for r in results.values())}
    write_json(args.out, {"profile": profile, "tasks": tasks, "chance": {t: CHANCE.get(t) for t in tasks},
                          "summary": summary, "models": results})
    log.info("wrote %s: %s", args.out, summary)


if __name__ == "__main__":
    main()
