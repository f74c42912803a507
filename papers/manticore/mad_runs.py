"""The runs of the MAD tables, as `mad_experiments` trains them and `mad_lr_check` trains them again
at other rates: a network trained alone, or a Manticore search with its retrainings, scored on the
task's test split; each one job for the worker processes (`run_job`), and a task's and seed's row of
the tables from its jobs' results (`table_row`)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import lightning as L

from common.data.mad import MADTaskConfig, sequence_length
from common.models.lm import LanguageModel, LMConfig
from common.training.mad import build_mad_model, train_module_on_mad
from common.training.modules import CausalLMModule
from common.training.trainer import TrainerConfig, TrainingRun
from papers.manticore.hybrid import Manticore, ManticoreConfig
from papers.manticore.mad_config import MADExperimentsConfig, baseline_configs, component_configs
from papers.manticore.search import (
    ManticoreSearchModule,
    SearchConfig,
    alpha_trajectory,
    freeze_alphas,
    rewind,
    snapshot,
)


def build_hybrid(configs: dict[str, LMConfig], n_blocks: int, vocab_size: int, projectors: bool) -> Manticore:
    """Manticore over fresh copies of `configs` (in order), mixture weights uniform."""
    return Manticore([LanguageModel(c) for c in configs.values()],
                     ManticoreConfig(n_blocks=n_blocks, vocab_size=vocab_size, use_projectors=projectors))


def train_scored(build: Callable[[], L.LightningModule], task: MADTaskConfig, trainer: TrainerConfig,
                 cfg: MADExperimentsConfig, seed: int, run_dir: Path, run_config: dict) -> tuple[dict, TrainingRun]:
    """Train, score on the test split, and add `best_loss`: the lowest test loss of any validation
    (which reads the test split) or of the final scoring."""
    scores, run = train_module_on_mad(build, task, trainer, run_dir, cfg.batch_size, seed, run_config)
    seen = [row["val/loss"] for row in run.history if "val/loss" in row]
    return {**scores, "best_loss": min([*seen, scores["loss"]])}, run


def train_alone(lm: LMConfig, task: MADTaskConfig, cfg: MADExperimentsConfig, seed: int, run_dir: Path) -> dict:
    """One component or existing hybrid, trained alone."""
    def build() -> CausalLMModule:
        return CausalLMModule(build_mad_model(lm, task), vocab_size=task.vocab_size, optim=cfg.optim,
                              shift_labels=False)

    scores, _ = train_scored(build, task, cfg.trainer, cfg, seed, run_dir,
                             {"lm": asdict(lm), "optim": asdict(cfg.optim)})
    return scores


def search_and_retrain(configs: dict[str, LMConfig], n_blocks: int, search_cfg: SearchConfig, retrain: list[str],
                       task: MADTaskConfig, cfg: MADExperimentsConfig, seed: int, run_root: Path, label: str
                       ) -> dict[str, dict]:
    """Search a Manticore over `configs` (run dir `run_root/label`), then each retraining in
    `retrain` (run dir `run_root/label_<mode>`) from the search's initial weights. Returns the
    scores by "search" and mode; each with its alphas, the search's also with its alpha path."""
    start = {}

    def search_module() -> ManticoreSearchModule:
        hybrid = build_hybrid(configs, n_blocks, task.vocab_size, cfg.projectors)
        start.update(snapshot(hybrid))  # every retraining starts from the search's initial weights
        return ManticoreSearchModule(hybrid, task.vocab_size, cfg.optim, search_cfg, shift_labels=False)

    run_config = {"components": {n: asdict(c) for n, c in configs.items()}, "n_blocks": n_blocks,
                  "projectors": cfg.projectors, "search": asdict(search_cfg), "optim": asdict(cfg.optim)}
    search_trainer = replace(cfg.trainer, gradient_clip_val=None)  # the search module clips itself
    scores, search = train_scored(search_module, task, search_trainer, cfg, seed, run_root / label, run_config)
    hybrid = search.module.net
    out = {"search": {**scores, "alphas": hybrid.mixture_weights(sample=False).detach().tolist(),
                      "trajectory": alpha_trajectory(search.history, n_blocks, len(configs))}}

    for mode in retrain:
        def retrained(mode: str = mode) -> CausalLMModule:
            net = copy.deepcopy(hybrid)
            if mode == "discretized":
                net.discretize()
            else:
                freeze_alphas(net)
            rewind(net, start)
            return CausalLMModule(net, task.vocab_size, cfg.optim, shift_labels=False)

        scores, run = train_scored(retrained, task, cfg.trainer, cfg, seed, run_root / f"{label}_{mode}",
                                   {**run_config, mode: True})
        out[mode] = {**scores, "alphas": run.module.net.mixture_weights(sample=False).detach().tolist()}
    return out


def run_job(kind: str, name: str, entry: str, seed: int, cfg: MADExperimentsConfig, run_root: Path) -> dict:
    """One independent run of task `entry` with `seed` (a worker job), at its rate (`lr_of`): a
    network trained alone (`kind` "alone"), or a search with its retrainings: of
    Manticore[components] ("manticore"), the programming search ("programming"), or the hybrid
    `name` ("hybrid")."""
    cfg = replace(cfg, optim=replace(cfg.optim, lr=cfg.lr_of(entry, name)))
    task = cfg.tasks()[entry]
    n_ctx = sequence_length(task)
    configs = component_configs(cfg, task.vocab_size, n_ctx)
    networks = {**configs, **baseline_configs(cfg, task.vocab_size, n_ctx)}
    if kind == "alone":
        return train_alone(networks[name], task, cfg, seed, run_root / name)
    if kind == "manticore":
        return search_and_retrain(configs, cfg.n_blocks, cfg.search, cfg.retrain, task, cfg, seed, run_root, name)
    if kind == "programming":
        return search_and_retrain(configs, cfg.programming.n_blocks, cfg.programming.search, [], task, cfg, seed,
                                  run_root, name)
    spec = cfg.hybrids[name]
    parts = {n: networks[n] for n in spec.components}
    return search_and_retrain(parts, spec.n_blocks, cfg.search, spec.retrain, task, cfg, seed, run_root, name)


def job_cost(job: dict) -> float:
    """Trainings a job runs, times the networks each trains at once: longest first (`run_jobs`)."""
    cfg = job["cfg"]
    if job["kind"] == "alone":
        return 1
    if job["kind"] == "hybrid":
        spec = cfg.hybrids[job["name"]]
        return (1 + len(spec.retrain)) * len(spec.components)
    return (1 + (len(cfg.retrain) if job["kind"] == "manticore" else 0)) * len(cfg.components)


def table_row(cfg: MADExperimentsConfig, done: dict[str, dict]) -> dict:
    """One task's and seed's row of the tables from its jobs' results (`done`, by job name)."""
    row = {name: done[name] for name in cfg.components}
    hybrid = done["manticore"]
    row["manticore"] = hybrid["search"]
    for mode in cfg.retrain:
        row[f"manticore_{mode}"] = hybrid[mode]
    if cfg.programming is not None:
        row["programming"] = done["programming"]["search"]
    if cfg.baselines:
        row["baselines"] = {name: done[name] for name in cfg.baselines}
        row["hybrids"] = {name: done[name] for name in cfg.hybrids}
    return row
