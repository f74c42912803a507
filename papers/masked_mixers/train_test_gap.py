"""Stage `train_test_gap`: the report's §6.1, "the gap between training and test loss is slightly
higher for masked mixers compared to transformers", asked the way the report asks it: is a model
that keeps all the information of its input prone to memorization?

A gap needs training data seen more than once. At the `clm` stage's budget each model sees about a
fifth of an epoch of the training stories, so its training batches are unseen data and its training
and validation losses agree: that is the control, read from the clm results by the report. Here the
section's models train with the `clm` section's recipe (seeds, steps, batch, optimizer) on only the
first `train_rows` training stories, so each story comes round several times. Each trained model is
then scored in eval mode on the first `eval_rows` of those training stories and on as many
validation stories, the same rows for every model: the gap is validation minus training loss.

The training subset is written once into the run directory (`derived_data`).
"""

from __future__ import annotations

from common.stages import stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "data", "tokenizer", "run-dir", "results")

from dataclasses import dataclass, field, replace
from pathlib import Path

import datasets

from common.config import bounded
from common.data.tokenized import load_tokenized
from common.errors import ConfigError, exit_on_user_error
from common.eval.heldout import heldout_loss
from papers.masked_mixers.derived_data import derived_tokenized
from papers.masked_mixers.models import ModelsConfig, build_model
from papers.masked_mixers.runs import check_clm_models, clm_recipe, model_entry, train_section, write_results
from papers.masked_mixers.shared import vocab_size
from papers.masked_mixers.train import CompareConfig, load_weights, run_dir_of

STAGE = "train_test_gap"


@dataclass
class GapConfig:
    """Models of the clm section, trained on its first `train_rows` training stories and scored on
    `eval_rows` training and validation stories."""

    models: list[str] = field(default_factory=lambda: ["mixer_flat", "llama_h4"])
    train_rows: int = bounded(1024, ge=1)
    eval_rows: int = bounded(512, ge=1)

    def check(self) -> None:
        if self.eval_rows > self.train_rows:
            raise ConfigError(f"eval_rows: {self.eval_rows} is more than the {self.train_rows} training stories")


def load_section(params_path: Path) -> tuple[CompareConfig, ModelsConfig, GapConfig, str]:
    """The clm section's recipe with this section's models, the shared sizes, this section and the profile."""
    own, recipe, sizes, profile = clm_recipe(params_path, "train_test_gap", GapConfig)
    check_clm_models(STAGE, own.models, recipe, "at one pass over the data to compare with")
    return replace(recipe, models=own.models), sizes, own, profile


def training_subset(data: Path, rows: int, out: Path) -> Path:
    """The first `rows` training stories and the whole validation split."""
    def subset(tokenized: datasets.DatasetDict) -> datasets.DatasetDict:
        if rows > len(tokenized["train"]):
            raise ConfigError(f"{STAGE}.train_rows: {rows}, but {data} holds {len(tokenized['train'])} training rows")
        return datasets.DatasetDict({"train": tokenized["train"].select(range(rows)),
                                     "validation": tokenized["validation"]})

    return derived_tokenized(data, out, STAGE, {"train_rows": rows}, subset)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, sizes, own, profile = load_section(args.params)
    vocab = vocab_size(args.tokenizer)
    subset = training_subset(args.data, own.train_rows, args.run_dir / "data")

    trained = train_section(cfg, sizes, vocab, subset, args.run_dir)
    data = load_tokenized(subset)
    steps = cfg.trainer.max_steps
    models = {}
    for name, runs in trained.items():
        models[name] = model_entry(sizes.spec(name), runs, steps)
        for seed, run in models[name]["seeds"].items():
            net = load_weights(build_model(sizes.spec(name), sizes, vocab), run_dir_of(args.run_dir, name, int(seed)))
            losses = {split: round(heldout_loss(net, data[split].with_format("numpy"), cfg.batch_size, sizes.n_ctx,
                                                max_rows=own.eval_rows), 4) for split in ("train", "validation")}
            run.update(scored_train_loss=losses["train"], scored_val_loss=losses["validation"],
                       gap=round(losses["validation"] - losses["train"], 4))

    write_results(args.results, STAGE, profile, cfg, sizes, vocab, args.data, models,
                  {"recipe_of": "clm", "train_rows": own.train_rows, "eval_rows": own.eval_rows,
                   "epochs": round(steps * cfg.batch_size * cfg.trainer.accumulate_grad_batches / own.train_rows, 2)},
                  detail=f"{own.train_rows} training stories, ")

if __name__ == "__main__":
    main()
