"""Stage `lr_check`: is each compared model trained at its best learning rate?

A comparison at a rate that suits the mixer and not the transformer (or the other way round) says
nothing about the architectures. For each comparison section of `sections` (clm, autoencoders,
bidirectional), every model the section trains at this profile trains its first seed again at its
own rate (the section's `optim.lr`, or its `model_lr`) times each of `factors` but 1, with the
section's data, batch, schedule and steps: the models' best rates differ by more than any one short
list of rates spans (the mixers' by a factor of 4 from the transformers' at `tiny`). The run at its
own rate is the section's first seed, not trained again here: the claims ledger reads both files,
and a model whose final validation loss is lowest at another rate gates the claims that compare it.
The mixer variants train with the clm section's recipe at the flat mixer's rate, which this checks.

Apart from the sections' stages, so that the check is paid for once: it reruns when a section it
reads or its factors change, and a fresh clone keeps the committed result. Its runs' directory is
scratch (kept for resuming), not a DVC output, for the same reason. No factors: nothing is checked.

Writes `results/lr_check.json`: per section, the seed, the factors, each model's own rate and its
final validation loss at each other rate.
"""

from __future__ import annotations

from common.stages import stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "data", "tokenizer", "run-dir", "out")

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

from common.config import bounded, check_distinct, stage_config
from common.errors import ConfigError, exit_on_user_error
from common.io import write_json
from common.parallel import run_jobs
from common.stages import load_stage
from papers.masked_mixers.models import ModelsConfig
from papers.masked_mixers.runs import train_one
from papers.masked_mixers.shared import vocab_size
from papers.masked_mixers.train import CompareConfig

log = logging.getLogger("mm_lr_check")
SECTIONS = ("clm", "autoencoders", "bidirectional")  # the sections that train at a rate of their own


@dataclass
class LRCheckConfig:
    sections: list[str] = field(default_factory=lambda: list(SECTIONS))
    # Multiples of each model's own rate to try; 1 is the section's own run, not trained again.
    factors: list[float] = field(default_factory=list)
    workers: int | None = bounded(None, ge=1)  # processes; None: one per core

    def check(self) -> None:
        check_distinct(self.sections, "sections", at_least=0)
        if unknown := [s for s in self.sections if s not in SECTIONS]:
            raise ConfigError(f"sections: {unknown[0]} is not a comparison section; allowed: {', '.join(SECTIONS)}")
        check_distinct(self.factors, "factors", at_least=0)
        if bad := [factor for factor in self.factors if not factor > 0]:
            raise ConfigError(f"factors: multiples of a learning rate must be positive; got {bad}")


def check_jobs(section: str, cfg: CompareConfig, factors: list[float], sizes: ModelsConfig, vocab: int,
               data: Path, run_root: Path) -> list[dict]:
    """The section's runs of this check: each model's first seed at its own rate times each factor but 1."""
    return [dict(name=name, seed=cfg.seeds[0], spec=sizes.spec(name), sizes=sizes, vocab=vocab, data=data,
                 run_dir=run_root / section / name / f"lr{lr:g}", optim=replace(cfg.optim, lr=lr),
                 trainer=cfg.trainer, batch_size=cfg.batch_size)
            for name in cfg.models for lr in (cfg.optim_of(name).lr * factor for factor in factors if factor != 1)]


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, params = load_stage(args.params, "lr_check", LRCheckConfig)
    sizes = stage_config(params, "models", ModelsConfig, profile)
    sections = {name: stage_config(params, name, CompareConfig, profile) for name in cfg.sections}
    vocab, factors = vocab_size(args.tokenizer), sorted(cfg.factors)
    jobs = {name: check_jobs(name, section, factors, sizes, vocab, args.data, args.run_dir)
            for name, section in sections.items()}
    every = [job for section_jobs in jobs.values() for job in section_jobs]
    args.run_dir.mkdir(parents=True, exist_ok=True)
    workers = next(iter(sections.values())).trainer.job_workers(cfg.workers) if sections else cfg.workers
    runs = iter(run_jobs(train_one, every, workers) if every else [])
    checked = {}
    for name, section in sections.items():
        losses = {model: {} for model in section.models}
        for job in jobs[name]:
            losses[job["name"]][f"{job['optim'].lr:g}"] = next(runs)["val_loss"]
        checked[name] = {"seed": section.seeds[0], "factors": factors, "final_val_loss": losses,
                         "own_lr": {model: section.optim_of(model).lr for model in section.models}}
    write_json(args.out, {"profile": profile, "sections": checked})
    log.info("wrote %s: %d runs", args.out, len(every))


if __name__ == "__main__":
    main()
