"""Stage `context_length`: the blog's context-length dependence ("Masked Mixers II"). The section's
models (the flat mixer and the 4-head Llama) train with the `clm` section's recipe and seeds at a
shorter window, `n_ctx`; the report sets their gap beside the `clm` stage's gap between the same
two models at the models' own window.

The blog's reasoning: predicting the next token from fewer previous tokens is closer to a one-to-one
mapping, which should favour the mixer, "and this is precisely what is found for n_ctx = 32 or even
n_ctx = 128" (16-layer models on FineWeb-edu). Its runs keep the tokens per step about equal across
windows (batches of 2,048 rows at 32 tokens, 512 at 128, 128 at 512), and so do these: the window
trains `clm.batch_size * models.n_ctx / n_ctx` rows per step. Each row is one story cut to the
window, as in `clm`, so a shorter window reads the stories' beginnings.

The stage also records how long the training stories are (`story_tokens`): a window longer than
the stories (the blog's 512 on this corpus) would train on padding, not on a longer context.
"""

from __future__ import annotations

from common.stages import stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "data", "tokenizer", "run-dir", "results")

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from common.config import bounded
from common.data.tokenized import load_tokenized
from common.errors import ConfigError, exit_on_user_error
from papers.masked_mixers.models import ModelsConfig
from papers.masked_mixers.runs import check_clm_models, clm_recipe, model_entry, train_section, write_results
from papers.masked_mixers.shared import vocab_size
from papers.masked_mixers.train import CompareConfig

STAGE = "context_length"


@dataclass
class ContextConfig:
    """Models of the clm section, trained at window `n_ctx` (shorter than `models.n_ctx`)."""

    models: list[str] = field(default_factory=lambda: ["mixer_flat", "llama_h4"])
    n_ctx: int = bounded(32, ge=2)

    def check(self) -> None:
        if len(self.models) == 1:
            raise ConfigError("models: list two or more of the clm section's models, so that there is a gap, or none "
                              "([]) to train nothing at this profile")


def load_section(params_path: Path) -> tuple[CompareConfig, ModelsConfig, str]:
    """The clm recipe with this section's models and a batch of as many tokens, at the shorter window."""
    own, recipe, sizes, profile = clm_recipe(params_path, "context_length", ContextConfig)
    check_clm_models(STAGE, own.models, recipe, "at the models' own window to compare with")
    if own.n_ctx >= sizes.n_ctx or sizes.n_ctx % own.n_ctx:
        raise ConfigError(f"{STAGE}.n_ctx: {own.n_ctx} must be shorter than models.n_ctx = {sizes.n_ctx} and divide "
                          "it, so that a batch holds as many tokens as the clm section's")
    rows = recipe.batch_size * sizes.n_ctx // own.n_ctx
    return replace(recipe, models=own.models, batch_size=rows), replace(sizes, n_ctx=own.n_ctx), profile


def story_tokens(data: Path) -> dict:
    """Tokens per training story (padding excluded): median, 95th percentile and longest. Rows are
    stored `row_tokens` long, so a story of that length may have been cut."""
    mask = load_tokenized(data, splits=("train",))["train"].with_format("numpy")[:]["attention_mask"]
    lengths = mask.sum(1)
    return {"stories": len(lengths), "median": float(np.median(lengths)), "p95": float(np.percentile(lengths, 95)),
            "longest": int(lengths.max()), "row_tokens": int(mask.shape[1])}


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, sizes, profile = load_section(args.params)
    vocab = vocab_size(args.tokenizer)
    trained = train_section(cfg, sizes, vocab, args.data, args.run_dir)
    models = {name: model_entry(sizes.spec(name), runs, cfg.trainer.max_steps) for name, runs in trained.items()}
    write_results(args.results, STAGE, profile, cfg, sizes, vocab, args.data, models,
                  {"recipe_of": "clm", "story_tokens": story_tokens(args.data)},
                  detail=f"n_ctx {sizes.n_ctx}, ")


if __name__ == "__main__":
    main()
