"""Stage `finetune_tasks`: the paper's Table 1, a pretrained hybrid fine-tuned on language tasks.

For every task (a text data set):

1. each component alone (its own embedding and head) is fine-tuned for `train_steps`;
2. Manticore[A, B] starts from projectors and embeddings pretrained on general text (as in
   `nl_experiments`; once, shared by every task), searches its mixture weights for `search_steps`
   with DARTS, is rewound to its pre-search weights, and retrains for `train_steps` with the
   searched weights frozen.

The score is the held-out cross-entropy after fine-tuning. At `paper`: Pythia-410M and Mamba-370M
on Penn Treebank, Alpaca and ELI5 from the Hub. At `tiny`: the two pretrained story components on
held-out stories, on generated Alpaca-style instructions (`papers.manticore.instructions`), and on an
even mix of both, the heterogeneity the paper induces by mixing Alpaca into other sets (its
Figure 3).

A task with `landscape` also gets the paper's Figure 3 and Table 8 (`landscape.py`, from the same
pretrained projectors): the fixed-alpha sweep, each search method and update rule searched,
rewound and retrained, and the learned ensemble; its Table 1 search is the landscape's with the
same method and update rule, run once. At `paper` these are Figure 3's sets, Spanish,
Chinese and Vietnamese MLQA each with half its documents from Alpaca (`mix_with`), Arabic XQuAD
and Japanese OpenOrca, each for one pass over its documents as the official code. At `tiny`, Figure 3 is the
`specialists` stage (components that differ in skill, over seeds), and no task here has one.

Claims checked: Manticore beats both components on most tasks (the paper: on Alpaca and ELI5; on
PTB it falls between them); on Figure 3's sets, whether two search methods beat both components,
whether one matches the sweep's best, and whether the ensemble falls below Manticore. Writes
`results/finetune_tasks.json` and a bar plot of Table 1.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "components", "general", "stories", "run-dir", "out", "plot")

import copy
import logging
import math
import random
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

import datasets
import matplotlib.pyplot as plt

from common.config import bounded
from common.data.hub import HUB_SOURCES, load_hub_text
from common.data.manifest import load_dataset_dir, write_manifest
from common.data.tokenized import tokenize_padded
from common.data.tokenizer import tokenizer_fingerprint
from common.errors import ConfigError, DataError, exit_on_user_error
from common.eval.plots import save_figure
from common.io import atomic_dir, write_json
from common.models.lm import LanguageModel
from common.training.modules import CausalLMModule
from papers.manticore.finetune import METHODS, Runner, hybrid_inputs, val_loss, write_not_trained
from papers.manticore.instructions import distinct_instructions, generate_instructions, mix_genres
from papers.manticore.landscape import LandscapeConfig, landscape, search_alphas

log = logging.getLogger("finetune_tasks")


@dataclass
class TaskSpec:
    # stories: the story corpus's held-out split; instructions: generated; mixed: both, with
    # `fraction_mixed` of the documents instructions; hub: a `load_hub_text` source, with
    # `fraction_mixed` of the documents from the Hub source `mix_with` when it is given
    source: Literal["stories", "instructions", "mixed", "hub"] = "stories"
    hub: str | None = None
    mix_with: str | None = None
    fraction_mixed: float = bounded(0.5, ge=0, le=1)
    data_files: str | None = None  # local files in the Hub schema of `hub`, read instead of the Hub
    # This task's own document counts and steps (search and retraining), over the stage's
    n_train: int | None = bounded(None, ge=1)
    n_validation: int | None = bounded(None, ge=1)
    steps: int | None = bounded(None, ge=1)
    landscape: bool = False  # Figure 3 and Table 8: the sweep, every search and the ensemble too


@dataclass
class FineTuneTasksConfig(LandscapeConfig):
    tasks: dict[str, TaskSpec] = field(default_factory=dict)
    n_train: int = bounded(1500, ge=1)
    n_validation: int = bounded(300, ge=1)
    n_ctx: int = bounded(64, ge=8)
    method: str = "darts"  # Table 1's search; a task with `landscape` also runs every one of `methods`,
    # and Table 1 reads its own from there when the landscape has it

    def check(self) -> None:
        super().check()
        if not self.tasks:
            raise ConfigError("tasks: name at least one task")
        if self.method not in METHODS:
            raise ConfigError(f"method: {self.method!r} unknown; allowed: {', '.join(METHODS)}")
        for name, task in self.tasks.items():
            if (task.source == "hub") != (task.hub is not None):
                raise ConfigError(f"tasks.{name}: `hub` names the Hub source exactly when source is 'hub'")
            for key in ("hub", "mix_with"):
                if getattr(task, key) is not None and getattr(task, key) not in HUB_SOURCES:
                    raise ConfigError(f"tasks.{name}.{key}: {getattr(task, key)!r} is not a Hub text source; "
                                      f"allowed: {', '.join(HUB_SOURCES)}")
            if task.source != "hub" and (task.mix_with is not None or task.data_files is not None):
                raise ConfigError(f"tasks.{name}: `mix_with` and `data_files` go with source 'hub', "
                                  f"not {task.source!r}")

    def for_task(self, name: str) -> FineTuneTasksConfig:
        """The settings one task runs with: its own counts and steps where it gives them."""
        task = self.tasks[name]
        search_steps, train_steps = (task.steps, task.steps) if task.steps else (self.search_steps, self.train_steps)
        trainer = self.trainer
        # A run's score is its last validation, which must fall on its last step.
        if search_steps % trainer.val_every_n_steps or train_steps % trainer.val_every_n_steps:
            trainer = replace(trainer, val_every_n_steps=math.gcd(search_steps, train_steps))
        return replace(self, n_train=task.n_train or self.n_train, n_validation=task.n_validation or self.n_validation,
                       search_steps=search_steps, train_steps=train_steps, trainer=trainer)


def task_texts(task: TaskSpec, cfg: FineTuneTasksConfig, stories: Path) -> list[str]:
    """`n_train + n_validation` documents for one task, in a fixed order (validation last)."""
    n = cfg.n_train + cfg.n_validation
    if task.source == "hub" and task.mix_with is not None:
        n_mixed = round(n * task.fraction_mixed)
        own = load_hub_text(task.hub, "train", data_files=task.data_files, limit=n - n_mixed)["text"]
        other = load_hub_text(task.mix_with, "train", limit=n_mixed)["text"]
        try:
            texts = mix_genres(own, other, task.fraction_mixed, n, cfg.seed)
        except ValueError as err:  # too few distinct documents in one of them
            raise DataError(f"{task.hub} with {task.mix_with}: {err}") from None
    elif task.source == "hub":
        texts = load_hub_text(task.hub, "train", data_files=task.data_files, limit=2 * n)["text"]  # room for repeats
    elif task.source == "instructions":
        texts = distinct_instructions(n, 0, seed=cfg.seed)
    else:
        story_pool = load_dataset_dir(stories, splits=("validation",), columns=("text",),
                                      hint="run `dvc repro generate_stories` first")["validation"]["text"]
        texts = story_pool if task.source == "stories" else mix_genres(
            story_pool, generate_instructions(n, cfg.seed)["text"], task.fraction_mixed, n, cfg.seed)
    # A document twice could fall on both sides of the split: validation would score training text.
    texts = list(dict.fromkeys(texts))
    if len(texts) < n:
        raise DataError(f"{task.hub or task.source}: {len(texts)} distinct documents, the task needs "
                        f"n_train + n_validation = {n}")
    texts = texts[:n]
    random.Random(cfg.seed).shuffle(texts)
    return texts


def write_task(name: str, texts: list[str], cfg: FineTuneTasksConfig, tokenizer, path: Path) -> Path:
    splits = {"train": texts[:cfg.n_train], "validation": texts[cfg.n_train:]}
    with atomic_dir(path) as tmp:
        datasets.DatasetDict({split: tokenize_padded(datasets.Dataset.from_dict({"text": rows}), tokenizer, cfg.n_ctx)
                              for split, rows in splits.items()}).save_to_disk(str(tmp))
        write_manifest(tmp, stage="finetune_tasks", params={"task": name, **asdict(cfg.tasks[name]),
                                                            "tokenizer": tokenizer_fingerprint(tokenizer)},
                       counts={split: len(rows) for split, rows in splits.items()}, seed=cfg.seed)
    return path


def plot_tasks(rows: dict[str, dict], names: list[str], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    labels = [*names, "manticore"]
    width = 0.8 / len(labels)
    for k, label in enumerate(labels):
        ax.bar([i + k * width for i in range(len(rows))], [r[label] for r in rows.values()], width, label=label)
    ax.set_xticks([i + width * (len(labels) - 1) / 2 for i in range(len(rows))], list(rows))
    ax.set_ylabel("held-out loss after fine-tuning")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    save_figure(fig, path)


def figure3_claims(row: dict, result: dict, components: list[str]) -> dict:
    """Figure 3's and Table 8's readings on one task: which searches (retrained) beat both
    components fine-tuned alone, whether one matches the sweep's best (within the best-region
    tolerance), and the best Manticore of the sweep and the searches against the ensemble."""
    best_component = min(row[c] for c in components)
    searched = result["searched"]
    return {"searches_beating_components": sorted(label for label, r in searched.items()
                                                  if r["val_loss"] < best_component),
            "search_matches_sweep": any(result["summary"]["search_in_best_region"].values()),
            "manticore_beats_components": result["summary"]["best_manticore_val_loss"] < best_component}


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "finetune_tasks", FineTuneTasksConfig)
    if not cfg.train:
        write_not_trained(args, profile, cfg.components, {"trained": False})
        return
    components, tokenizer, general = hybrid_inputs(args, cfg, "finetune_tasks", [])
    vocab_size = len(tokenizer)
    runner = Runner(cfg, components, vocab_size, args.run_dir)
    start, projector_history = runner.pretrain_projectors(general, cfg.projector_steps)

    rows = {}
    for name, task in cfg.tasks.items():
        tcfg = cfg.for_task(name)
        task_runner = Runner(tcfg, components, vocab_size, args.run_dir)
        data = write_task(name, task_texts(task, tcfg, args.stories), tcfg, tokenizer, args.run_dir / name / "data")
        row = {}
        for component_name, component in zip(cfg.components, components):
            def alone(component: LanguageModel = component) -> CausalLMModule:
                return CausalLMModule(copy.deepcopy(component), component.cfg.vocab_size, cfg.optim)

            row[component_name] = val_loss(task_runner.fit(f"{name}/{component_name}", alone, data,
                                                           tcfg.train_steps).history)
        figure3 = landscape(task_runner, tcfg, start, data, prefix=f"{name}/") if task.landscape else None
        # Table 1's search is the same run as the landscape's search with its method and update
        # rule, where the landscape has one: read from it, not trained twice.
        if figure3 is not None and (same := figure3["searched"].get(f"{cfg.method}_{cfg.search.update}")):
            row.update({"manticore": same["val_loss"], "alphas": same["alphas"],
                        "search_val_loss": same["search_val_loss"]})
        else:
            # Freed before the next runs (`search_alphas`): with Figure 3's search and retraining after
            # it, three hybrids with their AdamW state overran the `paper` rehearsal's 24 GB.
            alphas, history = search_alphas(task_runner, tcfg, cfg.method, cfg.search.update, start, data,
                                            f"{name}/search")
            row["manticore"] = task_runner.retrain(f"{name}/retrain", alphas, start, data)
            row.update({"alphas": alphas.tolist(), "search_val_loss": val_loss(history)})
        best_component = min(row[c] for c in cfg.components)
        row["manticore_beats_both"] = row["manticore"] < best_component
        row["manticore_between"] = best_component <= row["manticore"] <= max(row[c] for c in cfg.components)
        if figure3 is not None:
            figure3["summary"].update(figure3_claims(row, figure3, cfg.components))
            row["landscape"] = figure3
        rows[name] = row
        log.info("%s: %s", name, {k: v for k, v in row.items() if k != "landscape"})

    wins = sum(r["manticore_beats_both"] for r in rows.values() if "landscape" not in r)
    table1 = sum("landscape" not in r for r in rows.values())
    summary = {"tasks": table1, "manticore_beats_both": wins, "beats_both_on_most": wins > table1 / 2,
               "figure3_tasks": len(rows) - table1}
    write_json(args.out, {"profile": profile, "components": cfg.components, "method": cfg.method,
                          "update": cfg.search.update, "summary": summary, "tasks": rows,
                          "projector_pretraining": projector_history})
    plot_tasks(rows, cfg.components, args.plot)
    log.info("wrote %s: %s", args.out, summary)


if __name__ == "__main__":
    main()
