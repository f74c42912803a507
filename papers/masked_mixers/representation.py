"""Stage `representation`: input representation accuracy (the report's Figure 3) for untrained
mixers and transformers at growing width and depth (the last size is the paper's Figure 3 size)
and for the `clm` stage's trained models, every seed: the seed draws the untrained weights and the
recovery's starting point. The last token alone (Figure 3b) is measured at the paper's size and
for the trained models. Inputs are short (the first `n_tokens` tokens of each story), as the
metric's cost grows with their length. The method and the metric: `input_representation.py`.
"""

from __future__ import annotations

from common.stages import stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "data", "tokenizer", "clm-dir", "out")

import logging
from dataclasses import replace

import torch

from common.data.tokenized import load_tokenized
from common.errors import ConfigError, DataError, exit_on_user_error
from common.io import write_json
from common.parallel import run_jobs
from papers.masked_mixers.input_representation import RepresentationConfig, measure
from papers.masked_mixers.shared import load_paper_stage, vocab_size
from papers.masked_mixers.train import WEIGHTS, run_dir_of

log = logging.getLogger("mm_representation")


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, sizes, profile = load_paper_stage(args.params, "representation", RepresentationConfig)
    vocab = vocab_size(args.tokenizer)
    if cfg.n_tokens > sizes.n_ctx:
        raise ConfigError(f"representation.n_tokens: {cfg.n_tokens} exceeds the models' window n_ctx={sizes.n_ctx}")
    # The first validation stories, cut to n_tokens: padding positions do not count.
    validation = load_tokenized(args.data)["validation"]
    if cfg.n_inputs > len(validation):
        raise ConfigError(f"representation.n_inputs: {cfg.n_inputs} exceeds the {len(validation)} validation stories "
                          f"of {args.data}")
    rows = validation.select(range(cfg.n_inputs))
    tokens = torch.tensor(rows["input_ids"], dtype=torch.long)[:, : cfg.n_tokens]
    mask = torch.tensor(rows["attention_mask"], dtype=torch.bool)[:, : cfg.n_tokens]

    # The clm stage's weights before any job runs: the untrained jobs come first and take minutes.
    if missing := [f"{name} seed {seed}" for name in cfg.models for seed in cfg.seeds
                   if not (run_dir_of(args.clm_dir, name, seed) / WEIGHTS).is_file()]:
        raise DataError(f"{args.clm_dir}: no trained weights for {', '.join(missing)}; run "
                        "`dvc repro papers/masked_mixers/dvc.yaml:clm` first")
    # Untrained at every size (the last the paper's), trained at the clm stage's; the last token
    # alone (Figure 3b) at the paper's size and for the trained models.
    jobs, keys = [], []
    for name in cfg.models:
        for i, (d_model, n_layers) in enumerate(cfg.untrained_sizes):
            sized = replace(sizes, d_model=d_model, n_layers=n_layers)
            targets = ("full", "last_token") if i == len(cfg.untrained_sizes) - 1 else ("full",)
            for seed in cfg.seeds:
                keys.append((f"untrained/d{d_model}_l{n_layers}", name, seed))
                jobs.append(dict(name=name, seed=seed, spec=sizes.spec(name), sizes=sized, vocab=vocab, weights=None,
                                 tokens=tokens, mask=mask, targets=targets, cfg=cfg))
        for seed in cfg.seeds:
            keys.append((f"trained/d{sizes.d_model}_l{sizes.n_layers}", name, seed))
            jobs.append(dict(name=name, seed=seed, spec=sizes.spec(name), sizes=sizes, vocab=vocab,
                             weights=run_dir_of(args.clm_dir, name, seed), tokens=tokens, mask=mask,
                             targets=("full", "last_token"), cfg=cfg))
    results: dict = {}
    for (state, name, seed), row in zip(keys, run_jobs(measure, jobs, cfg.workers)):
        results.setdefault(state, {}).setdefault(name, {})[str(seed)] = row
        log.info("%-22s %-12s seed %d %s", state, name, seed, row)
    write_json(args.out, {"profile": profile, "seeds": cfg.seeds, "n_inputs": cfg.n_inputs, "n_tokens": cfg.n_tokens,
                          "steps": cfg.steps, "lr": [cfg.lr_start, cfg.lr_end],
                          "paper_size": "d{}_l{}".format(*cfg.untrained_sizes[-1]), "results": results})


if __name__ == "__main__":
    main()
