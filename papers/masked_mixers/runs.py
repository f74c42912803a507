"""The runs of a comparison section, shared by the stages that train models side by side (`compare`,
`variants`, `train_test_gap`): every model of the section with every seed, each run in a worker
process (`common.parallel.run_jobs`, one torch thread each), and what the stages report about them:
how much validation loss still fell over the last fifth of training, and the unigram (chance) loss.

Sections that borrow the `clm` section's recipe (seeds, steps, batch, optimizer) read it with
`clm_recipe`, so that the report can set their runs beside clm's run of the same seed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path
from typing import TypeVar

from torch import nn

from common.config import stage_config
from common.data.tokenized import load_tokenized
from common.errors import ConfigError
from common.eval.chance import unigram_loss
from common.io import write_json
from common.parallel import run_jobs
from common.stages import load_stage
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig
from papers.masked_mixers.models import ArchSpec, ModelsConfig, build_model
from papers.masked_mixers.shared import plot_seed_curves
from papers.masked_mixers.train import CompareConfig, run_dir_of, train_network

T = TypeVar("T")
log = logging.getLogger("mm_runs")
LATE_FRACTION = 0.2  # the last fifth of training: how much a model still moves there


def clm_recipe(params_path: Path, section: str, cls: type[T]) -> tuple[T, CompareConfig, ModelsConfig, str]:
    """A section that trains with the clm section's recipe: (its own config, the clm section's, the
    shared sizes, the profile). The recipe's seeds are clm's `seeds`, not its `extra_seeds`, which
    name clm's models."""
    own, profile, params = load_stage(params_path, section, cls)
    recipe = replace(stage_config(params, "clm", CompareConfig, profile), extra_seeds={})
    return own, recipe, stage_config(params, "models", ModelsConfig, profile), profile


Build = Callable[[ArchSpec, ModelsConfig, int], nn.Module]


def check_clm_models(section: str, names: list[str], recipe: CompareConfig, compared: str) -> None:
    """Refuse, in one line, a model the clm section does not train: its clm runs are the comparison."""
    missing = [name for name in names if name not in recipe.models]
    if missing:
        raise ConfigError(f"{section}.models: {missing[0]} is not trained by the clm section, so it has no run "
                          f"{compared}; allowed: {', '.join(recipe.models)}")


def train_one(name: str, seed: int, spec: ArchSpec, sizes: ModelsConfig, vocab: int, data: Path, run_dir: Path,
              optim: OptimConfig, trainer: TrainerConfig, batch_size: int, build: Build = build_model,
              shift_labels: bool | None = None) -> dict:
    """One run: `build(spec, sizes, vocab)` trained on `data`; labels are shifted unless the model
    is an autoencoder, or as `shift_labels` says."""
    log.info("training %s, seed %d", name, seed)
    return train_network(partial(build, spec, sizes, vocab), vocab_size=vocab, data_dir=data,
                         n_ctx=sizes.n_ctx, run_dir=run_dir, optim=optim, trainer_cfg=trainer, batch_size=batch_size,
                         seed=seed, shift_labels=spec.kind != "autoencoder" if shift_labels is None else shift_labels,
                         run_config={"arch": asdict(spec), "sizes": asdict(sizes)})


def train_section(cfg: CompareConfig, sizes: ModelsConfig, vocab: int, data: Path, run_root: Path,
                  build: Build = build_model, shift_labels: bool | None = None) -> dict[str, dict[str, dict]]:
    """Every model of `cfg` with each of its seeds (`cfg.seeds_of`), in `cfg.workers` processes:
    model -> seed -> run.
    `build` must be a module-level function (worker processes import it by name). `run_root` is
    made even when there is no run: DVC expects a stage's output directory."""
    run_root.mkdir(parents=True, exist_ok=True)
    jobs = [dict(name=name, seed=seed, spec=sizes.spec(name), sizes=sizes, vocab=vocab, data=data,
                 run_dir=run_dir_of(run_root, name, seed), optim=cfg.optim_of(name), trainer=cfg.trainer,
                 batch_size=cfg.batch_size, build=build, shift_labels=shift_labels)
            for name in cfg.models for seed in cfg.seeds_of(name)]
    results = iter(run_jobs(train_one, jobs, cfg.trainer.job_workers(cfg.workers)))
    return {name: {str(seed): next(results) for seed in cfg.seeds_of(name)} for name in cfg.models}


def model_entry(spec: ArchSpec, runs: dict[str, dict], steps: int) -> dict:
    """A model's entry in a section's results: its kind and pattern, size, and each seed's run with
    its late movement."""
    return {"kind": spec.kind, "pattern": spec.pattern, "n_params": next(iter(runs.values()))["n_params"],
            "seeds": {seed: {**run, "late_movement": round(late_movement(run["history"], steps), 4)}
                      for seed, run in runs.items()}}


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


def write_results(results: Path, section: str, profile: str, cfg: CompareConfig, sizes: ModelsConfig, vocab: int,
                  data: Path, models: dict, extra: dict, detail: str = "") -> None:
    """`<section>.json` (the section's settings with its optimizer and each model's rate, `extra`, the
    chance loss and `models`) and `<section>_loss.png` (validation curves over seeds) in `results`."""
    results.mkdir(parents=True, exist_ok=True)
    plot_seed_curves(models, results / f"{section}_loss.png",
                     f"{section} ({profile}): {detail}d_model {sizes.d_model}, {sizes.n_layers} layers, "
                     f"{len(cfg.seeds)} seeds")
    write_json(results / f"{section}.json", {
        "profile": profile, "steps": cfg.trainer.max_steps, "batch_size": cfg.batch_size, "optim": asdict(cfg.optim),
        "lr": {name: cfg.optim_of(name).lr for name in cfg.models}, "seeds": cfg.seeds,
        **({"extra_seeds": cfg.extra_seeds} if cfg.extra_seeds else {}),
        **extra, "late_fraction": LATE_FRACTION, "chance_loss": round(chance_loss(data, vocab, sizes.n_ctx), 4),
        "sizes": {"d_model": sizes.d_model, "n_layers": sizes.n_layers, "n_ctx": sizes.n_ctx}, "vocab_size": vocab,
        "models": models,
    })
