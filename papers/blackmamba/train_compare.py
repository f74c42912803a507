"""Stage `train_compare`: the paper's Figure 4 question at small scale. Does BlackMamba reach a
given loss with fewer training FLOPs than dense models with the same forward-pass parameters?

Five models train on the packed story tokens with the same data order, batch, optimizer and
number of steps, each for every seed of `seeds` (and of `extra_seeds`, for the models a claim reads
more of):

- BlackMamba (Mamba + 8-expert Sinkhorn MoE);
- a dense Mamba (Mamba layers only, as the paper's Mamba-340M baseline);
- the dense control: Mamba alternating with one SwiGLU MLP of an expert's width, i.e. BlackMamba
  with a single expert. BlackMamba against it isolates what the experts add;
- a dense Llama-style transformer and an MoE transformer.

Their sizes are chosen so that forward-pass parameters match; the stage reports the counts. A sixth,
deeper BlackMamba (`routing_model`) trains beside them for the routing stage.

Every model trains at `optim.lr` unless `model_lr` names its own rate (the routing model takes
BlackMamba's). The `lr_check` stage trains each compared model's first seed at other rates, so that
no model is compared at a rate that suits another: the claims read both.

Runs are independent, so they go to worker processes (`common.parallel.run_jobs`, one torch
thread each, identical to a serial run). The axis is training FLOPs (3 x forward FLOPs per token x
tokens seen, from `common.eval.counting`), which does not depend on the machine; wall time under
parallel workers ranks machine load, so it is recorded but never compared.

"FLOPs to reach a loss", per baseline: the target is the worse of the two models' final validation
losses over all seeds, a loss both reach in every seed; per seed, each model's FLOPs at the first
validation at or below it, linear between validations (every `val_every_n_steps`, frequent enough
that interpolation moves the ratio little). The ratio baseline / BlackMamba per seed is what the
claims ledger judges.

Chance level: the validation cross-entropy of the training split's unigram distribution; a model
that does not beat it has learnt nothing beyond token frequencies.

Writes `results/train_compare.json`, a plot, and every trained model (`save_language_model`,
`<models-out>/<model>/seed<k>`) for the latency, routing and zero-shot stages.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "data", "tokenizer", "run-dir", "models-out", "out", "plot")

import logging
import math
import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from common.data.tokenized import load_tokenized
from common.data.tokenizer import load_tokenizer
from common.distributed import is_global_zero
from common.errors import exit_on_user_error
from common.eval.chance import unigram_loss
from common.eval.counting import count_lm
from common.eval.plots import save_figure
from common.io import write_json
from papers.blackmamba.compare_run import job, train_all
from papers.blackmamba.compared_models import TrainCompareConfig, check_model_names, model_configs, routing_model_config

log = logging.getLogger("train_compare")


def flops_to_reach(curve: list[tuple[float, float]], target: float) -> float | None:
    """First x at which the (x, loss) curve reaches `target`, linear between points."""
    for (x0, y0), (x1, y1) in zip([(0.0, float("inf"))] + curve, curve):
        if y1 <= target:
            if y0 == float("inf") or y0 == y1:
                return x1
            return x0 + (x1 - x0) * (y0 - target) / (y0 - y1)
    return None


def val_curve(run: dict) -> list[tuple[float, float]]:
    return [(r["train_flops"], r["val/loss"]) for r in run["history"] if "val/loss" in r]


def compare_flops(models: dict, baseline: str) -> dict:
    """FLOPs to the worse final loss of BlackMamba and `baseline`, per seed both trained, and their ratio."""
    pair = ("blackmamba", baseline)
    seeds = [seed for seed in models["blackmamba"]["seeds"] if seed in models[baseline]["seeds"]]
    target = max(models[m]["seeds"][s]["final_val_loss"] for m in pair for s in seeds)
    flops = {m: [flops_to_reach(val_curve(models[m]["seeds"][s]), target) for s in seeds] for m in pair}
    return {"seeds": seeds, "target_val_loss": target, "flops_to_target": flops,
            "ratio_over_blackmamba": [b / a for a, b in zip(flops["blackmamba"], flops[baseline])]}


def plot_curves(models: dict, path: Path) -> None:
    """Mean validation loss over seeds against FLOPs, with the seeds' range shaded."""
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for name, res in models.items():
        curves = [val_curve(run) for run in res["seeds"].values()]
        x = [flops for flops, _ in curves[0]]
        losses = np.array([[loss for _, loss in curve] for curve in curves])
        label = f"{name} ({res['forward_params'] / 1e6:.2f}M fwd / {res['params'] / 1e6:.2f}M total)"
        line, = ax.plot(x, losses.mean(axis=0), "-", linewidth=1.2, label=label)
        ax.fill_between(x, losses.min(axis=0), losses.max(axis=0), color=line.get_color(), alpha=0.2)
    ax.set_xscale("log")
    ax.set_xlabel("training FLOPs")
    ax.set_ylabel("validation cross-entropy (nats/token)")
    ax.set_title("mean over each model's seeds; band: min to max", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save_figure(fig, path)


def remove_other_models(models_out: Path, kept: set[Path]) -> None:
    """Models a run with other settings left in the persisted output (a seed or a model since
    dropped): the later stages score every model they find there. Rank zero only, under DDP."""
    if not is_global_zero():
        return
    for stale in sorted(set(models_out.glob("*/seed*")) - kept):
        log.info("removing %s: not a model of these settings", stale)
        shutil.rmtree(stale)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "train_compare", TrainCompareConfig)

    vocab_size = len(load_tokenizer(args.tokenizer))
    tokenized = load_tokenized(args.data)
    n_ctx = len(tokenized["train"][0]["input_ids"])
    chance = unigram_loss(tokenized["train"]["input_ids"], tokenized["validation"]["input_ids"], vocab_size)
    compared = model_configs(cfg, vocab_size, n_ctx)
    configs = {**compared, **routing_model_config(cfg, vocab_size, n_ctx)}
    check_model_names(cfg, configs)
    tokens_per_process_step = cfg.data.batch_size * cfg.trainer.accumulate_grad_batches * n_ctx

    models = {}
    for name, lm_cfg in configs.items():
        count = count_lm(lm_cfg)
        models[name] = {"pattern": lm_cfg.pattern, "repeat": lm_cfg.repeat, "params": count.params,
                        "forward_params": count.forward_params, "forward_flops_per_token": count.flops_per_token,
                        "lr": cfg.lr_of(name), "seeds": {}}
    jobs = [job(cfg, name, lm_cfg, seed, cfg.lr_of(name), args.data, args.run_dir / name / f"seed{seed}",
                args.models_out / name / f"seed{seed}")
            for name, lm_cfg in configs.items() for seed in cfg.seeds_of(name)]
    runs = train_all(cfg, jobs)
    for done, run in zip(jobs, runs):
        models[done["name"]]["seeds"][str(done["seed"])] = run
    remove_other_models(args.models_out, {done["model_dir"] for done in jobs})
    (processes,) = {run.pop("processes") for run in runs}  # every run trains with the same trainer
    tokens_per_step = tokens_per_process_step * processes

    compared = list(compared)
    comparisons = {name: compare_flops(models, name) for name in compared if name != "blackmamba"}
    summary = {"final_val_loss_mean": {n: math.fsum(run["final_val_loss"] for run in res["seeds"].values()) /
                                       len(res["seeds"]) for n, res in models.items()},
               "flop_ratio_mean": {n: math.fsum(c["ratio_over_blackmamba"]) / len(c["seeds"])
                                   for n, c in comparisons.items()}}
    write_json(args.out, {"profile": profile, "n_ctx": n_ctx, "vocab_size": vocab_size, "seeds": cfg.seeds,
                          "tokens_per_step": tokens_per_step, "unigram_val_loss": chance,
                          "compared": compared, "summary": summary, "comparisons": comparisons, "models": models})
    plot_curves({n: models[n] for n in compared}, args.plot)
    log.info("wrote %s: %s", args.out, summary)


if __name__ == "__main__":
    main()
