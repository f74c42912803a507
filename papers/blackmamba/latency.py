"""Stage `latency`: the paper's Figure 5 question. Is per-token generation latency flat for
BlackMamba and Mamba (recurrent state) and growing for transformers (KV cache)?

The compared architectures of `train_compare` (same configs, random weights: latency does not
depend on the values) generate from a one-token prompt, batch 1, greedy, with their caches (eval
mode, so MoE layers route by argmax as at inference; Sinkhorn only runs in training), one model at
a time. Reported per length: median ms per token over the last 32 steps, the cache's bytes, and the total time to
generate the sequence (the paper's axis). A model's growth is its per-token latency at the longest
length over that at the first length of at least 64 tokens; the report calls it flat within
`flat_tolerance`.

Every model generates `repeats` times, the models taking turns, so that a slow spell of the
machine falls on all of them and the report can put an interval on each growth (a single timed
run per model put the MoE transformer on either side of the tolerance on two machines). Times are
medians over the repeats.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "tokenizer", "out", "plot")

import logging
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import lightning as L
import matplotlib.pyplot as plt
import torch

from common.config import bounded, seed_field
from common.data.tokenizer import load_tokenizer
from common.errors import ConfigError, exit_on_user_error
from common.eval.generation import generation_profile
from common.eval.plots import save_figure
from common.io import write_json
from common.models.lm import LanguageModel
from papers.blackmamba.compared_models import TrainCompareConfig, model_configs

log = logging.getLogger("latency")


@dataclass
class LatencyConfig:
    seed: int = seed_field()
    lengths: list[int] = field(default_factory=lambda: [1, 64, 256, 1024, 4096])
    threads: int = bounded(1, ge=1)
    flat_tolerance: float = bounded(1.3, ge=1)
    repeats: int = bounded(5, ge=1)

    def check(self) -> None:
        if not self.lengths or min(self.lengths) < 1 or self.lengths != sorted(self.lengths):
            raise ConfigError(f"lengths: increasing positive token counts, got {self.lengths}")


def plot(results: dict, lengths: list[int], path: Path) -> None:
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 4))
    for name, rows in results.items():
        ax_t.plot(lengths, [rows[str(n)]["total_s"] for n in lengths], "o-", markersize=3, label=name)
        ax_m.plot(lengths, [rows[str(n)]["cache_bytes"] / 2**20 for n in lengths], "o-", markersize=3, label=name)
    for ax, label in ((ax_t, "time to generate (s)"), (ax_m, "generation cache (MiB)")):
        ax.set_xscale("log")
        ax.set_xlabel("generated tokens")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    save_figure(fig, path)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "latency", LatencyConfig)
    models_cfg, _, _ = load_stage(args.params, "train_compare", TrainCompareConfig)
    torch.set_num_threads(cfg.threads)
    vocab_size = len(load_tokenizer(args.tokenizer))
    n_ctx = max(cfg.lengths) + 1

    configs = model_configs(models_cfg, vocab_size, n_ctx)
    runs = {name: [] for name in configs}
    for repeat in range(cfg.repeats):
        for name, lm_cfg in configs.items():
            L.seed_everything(cfg.seed, verbose=False)
            runs[name].append(generation_profile(LanguageModel(lm_cfg).eval(), cfg.lengths))
            log.info("%s, repeat %d: %.2f ms/token at %d", name, repeat,
                     runs[name][-1][str(max(cfg.lengths))]["ms_per_token"], max(cfg.lengths))

    first = str(next((n for n in cfg.lengths if n >= 64), cfg.lengths[0]))
    last = str(max(cfg.lengths))
    results, summary = {}, {}
    for name, profiles in runs.items():
        results[name] = {str(n): {"ms_per_token": statistics.median(p[str(n)]["ms_per_token"] for p in profiles),
                                  "ms_per_token_repeats": [p[str(n)]["ms_per_token"] for p in profiles],
                                  "cache_bytes": profiles[0][str(n)]["cache_bytes"],
                                  "total_s": statistics.median(p[str(n)]["total_s"] for p in profiles)}
                         for n in cfg.lengths}
        growth = [p[last]["ms_per_token"] / p[first]["ms_per_token"] for p in profiles]
        summary[name] = {"latency_growth": statistics.fmean(growth), "latency_growth_repeats": growth,
                         "cache_growth": profiles[0][last]["cache_bytes"] / profiles[0][first]["cache_bytes"],
                         "ms_per_token_at_last": results[name][last]["ms_per_token"],
                         "tokens_per_s_overall": statistics.median(p["tokens_per_s_overall"] for p in profiles)}
    write_json(args.out, {"profile": profile, "threads": cfg.threads, "lengths": cfg.lengths,
                          "flat_tolerance": cfg.flat_tolerance, "repeats": cfg.repeats,
                          "growth_measured_from": int(first), "summary": summary, "models": results})
    plot(results, cfg.lengths, args.plot)
    log.info("wrote %s: %s", args.out, summary)


if __name__ == "__main__":
    main()
