"""Stage `clm`: the fixed-compute causal-LM comparison (the report's Tables S1-S7, in small).

Every architecture listed in `clm.models` trains twice on the same packed story tokens, with the
same optimizer, batch size, data order and seed: once for the same wall-clock budget
(`budget_s`) and once for the same number of steps (`steps`). The learning rate is constant after
warm-up, so neither run's schedule depends on how far it gets. Reported per model and run: steps,
seconds, final train loss (mean of the last logged values) and validation loss on the same
batches. Plots: training loss against wall time (budget runs) and against steps (step runs).

The trained weights of the budget runs stay in `--run-dir/<model>/time/model.pt`; the
representation, generation and retrieval stages read them from there.
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass, field, replace
from functools import partial

from common.config import bounded
from common.errors import ConfigError, exit_on_user_error
from common.io import write_json
from common.stages import stage_args
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig
from papers.masked_mixers.models import build_model
from papers.masked_mixers.shared import curve, load_paper_stage, plot_curves, vocab_size
from papers.masked_mixers.train import run_dir_of, train_network

log = logging.getLogger("mm_clm")


@dataclass
class CLMConfig:
    seed: int = 0
    models: list[str] = field(default_factory=list)
    budget_s: float = bounded(20.0, gt=0)
    steps: int = bounded(150, ge=1)
    max_steps_in_budget: int = bounded(100_000, ge=1)  # a cap that the budget runs should never reach
    batch_size: int = bounded(16, ge=1)
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(schedule="constant"))
    trainer: TrainerConfig = field(default_factory=TrainerConfig)

    def check(self) -> None:
        if not self.models:
            raise ConfigError("models: list at least one architecture from the models section")
        if self.optim.schedule != "constant":
            raise ConfigError("optim.schedule: must be constant, so that budget and step runs share a schedule")


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = stage_args(argv, __doc__, "data", "tokenizer", "run-dir", "results")
    cfg, sizes, profile = load_paper_stage(args.params, "clm", CLMConfig)
    specs = {name: sizes.spec(name) for name in cfg.models}
    vocab = vocab_size(args.tokenizer)

    runs = {}
    modes = {"time": replace(cfg.trainer, max_steps=cfg.max_steps_in_budget, max_time_s=cfg.budget_s),
             "steps": replace(cfg.trainer, max_steps=cfg.steps, max_time_s=None)}
    for name, spec in specs.items():
        runs[name] = {"kind": spec.kind, "pattern": spec.pattern, "blocks": spec.blocks}
        for mode, trainer_cfg in modes.items():
            result = train_network(partial(build_model, spec, sizes, vocab), vocab_size=vocab, data_dir=args.data,
                                   n_ctx=sizes.n_ctx, run_dir=run_dir_of(args.run_dir, name, mode), optim=cfg.optim,
                                   trainer_cfg=trainer_cfg, batch_size=cfg.batch_size, seed=cfg.seed,
                                   run_config={"arch": asdict(spec), "sizes": asdict(sizes)})
            runs[name][mode] = result
            log.info("%-20s %-5s steps %5d  %6.1f s  train %.3f  val %.3f", name, mode, result["steps"],
                     result["train_seconds"], result["train_loss"] or float("nan"), result["val_loss"])

    args.results.mkdir(parents=True, exist_ok=True)
    plot_curves({n: curve(r["time"]["history"], "elapsed_s") for n, r in runs.items()},
                args.results / "clm_loss_vs_time.png", f"Same wall-clock budget ({cfg.budget_s:g} s, {profile})",
                "wall time (s)")
    plot_curves({n: curve(r["steps"]["history"], "step") for n, r in runs.items()},
                args.results / "clm_loss_vs_steps.png", f"Same number of steps ({cfg.steps}, {profile})",
                "optimizer step")
    write_json(args.results / "clm.json", {
        "profile": profile, "budget_s": cfg.budget_s, "steps": cfg.steps, "batch_size": cfg.batch_size,
        "sizes": {"d_model": sizes.d_model, "n_layers": sizes.n_layers, "n_ctx": sizes.n_ctx}, "vocab_size": vocab,
        "models": runs, "claims": clm_claims(runs),
    })


def clm_claims(runs: dict) -> dict:
    """The report's CLM claims, as comparisons of validation losses (lower is better)."""
    def val(name, mode):
        return runs[name][mode]["val_loss"] if name in runs else None

    claims = {}
    for mode in ("time", "steps"):
        # The heads sweep: llama_h<n> only (same start; llama_h4_embed1 differs in its embedding).
        heads = {name: val(name, mode) for name in runs if re.fullmatch(r"llama_h\d+", name)}
        claims[mode] = {
            "flat_mixer_minus_gpt": _diff(val("mixer_flat", mode), val("gpt", mode)),
            "flat_mixer_minus_llama_h4": _diff(val("mixer_flat", mode), val("llama_h4", mode)),
            "transfixer_minus_llama_h4": _diff(val("transfixer_series", mode), val("llama_h4", mode)),
            "best_heads": min(heads, key=heads.get) if heads else None,
            "val_loss": {name: val(name, mode) for name in runs},
        }
    return claims


def _diff(a, b):
    return None if a is None or b is None else round(a - b, 4)


if __name__ == "__main__":
    main()
