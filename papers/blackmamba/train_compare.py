"""Stage `train_compare`: the paper's Figure 4 question at small scale. Does BlackMamba reach a
given loss with fewer training FLOPs than dense models with the same forward-pass parameters?

Four models train on the packed story tokens with the same data order, batch, optimizer and
number of steps: BlackMamba (Mamba + 8-expert Sinkhorn MoE), a dense Mamba (Mamba layers only,
as the paper's Mamba-340M baseline), a dense Llama-style transformer and an MoE transformer.
Their sizes in params are chosen so that forward-pass parameters match; the stage reports the
counts. Validation loss is plotted against training FLOPs (3 x forward FLOPs per token x tokens
seen, from `common.eval.counting`) and against wall time.

"FLOPs to reach a loss": the target is the highest final validation loss among the models (a loss
every model reaches); for each model the FLOPs at which its validation curve first gets there,
interpolated linearly between validations.

Writes `results/train_compare.json`, two PNGs, and every trained model (`save_language_model`)
for the routing and zero-shot stages.
"""

from __future__ import annotations

import logging
from pathlib import Path

import matplotlib.pyplot as plt

from common.data.tokenized import load_tokenized
from common.data.tokenizer import load_tokenizer
from common.errors import exit_on_user_error
from common.eval.counting import TRAIN_FACTOR, count_lm
from common.eval.plots import save_figure
from common.io import write_json
from common.models.lm import save_language_model
from common.stages import load_stage, stage_args
from common.training.lm import train_language_model
from papers.blackmamba.compared_models import TrainCompareConfig, model_configs

log = logging.getLogger("train_compare")


def flops_to_reach(curve: list[tuple[float, float]], target: float) -> float | None:
    """First x at which the (x, loss) curve reaches `target`, linear between points."""
    for (x0, y0), (x1, y1) in zip([(0.0, float("inf"))] + curve, curve):
        if y1 <= target:
            if y0 == float("inf") or y0 == y1:
                return x1
            return x0 + (x1 - x0) * (y0 - target) / (y0 - y1)
    return None


def plot_curves(results: dict, x: str, path: Path, xlabel: str, log_x: bool) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, res in results.items():
        rows = [r for r in res["history"] if "val/loss" in r]
        ax.plot([r[x] for r in rows], [r["val/loss"] for r in rows], "o-", markersize=3,
                label=f"{name} ({res['forward_params'] / 1e6:.2f}M fwd / {res['params'] / 1e6:.2f}M total)")
    if log_x:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("validation cross-entropy (nats/token)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save_figure(fig, path)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = stage_args(argv, __doc__, "data", "tokenizer", "run-dir", "models-out", "out", "plot-flops", "plot-time")
    cfg, profile, _ = load_stage(args.params, "train_compare", TrainCompareConfig)

    vocab_size = len(load_tokenizer(args.tokenizer))
    n_ctx = len(load_tokenized(args.data)["train"][0]["input_ids"])
    configs = model_configs(cfg, vocab_size, n_ctx)
    tokens_per_step = cfg.data.batch_size * cfg.trainer.accumulate_grad_batches * n_ctx

    results = {}
    for name, lm_cfg in configs.items():
        log.info("training %s", name)
        net, run = train_language_model(lm_cfg, args.data, cfg.data, cfg.optim, cfg.trainer, args.run_dir / name,
                                        cfg.seed)
        count = count_lm(lm_cfg)
        flops_per_step = TRAIN_FACTOR * count.flops_per_token * tokens_per_step
        history = [{**row, "train_flops": row["step"] * flops_per_step} for row in run.history]
        results[name] = {
            "pattern": lm_cfg.pattern, "repeat": lm_cfg.repeat, "params": count.params,
            "forward_params": count.forward_params, "forward_flops_per_token": count.flops_per_token,
            "final_val_loss": next(r["val/loss"] for r in reversed(history) if "val/loss" in r),
            "train_seconds": history[-1]["elapsed_s"], "steps": history[-1]["step"], "history": history,
        }
        save_language_model(net, args.models_out / name)

    target = max(r["final_val_loss"] for r in results.values())
    for res in results.values():
        curve = [(r["train_flops"], r["val/loss"]) for r in res["history"] if "val/loss" in r]
        res["flops_to_target"] = flops_to_reach(curve, target)
    base = results["blackmamba"]["flops_to_target"]
    summary = {"target_val_loss": target, "tokens_per_step": tokens_per_step,
               "flops_to_target_over_blackmamba": {n: r["flops_to_target"] / base for n, r in results.items()
                                                   if r["flops_to_target"] is not None},
               "final_val_loss": {n: r["final_val_loss"] for n, r in results.items()}}
    write_json(args.out, {"profile": profile, "n_ctx": n_ctx, "vocab_size": vocab_size, "summary": summary,
                          "models": results})
    plot_curves(results, "train_flops", args.plot_flops, "training FLOPs", log_x=True)
    plot_curves(results, "elapsed_s", args.plot_time, "wall time (s, this machine)", log_x=False)
    log.info("wrote %s: %s", args.out, summary)


if __name__ == "__main__":
    main()
