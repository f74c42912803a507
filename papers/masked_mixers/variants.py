"""Stage `mixer_variants`: the masked-mixer variants of the report's §3.4 and Table S5, trained with
the `clm` section's recipe so that the report sets each run beside the clm stage's flat mixer of the
same seed, without training that one twice.

The paper grows the mixer's inter-token part three ways: parallel convolutions (here each reads the
whole input, the outputs concatenated and projected back: the paper does not define them), a
convolution kernel of size k over the feature axis (k masked position-mixing matrices per layer
instead of one), and several heads (a projection per head, a masked convolution on each,
concatenated and projected back). Of the first: "the per-step loss is slightly lower but fewer
optimizer steps are taken". Of the other two:
"Both for increases in kernel size as well as adding convolutional heads the per-step loss was lower
than for the vanilla flat masked mixer, but as fewer steps were taken with fixed compute the overall
losses remained similar." Equal steps test the first half. For the second, this stage counts each
model's forward FLOPs per row with torch's counter, the flat mixer's included: the cost of a step,
which sets how many steps a fixed compute budget buys. Wall-clock under parallel workers measures
machine load, so seconds per step are reported as throughput only, as in `clm`.

The paper also passes the mixer's weights through a softmax, which "leads to much worse training
efficiency ... regardless of the number of steps taken"; equal steps test that too, in the paper's
form and the official code's (`mixer` block option `softmax`).

Which models, and the baseline they are compared with, come from the section `mixer_variants`;
every other setting (seeds, steps, batch, optimizer) from the section `clm`.
"""

from __future__ import annotations

from common.stages import stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "data", "tokenizer", "run-dir", "results")

from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from common.errors import ConfigError, exit_on_user_error
from papers.masked_mixers.models import ArchSpec, ModelsConfig, build_model
from papers.masked_mixers.runs import clm_recipe, model_entry, train_section, write_results
from papers.masked_mixers.shared import vocab_size
from papers.masked_mixers.train import CompareConfig, check_extra_seeds


@dataclass
class VariantsConfig:
    """Models of `models.archs`, each trained with the clm section's recipe and compared with
    `baseline`, a model the clm section trains."""

    models: list[str] = field(default_factory=list)
    baseline: str = "mixer_flat"
    # Seeds beyond clm's `seeds` for the named models, where a claim reads more of them (claims.yaml);
    # the claim pairs them with the baseline's runs of the same seeds (clm's `extra_seeds`).
    extra_seeds: dict[str, list[int]] = field(default_factory=dict)

    def check(self) -> None:
        if not self.models:
            raise ConfigError("models: list at least one architecture of models.archs")
        if self.baseline in self.models:
            raise ConfigError(f"models: {self.baseline} is the baseline, which the clm section trains")


def load_section(params_path: Path) -> tuple[CompareConfig, ModelsConfig, str, str]:
    """The clm section's recipe with this section's models, the shared sizes, the profile and the baseline."""
    own, recipe, sizes, profile = clm_recipe(params_path, "mixer_variants", VariantsConfig)
    if own.baseline not in recipe.models:
        raise ConfigError(f"mixer_variants.baseline: {own.baseline} is not trained by the clm section, so it has no "
                          f"run to compare with; allowed: {', '.join(recipe.models)}")
    for name in own.models:
        if (kind := sizes.spec(name).kind) != "lm":
            raise ConfigError(f"mixer_variants.models: {name} has kind {kind!r}; only causal language models "
                              f"(kind 'lm') compare with {own.baseline}")
    check_extra_seeds(own.extra_seeds, own.models)
    # Each variant at the baseline's rate: the rate the check found for the flat mixer.
    lr = recipe.optim_of(own.baseline).lr
    return (replace(recipe, models=own.models, extra_seeds=own.extra_seeds, model_lr=dict.fromkeys(own.models, lr)),
            sizes, profile, own.baseline)


def forward_flops(spec: ArchSpec, sizes: ModelsConfig, vocab: int) -> int:
    """Forward FLOPs of one full-window row, counted by torch on the built model (a multiply-add is 2)."""
    from torch.utils.flop_counter import FlopCounterMode

    model = build_model(spec, sizes, vocab)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, sizes.n_ctx, dtype=torch.long))
    return counter.get_total_flops()


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, sizes, profile, baseline = load_section(args.params)
    vocab = vocab_size(args.tokenizer)
    flops = {name: forward_flops(sizes.spec(name), sizes, vocab) for name in [baseline, *cfg.models]}

    trained = train_section(cfg, sizes, vocab, args.data, args.run_dir)
    steps = cfg.trainer.max_steps
    models = {name: {**model_entry(sizes.spec(name), runs, steps), "blocks": sizes.spec(name).blocks,
                     "forward_flops_per_row": flops[name]} for name, runs in trained.items()}

    write_results(args.results, "mixer_variants", profile, cfg, sizes, vocab, args.data, models,
                  {"recipe_of": "clm", "baseline": {"name": baseline, "forward_flops_per_row": flops[baseline]}})


if __name__ == "__main__":
    main()
