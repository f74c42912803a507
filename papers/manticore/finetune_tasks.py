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

Claim checked: Manticore beats both components on most tasks (the paper: on Alpaca and ELI5; on
PTB it falls between them). Writes `results/finetune_tasks.json` and a bar plot.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "components", "general", "stories", "run-dir", "out", "plot")

import copy
import logging
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import datasets
import matplotlib.pyplot as plt

from common.config import bounded
from common.data.hub import load_hub_text
from common.data.manifest import write_manifest
from common.data.tokenized import tokenize_padded
from common.data.tokenizer import tokenizer_fingerprint
from common.errors import ConfigError, DataError, exit_on_user_error
from common.eval.plots import save_figure
from common.io import atomic_dir, write_json
from common.models.lm import LanguageModel
from common.training.modules import CausalLMModule
from papers.manticore.finetune import METHODS, FineTuneConfig, Runner, hybrid_inputs, val_loss
from papers.manticore.instructions import generate_instructions, mix_genres
from papers.manticore.search import ManticoreSearchModule, SearchConfig

log = logging.getLogger("finetune_tasks")


@dataclass
class TaskSpec:
    # stories: the story corpus's held-out split; instructions: generated; mixed: both, with
    # `fraction_instructions` of the documents instructions; hub: a `load_hub_text` source
    source: Literal["stories", "instructions", "mixed", "hub"] = "stories"
    hub: str | None = None
    fraction_instructions: float = bounded(0.5, ge=0, le=1)


@dataclass
class FineTuneTasksConfig(FineTuneConfig):
    tasks: dict[str, TaskSpec] = field(default_factory=dict)
    n_train: int = bounded(1500, ge=1)
    n_validation: int = bounded(300, ge=1)
    n_ctx: int = bounded(64, ge=8)
    method: str = "darts"
    search_steps: int = bounded(100, ge=1)
    search: SearchConfig = field(default_factory=SearchConfig)

    def check(self) -> None:
        super().check()
        if not self.tasks:
            raise ConfigError("tasks: name at least one task")
        if self.method not in METHODS:
            raise ConfigError(f"method: {self.method!r} unknown; allowed: {', '.join(METHODS)}")
        for name, task in self.tasks.items():
            if (task.source == "hub") != (task.hub is not None):
                raise ConfigError(f"tasks.{name}: `hub` names the Hub source exactly when source is 'hub'")


def task_texts(task: TaskSpec, cfg: FineTuneTasksConfig, stories: Path) -> list[str]:
    """`n_train + n_validation` documents for one task, in a fixed order (validation last)."""
    n = cfg.n_train + cfg.n_validation
    if task.source == "hub":
        texts = load_hub_text(task.hub, "train", limit=n)["text"]
    elif task.source == "instructions":
        texts = generate_instructions(n, cfg.seed)["text"]
    else:
        story_pool = datasets.load_from_disk(str(stories))["validation"]["text"]
        texts = story_pool if task.source == "stories" else mix_genres(
            story_pool, generate_instructions(n, cfg.seed)["text"], task.fraction_instructions, n, cfg.seed)
    if len(texts) < n:
        raise DataError(f"{task.source}: {len(texts)} documents, the task needs n_train + n_validation = {n}")
    texts = list(texts[:n])
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


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "finetune_tasks", FineTuneTasksConfig)
    components, tokenizer, general = hybrid_inputs(args, cfg, "finetune_tasks", [])
    vocab_size = len(tokenizer)
    runner = Runner(cfg, components, vocab_size, args.run_dir)
    start, projector_history = runner.pretrain_projectors(general, cfg.projector_steps)

    rows = {}
    for name, task in cfg.tasks.items():
        data = write_task(name, task_texts(task, cfg, args.stories), cfg, tokenizer, args.run_dir / name / "data")
        row = {}
        for component_name, component in zip(cfg.components, components):
            def alone(component: LanguageModel = component) -> CausalLMModule:
                return CausalLMModule(copy.deepcopy(component), component.cfg.vocab_size, cfg.optim)

            row[component_name] = val_loss(runner.fit(f"{name}/{component_name}", alone, data, cfg.train_steps).history)
        search = runner.fit(f"{name}/search", lambda: ManticoreSearchModule(runner.hybrid(METHODS[cfg.method], start),
                                                                           vocab_size, cfg.optim, cfg.search),
                            data, cfg.search_steps, manual=True)
        alphas = search.module.net.mixture_weights(sample=False).detach()
        row["manticore"] = runner.retrain(f"{name}/retrain", alphas, start, data)
        row.update({"alphas": alphas.tolist(), "search_val_loss": val_loss(search.history)})
        best_component = min(row[c] for c in cfg.components)
        row["manticore_beats_both"] = row["manticore"] < best_component
        row["manticore_between"] = best_component <= row["manticore"] <= max(row[c] for c in cfg.components)
        rows[name] = row
        log.info("%s: %s", name, row)

    wins = sum(r["manticore_beats_both"] for r in rows.values())
    summary = {"tasks": len(rows), "manticore_beats_both": wins, "beats_both_on_most": wins > len(rows) / 2}
    write_json(args.out, {"profile": profile, "components": cfg.components, "method": cfg.method,
                          "update": cfg.search.update, "summary": summary, "tasks": rows,
                          "projector_pretraining": projector_history})
    plot_tasks(rows, cfg.components, args.plot)
    log.info("wrote %s: %s", args.out, summary)


if __name__ == "__main__":
    main()
