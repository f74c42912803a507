"""Stages `clm`, `autoencoders` and `bidirectional`: masked mixers against transformers of equal
width and depth, trained for the same number of steps on the same batches, for every seed.

- `--section clm`: causal language models (the report's Tables S1-S7, in small): the flat mixer,
  the GPT and 4-head Llama baselines, the expanded mixer and the transfixers.
- `--section autoencoders`: the autoencoders of "Masked Mixers II": each position reproduces its
  own token from the encoder's last-token vector, so the labels are not shifted.
- `--section bidirectional`: bidirectional language models; the prediction at t is of token t + 1
  from tokens <= t and >= t + 2 (standard shift).
- `--section norms`: the blog's ablation, causal language models without layer norms. The
  section names models of the `clm` section; each is trained with every norm taken out (per block
  and final) and with the `clm` section's recipe (seeds, steps, batch, optimizer), so the report
  sets each run beside the `clm` run of the same model and seed, norms in place, without training
  that one twice.

Every section trains on padded single stories (one story per row, cut to the window), the layout
the official code trains on for models that are later embedded; the rows must hold the whole
window (`TextDataModule(full_window=True)`), since a mixer's convolution has a weight per position.

Runs are independent, so they go to worker processes (`common.parallel.run_jobs`, one torch thread
each). Runs are compared at equal steps; seconds per step under parallel workers measure machine
load as much as the model, so they are reported as throughput only. Per model and seed the stage
reports the validation loss (on the same batches for every model) and how much it still fell
over the last fifth of training: a ranking is only earned where that movement is smaller than the
gap being judged. Chance is the unigram loss: a model that does not beat it has learnt token
frequencies and nothing else.

Trained weights stay in `--run-dir/<model>/seed<k>/model.pt`; the representation, generation and
retrieval stages read the `clm` and `autoencoders` ones.
"""

from __future__ import annotations

from common.stages import stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
# Each section of params.yaml this stage runs, and the kind of model it trains.
SECTIONS = {"clm": "lm", "autoencoders": "autoencoder", "bidirectional": None, "norms": "lm"}
CLI = stage_cli(__name__, __doc__, "data", "tokenizer", "run-dir", "results",
                options={"--section": {"choices": list(SECTIONS), "required": True}})

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from common.errors import ConfigError, exit_on_user_error
from papers.masked_mixers.models import ArchSpec, ModelsConfig
from papers.masked_mixers.runs import check_clm_models, clm_recipe, model_entry, train_section, write_results
from papers.masked_mixers.shared import load_paper_stage, vocab_size
from papers.masked_mixers.train import CompareConfig

log = logging.getLogger("mm_compare")


@dataclass
class NormsConfig:
    """The `norms` section: which of the clm section's models lose their norms (none: `[]`, the stage
    trains nothing at this profile)."""

    models: list[str] = field(default_factory=list)


def load_norms_section(params_path: Path) -> tuple[CompareConfig, ModelsConfig, str]:
    """The clm section's recipe with the norms section's models, and those models without norms."""
    own, recipe, sizes, profile = clm_recipe(params_path, "norms", NormsConfig)
    check_clm_models("norms", own.models, recipe, "with its norms to compare with")
    archs = {**sizes.archs, **{name: replace(sizes.spec(name), norm="none", final_norm="none") for name in own.models}}
    return replace(recipe, models=own.models), replace(sizes, archs=archs), profile


def check_kind(section: str, name: str, spec: ArchSpec) -> None:
    """Autoencoders only in `autoencoders`; plain language models only in `clm`."""
    wanted = SECTIONS[section]
    fits = spec.kind == wanted if wanted else spec.kind != "autoencoder"
    if not fits:
        raise ConfigError(f"{section}.models: {name} is a {spec.kind}, which does not belong here")


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    if args.section == "norms":
        cfg, sizes, profile = load_norms_section(args.params)
    else:
        cfg, sizes, profile = load_paper_stage(args.params, args.section, CompareConfig)
    vocab = vocab_size(args.tokenizer)
    specs = {name: sizes.spec(name) for name in cfg.models}
    for name, spec in specs.items():
        check_kind(args.section, name, spec)

    trained = train_section(cfg, sizes, vocab, args.data, args.run_dir)
    steps = cfg.trainer.max_steps
    models = {}
    for name, spec in specs.items():
        runs = trained[name]
        models[name] = model_entry(spec, runs, steps)
        losses = [run["val_loss"] for run in runs.values()]
        log.info("%-26s val %.3f +- %.3f over %d seeds", name, np.mean(losses), np.std(losses), len(losses))

    write_results(args.results, args.section, profile, cfg, sizes, vocab, args.data, models,
                  {"recipe_of": "clm", "removed": ["norm", "final_norm"]} if args.section == "norms" else {})


if __name__ == "__main__":
    main()
