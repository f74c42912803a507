"""One training run of a Figure 4 model, as `train_compare` and `lr_check` both train them: the
model, a seed and a learning rate, trained with the section's data, batch, optimizer and steps, and
its validation curve put on the training-FLOP axis."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from common.data.datamodule import LoaderConfig
from common.eval.counting import TRAIN_FACTOR, count_lm
from common.models.lm import LMConfig, save_language_model
from common.parallel import run_jobs
from common.training.lm import train_language_model
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig
from papers.blackmamba.compared_models import TrainCompareConfig

log = logging.getLogger("compare_run")


def train_one(name: str, seed: int, lm_cfg: LMConfig, data: Path, loader: LoaderConfig, optim: OptimConfig,
              trainer: TrainerConfig, run_dir: Path, model_dir: Path | None, flops_per_process_step: float) -> dict:
    """One model, one seed: train, save (unless `model_dir` is None), and return its curve on the
    FLOP axis. A step trains `loader.batch_size` rows in each process of the run (several under DDP)."""
    log.info("training %s, seed %d, lr %g", name, seed, optim.lr)
    net, run = train_language_model(lm_cfg, data, loader, optim, trainer, run_dir, seed)
    if model_dir is not None:
        save_language_model(net, model_dir)
    processes = run.trainer.world_size
    history = [{**row, "train_flops": row["step"] * flops_per_process_step * processes} for row in run.history]
    return {"final_val_loss": next(r["val/loss"] for r in reversed(history) if "val/loss" in r),
            "steps": history[-1]["step"], "train_seconds_in_parallel": history[-1]["elapsed_s"], "history": history,
            "processes": processes}


def job(cfg: TrainCompareConfig, name: str, lm_cfg: LMConfig, seed: int, lr: float, data: Path, run_dir: Path,
        model_dir: Path | None) -> dict:
    """`train_one`'s arguments for one run of the section `cfg`."""
    tokens_per_process_step = cfg.data.batch_size * cfg.trainer.accumulate_grad_batches * lm_cfg.n_ctx
    return {"name": name, "seed": seed, "lm_cfg": lm_cfg, "data": data, "loader": cfg.data,
            "optim": replace(cfg.optim, lr=lr), "trainer": cfg.trainer, "run_dir": run_dir, "model_dir": model_dir,
            "flops_per_process_step": TRAIN_FACTOR * count_lm(lm_cfg).flops_per_token * tokens_per_process_step}


def train_all(cfg: TrainCompareConfig, jobs: list[dict]) -> list[dict]:
    """Every job in worker processes, results in job order."""
    # Blocks per model as the cost: the deep routing model's runs start first rather than last.
    return run_jobs(train_one, jobs, cfg.trainer.job_workers(cfg.workers), cost=lambda job: len(job["lm_cfg"].layers))
