"""Stage `train_compare`: the paper's Figure 4 question at small scale. Does BlackMamba reach a
given loss with fewer training FLOPs than dense models with the same forward-pass parameters?

Five models train on the packed story tokens with the same data order, batch, optimizer and
number of steps, each for every seed of `seeds`:

- BlackMamba (Mamba + 8-expert Sinkhorn MoE);
- a dense Mamba (Mamba layers only, as the paper's Mamba-340M baseline);
- the dense control: Mamba alternating with one SwiGLU MLP of an expert's width, i.e. BlackMamba
  with a single expert. BlackMamba against it isolates what the experts add;
- a dense Llama-style transformer and an MoE transformer.

Their sizes are chosen so that forward-pass parameters match; the stage reports the counts. A sixth,
deeper BlackMamba (`routing_model`) trains beside them for the routing stage.

No model is compared at a learning rate tuned for another: before the seeds, each compared model
trains the first seed at every rate of `lr_candidates`, then its other seeds at the rate that gave
the lowest final validation loss. The first seed's run at that rate is the one compared (nothing
trains twice); the routing model takes BlackMamba's rate. `lr_check` in the results holds the check.

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
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from common.data.datamodule import LoaderConfig
from common.data.tokenized import load_tokenized
from common.data.tokenizer import load_tokenizer
from common.errors import exit_on_user_error
from common.eval.chance import unigram_loss
from common.eval.counting import TRAIN_FACTOR, count_lm
from common.eval.plots import save_figure
from common.io import atomic_dir, write_json
from common.models.lm import LMConfig, save_language_model
from common.parallel import run_jobs
from common.training.lm import train_language_model
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig
from papers.blackmamba.compared_models import TrainCompareConfig, model_configs, routing_model_config

log = logging.getLogger("train_compare")


def flops_to_reach(curve: list[tuple[float, float]], target: float) -> float | None:
    """First x at which the (x, loss) curve reaches `target`, linear between points."""
    for (x0, y0), (x1, y1) in zip([(0.0, float("inf"))] + curve, curve):
        if y1 <= target:
            if y0 == float("inf") or y0 == y1:
                return x1
            return x0 + (x1 - x0) * (y0 - target) / (y0 - y1)
    return None


def train_one(name: str, seed: int, lm_cfg: LMConfig, data: Path, loader: LoaderConfig, optim: OptimConfig,
              trainer: TrainerConfig, run_dir: Path, model_dir: Path, flops_per_process_step: float) -> dict:
    """One model, one seed: train, save, and return its curve on the FLOP axis. A step trains
    `loader.batch_size` rows in each process of the run (several under DDP)."""
    log.info("training %s, seed %d", name, seed)
    net, run = train_language_model(lm_cfg, data, loader, optim, trainer, run_dir, seed)
    save_language_model(net, model_dir)
    processes = run.trainer.world_size
    history = [{**row, "train_flops": row["step"] * flops_per_process_step * processes} for row in run.history]
    return {"final_val_loss": next(r["val/loss"] for r in reversed(history) if "val/loss" in r),
            "steps": history[-1]["step"], "train_seconds_in_parallel": history[-1]["elapsed_s"], "history": history,
            "processes": processes}


def copy_model(source: Path, target: Path) -> None:
    """A saved model, copied whole and in one rename, by global rank zero only (under DDP every
    process runs this); its manifest checks the copy when it is loaded."""
    with atomic_dir(target) as scratch:
        shutil.copytree(source, scratch, dirs_exist_ok=True)


def val_curve(run: dict) -> list[tuple[float, float]]:
    return [(r["train_flops"], r["val/loss"]) for r in run["history"] if "val/loss" in r]


def compare_flops(models: dict, seeds: list[str], baseline: str) -> dict:
    """FLOPs to the worse final loss of BlackMamba and `baseline`, per seed, and their ratio."""
    pair = ("blackmamba", baseline)
    target = max(models[m]["seeds"][s]["final_val_loss"] for m in pair for s in seeds)
    flops = {m: [flops_to_reach(val_curve(models[m]["seeds"][s]), target) for s in seeds] for m in pair}
    return {"target_val_loss": target, "flops_to_target": flops,
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
    ax.set_title(f"mean over {len(curves)} seeds; band: min to max", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save_figure(fig, path)


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
    tokens_per_process_step = cfg.data.batch_size * cfg.trainer.accumulate_grad_batches * n_ctx

    models = {}
    for name, lm_cfg in configs.items():
        count = count_lm(lm_cfg)
        models[name] = {"pattern": lm_cfg.pattern, "repeat": lm_cfg.repeat, "params": count.params,
                        "forward_params": count.forward_params, "forward_flops_per_token": count.flops_per_token,
                        "seeds": {}}

    def job(name: str, seed: int, lr: float, run_dir: Path, model_dir: Path) -> dict:
        flops_per_process_step = TRAIN_FACTOR * models[name]["forward_flops_per_token"] * tokens_per_process_step
        return {"name": name, "seed": seed, "lm_cfg": configs[name], "data": args.data, "loader": cfg.data,
                "optim": replace(cfg.optim, lr=lr), "trainer": cfg.trainer, "run_dir": run_dir,
                "model_dir": model_dir, "flops_per_process_step": flops_per_process_step}

    def train(jobs: list[dict]) -> list[dict]:
        # Blocks per model as the cost: the deep routing model's runs start first rather than last.
        return run_jobs(train_one, jobs, cfg.trainer.job_workers(cfg.workers),
                        cost=lambda job: len(job["lm_cfg"].layers))

    rates = sorted(set(cfg.lr_candidates)) or [cfg.optim.lr]
    chosen, lr_check, runs = {name: rates[0] for name in compared}, None, []
    if len(rates) > 1:
        first, checked = cfg.seeds[0], args.run_dir / "lr_check"
        sweep = [job(name, first, lr, checked / name / f"lr{lr:g}", checked / name / f"lr{lr:g}" / "model")
                 for name in compared for lr in rates]
        runs = train(sweep)
        by_rate = {(done["name"], done["optim"].lr): run for done, run in zip(sweep, runs)}
        chosen = {name: min(rates, key=lambda lr: by_rate[name, lr]["final_val_loss"]) for name in compared}
        for name, lr in chosen.items():  # the first seed at the chosen rate is trained already
            models[name]["seeds"][str(first)] = by_rate[name, lr]
            copy_model(checked / name / f"lr{lr:g}" / "model", args.models_out / name / f"seed{first}")
        lr_check = {"seed": first, "rates": rates, "chosen": chosen,
                    "final_val_loss": {name: {f"{lr:g}": by_rate[name, lr]["final_val_loss"] for lr in rates}
                                       for name in compared}}
        log.info("learning rates chosen at seed %d: %s", first, chosen)
    chosen_lr = {**chosen, **{name: chosen["blackmamba"] for name in configs if name not in compared}}
    jobs = [job(name, seed, chosen_lr[name], args.run_dir / name / f"seed{seed}",
                args.models_out / name / f"seed{seed}")
            for name in configs for seed in cfg.seeds if str(seed) not in models[name]["seeds"]]
    seed_runs = train(jobs)
    for done, run in zip(jobs, seed_runs):
        models[done["name"]]["seeds"][str(done["seed"])] = run
    (processes,) = {run.pop("processes") for run in runs + seed_runs}  # every run trains with the same trainer
    tokens_per_step = tokens_per_process_step * processes
    for name, res in models.items():
        res["lr"] = chosen_lr[name]
        res["seeds"] = {str(seed): res["seeds"][str(seed)] for seed in cfg.seeds}

    seeds = [str(seed) for seed in cfg.seeds]
    compared = list(compared)
    comparisons = {name: compare_flops(models, seeds, name) for name in compared if name != "blackmamba"}
    summary = {"final_val_loss_mean": {n: sum(models[n]["seeds"][s]["final_val_loss"] for s in seeds) / len(seeds)
                                       for n in models},
               "flop_ratio_mean": {n: math.fsum(c["ratio_over_blackmamba"]) / len(seeds)
                                   for n, c in comparisons.items()}}
    write_json(args.out, {"profile": profile, "n_ctx": n_ctx, "vocab_size": vocab_size, "seeds": cfg.seeds,
                          "tokens_per_step": tokens_per_step, "unigram_val_loss": chance, "lr_check": lr_check,
                          "compared": compared, "summary": summary, "comparisons": comparisons, "models": models})
    plot_curves({n: models[n] for n in compared}, args.plot)
    log.info("wrote %s: %s", args.out, summary)


if __name__ == "__main__":
    main()
