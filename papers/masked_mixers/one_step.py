"""Stage `one_step`: one-step text completion ("Masked Mixers II"): a model reads the first half of
each row and predicts every token of the second half in one forward pass. The blog's hypothesis is
that this task mixes the bijective mappings masked mixers learn well (autoencoding, retrieval) with
the injective ones transformers learn well (causal modelling), and its finding is "nearly complete
parity in training efficiency for the masked mixer and transformer" (FineWeb, 512 tokens, 16 layers).

The blog's method, kept here: causal masking stays, and halfway through the blocks the hidden states
of the prediction positions (the second half) are zeroed (`OneStepCompletion`), so from there on they
hold only what they read from the first half; the loss covers the second half only, each position
predicting its own token (no shift: after the cut a position no longer knows its token). The loss
mask is the rows' attention mask with the first half cleared, a data set derived once into the run
directory (`derived_data`).

The section's models train with the `clm` section's recipe (seeds, steps, batch, optimizer); the
report compares their validation losses, with the `clm` stage's gap between the same two models as
the control.
"""

from __future__ import annotations

from common.stages import stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "data", "tokenizer", "run-dir", "results")

from dataclasses import dataclass, field, replace
from pathlib import Path

import datasets
import numpy as np
import torch
from torch import nn

from common.errors import ConfigError, exit_on_user_error
from common.models.lm import LanguageModel
from papers.masked_mixers.derived_data import derived_tokenized
from papers.masked_mixers.models import ArchSpec, ModelsConfig, build_model
from papers.masked_mixers.runs import check_clm_models, clm_recipe, model_entry, train_section, write_results
from papers.masked_mixers.shared import vocab_size
from papers.masked_mixers.train import CompareConfig

STAGE = "one_step"


class OneStepCompletion(nn.Module):
    """A causal language model whose positions from `prefix` on are zeroed after the first half of
    its blocks: before the cut they read their own tokens, after it only the prefix's. Logits at
    position t are for token t (the labels are not shifted)."""

    def __init__(self, net: LanguageModel, prefix: int):
        super().__init__()
        self.net, self.prefix, self.cut = net, prefix, len(net.blocks) // 2

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        h = self.net.run_blocks(self.net.embed(input_ids), 0, self.cut)
        keep = torch.arange(h.shape[1], device=h.device) < self.prefix
        h = h * keep[:, None].to(h.dtype)
        return self.net.head(self.net.run_blocks(h, self.cut, len(self.net.blocks)))


def one_step_model(spec: ArchSpec, sizes: ModelsConfig, vocab: int) -> OneStepCompletion:
    return OneStepCompletion(build_model(spec, sizes, vocab), prefix=sizes.n_ctx // 2)


@dataclass
class OneStepConfig:
    """Models of the clm section, trained for one-step completion (`[]`: none at this profile)."""

    models: list[str] = field(default_factory=lambda: ["mixer_flat", "llama_h4"])


def load_section(params_path: Path) -> tuple[CompareConfig, ModelsConfig, str]:
    """The clm section's recipe with this section's models, the shared sizes and the profile."""
    own, recipe, sizes, profile = clm_recipe(params_path, "one_step", OneStepConfig)
    check_clm_models(STAGE, own.models, recipe, "of causal modelling to compare with")
    for name in own.models:
        if sizes.spec(name).kind != "lm" or sizes.spec(name).width_multiplier != 1:
            raise ConfigError(f"{STAGE}.models: {name} is not a one-stream causal language model")
    return replace(recipe, models=own.models), sizes, profile


def completion_rows(data: Path, prefix: int, out: Path) -> Path:
    """The stories with the attention mask cleared over the first `prefix` positions: the collator
    turns those labels into -100, so only the second half enters the loss."""
    def mask_prefix(tokenized: datasets.DatasetDict) -> datasets.DatasetDict:
        def clear(batch):
            mask = np.asarray(batch["attention_mask"], dtype=np.int8)
            mask[:, :prefix] = 0
            return {"attention_mask": mask}

        return datasets.DatasetDict({split: rows.map(clear, batched=True, keep_in_memory=True)
                                     for split, rows in tokenized.items()})

    return derived_tokenized(data, out, STAGE, {"loss_from": prefix}, mask_prefix)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, sizes, profile = load_section(args.params)
    vocab = vocab_size(args.tokenizer)
    prefix = sizes.n_ctx // 2
    data = completion_rows(args.data, prefix, args.run_dir / "data")
    trained = train_section(cfg, sizes, vocab, data, args.run_dir, build=one_step_model, shift_labels=False)
    steps = cfg.trainer.max_steps
    models = {name: model_entry(sizes.spec(name), runs, steps) for name, runs in trained.items()}

    write_results(args.results, STAGE, profile, cfg, sizes, vocab, args.data, models,
                  {"recipe_of": "clm", "prefix": prefix},
                  detail=f"tokens {prefix}-{sizes.n_ctx - 1} from 0-{prefix - 1}, ")

if __name__ == "__main__":
    main()
