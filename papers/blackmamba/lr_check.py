"""Stage `lr_check`: is each model of `train_compare` trained at its best learning rate?

A comparison at a rate that suits one model and not the other says nothing about the architectures.
Each compared model trains the first seed of `train_compare` at every rate of `rates` other than
its own (`optim.lr`, or its `model_lr`), with that section's data, batch, optimizer and steps. The
run at its own rate is `train_compare`'s first seed, not trained again here: the claims ledger
reads both files, and a model whose lowest final validation loss is at another rate gates the
claims that compare it.

Apart from `train_compare`, so that the check is paid for once: it reruns when the section it reads
or its rates change, and a fresh clone keeps the committed result. Its runs' directory is scratch
(kept for resuming), not a DVC output, for the same reason. No rates: nothing is checked.

Writes `results/lr_check.json`: the seed, the rates, each model's own rate and its final validation
loss at each other rate.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "data", "tokenizer", "run-dir", "out")

import logging
from dataclasses import dataclass, field

from common.config import check_distinct
from common.data.tokenized import load_tokenized
from common.data.tokenizer import load_tokenizer
from common.errors import ConfigError, exit_on_user_error
from common.io import write_json
from papers.blackmamba.compare_run import job, train_all
from papers.blackmamba.compared_models import TRAIN_COMPARE, TrainCompareConfig, check_model_names, model_configs

log = logging.getLogger("lr_check")


@dataclass
class LRCheckConfig(TrainCompareConfig):
    # A factor of 2 either side of the rate the models train at, or the rates to try instead.
    rates: list[float] = field(default_factory=list)

    def check(self) -> None:
        super().check()
        check_distinct(self.rates, "rates", at_least=0)
        if bad := [lr for lr in self.rates if not lr > 0]:
            raise ConfigError(f"rates: learning rates must be positive; got {bad}")


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "lr_check", LRCheckConfig, shared=TRAIN_COMPARE)
    vocab_size = len(load_tokenizer(args.tokenizer))
    n_ctx = len(load_tokenized(args.data)["train"][0]["input_ids"])
    compared = model_configs(cfg, vocab_size, n_ctx)
    check_model_names(cfg, compared)
    seed, rates = cfg.seeds[0], sorted(cfg.rates)
    jobs = [job(cfg, name, lm_cfg, seed, lr, args.data, args.run_dir / name / f"lr{lr:g}", None)
            for name, lm_cfg in compared.items() for lr in rates if lr != cfg.lr_of(name)]
    runs = train_all(cfg, jobs) if jobs else []
    losses = {name: {} for name in compared}
    for done, run in zip(jobs, runs):
        losses[done["name"]][f"{done['optim'].lr:g}"] = run["final_val_loss"]
    write_json(args.out, {"profile": profile, "seed": seed, "rates": rates,
                          "own_lr": {name: cfg.lr_of(name) for name in compared},
                          "final_val_loss": losses})
    log.info("wrote %s: %d runs", args.out, len(runs))


if __name__ == "__main__":
    main()
