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

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
# Each section of params.yaml this stage runs, and the kind of model it trains.
SECTIONS = {"clm": "lm", "autoencoders": "autoencoder", "bidirectional": None, "norms": "lm"}
CLI = stage_cli(__name__, __doc__, "data", "tokenizer", "run-dir", "results",
                options={"--section": {"choices": list(SECTIONS), "required": True}})

import logging
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np

from common.config import stage_config
from common.data.tokenized import load_tokenized
from common.errors import ConfigError, exit_on_user_error
from common.eval.chance import unigram_loss
from common.io import write_json
from common.parallel import run_jobs
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig
from papers.masked_mixers.models import ArchSpec, ModelsConfig, build_model
from papers.masked_mixers.shared import load_paper_stage, plot_seed_curves, vocab_size
from papers.masked_mixers.train import CompareConfig, run_dir_of, train_network

log = logging.getLogger("mm_compare")
LATE_FRACTION = 0.2  # the last fifth of training: how much a model still moves there


@dataclass
class NormsConfig:
    """The `norms` section: which of the clm section's models lose their norms."""

    models: list[str] = field(default_factory=list)

    def check(self) -> None:
        if not self.models:
            raise ConfigError("models: list at least one of the clm section's models")


def load_norms_section(params_path: Path) -> tuple[CompareConfig, ModelsConfig, str]:
    """The clm section's recipe with the norms section's models, and those models without norms."""
    own, profile, params = load_stage(params_path, "norms", NormsConfig)
    recipe = stage_config(params, "clm", CompareConfig, profile)
    missing = [name for name in own.models if name not in recipe.models]
    if missing:
        raise ConfigError(f"norms.models: {missing[0]} is not trained by the clm section, so it has no run with its "
                          f"norms to compare with; allowed: {', '.join(recipe.models)}")
    sizes = stage_config(params, "models", ModelsConfig, profile)
    archs = {**sizes.archs, **{name: replace(sizes.spec(name), norm="none", final_norm="none") for name in own.models}}
    return replace(recipe, models=own.models), replace(sizes, archs=archs), profile


def check_kind(section: str, name: str, spec: ArchSpec) -> None:
    """Autoencoders only in `autoencoders`; plain language models only in `clm`."""
    wanted = SECTIONS[section]
    fits = spec.kind == wanted if wanted else spec.kind != "autoencoder"
    if not fits:
        raise ConfigError(f"{section}.models: {name} is a {spec.kind}, which does not belong here")


def train_one(name: str, seed: int, spec: ArchSpec, sizes: ModelsConfig, vocab: int, data: Path, run_dir: Path,
              optim: OptimConfig, trainer: TrainerConfig, batch_size: int) -> dict:
    log.info("training %s, seed %d", name, seed)
    return train_network(partial(build_model, spec, sizes, vocab), vocab_size=vocab, data_dir=data,
                         n_ctx=sizes.n_ctx, run_dir=run_dir, optim=optim, trainer_cfg=trainer, batch_size=batch_size,
                         seed=seed, shift_labels=spec.kind != "autoencoder",
                         run_config={"arch": asdict(spec), "sizes": asdict(sizes)})


def late_movement(history: list[dict], steps: int) -> float:
    """Validation loss at the first validation after (1 - LATE_FRACTION) of the steps, minus the last."""
    vals = [(row["step"], row["val/loss"]) for row in history if "val/loss" in row]
    start = next(loss for step, loss in vals if step + 1 >= (1 - LATE_FRACTION) * steps)
    return start - vals[-1][1]


def chance_loss(data: Path, vocab: int, n_ctx: int) -> float:
    """The unigram loss of the stories' tokens within the window, padding excluded."""
    tokenized = load_tokenized(data)

    def tokens(split):
        rows = tokenized[split].with_format("numpy")[:]
        ids, mask = rows["input_ids"][:, :n_ctx], rows["attention_mask"][:, :n_ctx]
        return ids[mask.astype(bool)]

    return unigram_loss([tokens("train")], [tokens("validation")], vocab)


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

    jobs = [dict(name=name, seed=seed, spec=spec, sizes=sizes, vocab=vocab, data=args.data,
                 run_dir=run_dir_of(args.run_dir, name, seed), optim=cfg.optim, trainer=cfg.trainer,
                 batch_size=cfg.batch_size) for name, spec in specs.items() for seed in cfg.seeds]
    results = iter(run_jobs(train_one, jobs, cfg.workers))
    steps = cfg.trainer.max_steps
    models = {}
    for name, spec in specs.items():
        runs = {str(seed): next(results) for seed in cfg.seeds}
        first = next(iter(runs.values()))
        models[name] = {"kind": spec.kind, "pattern": spec.pattern, "n_params": first["n_params"],
                        "seeds": {seed: {**run, "late_movement": round(late_movement(run["history"], steps), 4)}
                                  for seed, run in runs.items()}}
        losses = [run["val_loss"] for run in runs.values()]
        log.info("%-26s val %.3f +- %.3f over %d seeds", name, np.mean(losses), np.std(losses), len(losses))

    args.results.mkdir(parents=True, exist_ok=True)
    plot_seed_curves(models, args.results / f"{args.section}_loss.png",
                     f"{args.section} ({profile}): d_model {sizes.d_model}, {sizes.n_layers} layers, "
                     f"{len(cfg.seeds)} seeds")
    write_json(args.results / f"{args.section}.json", {
        "profile": profile, "steps": steps, "batch_size": cfg.batch_size, "seeds": cfg.seeds,
        **({"recipe_of": "clm", "removed": ["norm", "final_norm"]} if args.section == "norms" else {}),
        "late_fraction": LATE_FRACTION, "chance_loss": round(chance_loss(args.data, vocab, sizes.n_ctx), 4),
        "sizes": {"d_model": sizes.d_model, "n_layers": sizes.n_layers, "n_ctx": sizes.n_ctx}, "vocab_size": vocab,
        "models": models,
    })


if __name__ == "__main__":
    main()
