"""Stage `mad_experiments`: the paper's MAD tables from scratch: Table 2 (right) and Table 5, and
Table 2 (left) with Table 6, and the MAD searches that program Figure 2 (right).

Table 2 (right), Table 5. For every MAD task: a GPT-Neo-style transformer alone, a Mamba alone, and
Manticore[GPT-Neo, Mamba] built from fresh copies of the same two (`n_blocks` Manticore blocks, one
in the paper; each component's depth a multiple of it), trained as the paper's MAD pipeline does:
everything at once, mixture weights with their own optimizer, simultaneous updates, no projectors
(the paper's from-scratch hybrids have none). The paper reports each model's best test loss during
training, its models overfitting: validation reads the test split, and `best_loss` is the lowest
loss any validation (or the final scoring) saw. Then (`retrain`) the searched alphas are discretized
(argmax per block), the weights rewound to their initial values, and the discretized hybrid
retrained; or the searched alphas are frozen as they are and the rewound hybrid retrained.

Table 2 (left), Table 6. Existing hybrids trained alone (`baselines`: e.g. the MAD paper's striped
multi-head Hyena + MoE-MLP and Mambaformer, any `LanguageModel` pattern), against further
Manticore hybrids (`hybrids`) whose components are any of the `components` and `baselines` (the
paper's: striped MH-Hyena + MoE, GPT-Neo and Mamba, two blocks each, two Manticore blocks),
searched the same way and retrained; `compare` names the result that enters the comparison.

Figure 2 (right). `programming`: a search of Manticore[components] with the paper's appendix E.3
settings (its own block count and mixture-weight rate); `programmed` averages its alphas.

Every network trained alone, and every search with its retrainings, is one job for the worker
processes (`workers`; `common.parallel`), once per seed of `mad_tasks.seeds`. The claims (Table 2
right and left, Table 5) are judged in the claims ledger by the `report` stage, over the seeds and
against chance (each network alone must score above it on every seed); this stage writes losses and
accuracies only, no verdicts. Compression is not part of it (the official pipeline did not run it either).
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "run-dir", "out")

import copy
import logging
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import lightning as L

from common.data.mad import MADTaskConfig, sequence_length
from common.errors import exit_on_user_error
from common.io import write_json
from common.models.lm import LanguageModel, LMConfig
from common.parallel import run_jobs
from common.training.mad import build_mad_model, train_module_on_mad
from common.training.modules import CausalLMModule
from common.training.trainer import TrainerConfig, TrainingRun
from papers.manticore.hybrid import Manticore, ManticoreConfig
from papers.manticore.mad_config import MAD_TASKS, MADExperimentsConfig, baseline_configs, component_configs
from papers.manticore.search import (
    ManticoreSearchModule,
    SearchConfig,
    alpha_trajectory,
    freeze_alphas,
    rewind,
    snapshot,
)

log = logging.getLogger("mad_experiments")

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
    """One independent run of task `entry` with `seed` (a worker job): a network trained alone
    (`kind` "alone"), or a search with its retrainings: of Manticore[components] ("manticore"), the
    programming search ("programming"), or the hybrid `name` ("hybrid")."""
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


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "mad_experiments", MADExperimentsConfig, shared=MAD_TASKS)
    tasks = cfg.tasks()

    jobs = []
    for entry, task in tasks.items():
        n_ctx = sequence_length(task)
        alone = [*component_configs(cfg, task.vocab_size, n_ctx), *baseline_configs(cfg, task.vocab_size, n_ctx)]
        searches = [("manticore", "manticore"), *([("programming", "programming")] if cfg.programming else []),
                    *(("hybrid", name) for name in cfg.hybrids)]
        jobs += [{"kind": kind, "name": name, "entry": entry, "seed": seed, "cfg": cfg,
                  "run_root": args.run_dir / entry.replace("/", "_") / f"seed{seed}"}
                 for seed in cfg.seeds for kind, name in [*(("alone", name) for name in alone), *searches]]
    done = {(job["entry"], job["seed"], job["name"]): result
            for job, result in zip(jobs, run_jobs(run_job, jobs, cfg.trainer.job_workers(cfg.workers), cost=job_cost))}

    results = {}
    for entry in tasks:
        results[entry] = {"seeds": {str(seed): table_row(cfg, {name: result for (e, s, name), result in done.items()
                                                                if (e, s) == (entry, seed)})
                                    for seed in cfg.seeds}}
        for seed, row in results[entry]["seeds"].items():
            log.info("%s, seed %s: test loss %s", entry, seed,
                     {**{k: round(v["loss"], 3) for k, v in row.items() if isinstance(v, dict) and "loss" in v},
                      **{k: round(v["loss"], 3) for k, v in row.get("baselines", {}).items()},
                      **{k: round(v[cfg.hybrids[k].compare]["loss"], 3) for k, v in row.get("hybrids", {}).items()}})

    write_json(args.out, {"profile": profile, "seeds": cfg.seeds, "steps": cfg.trainer.max_steps,
                          "components": list(cfg.components), "n_blocks": cfg.n_blocks,
                          "projectors": cfg.projectors,
                          "programming": None if cfg.programming is None else asdict(cfg.programming),
                          "baselines": list(cfg.baselines),
                          "hybrids": {name: asdict(spec) for name, spec in cfg.hybrids.items()},
                          "tasks": results})
    log.info("wrote %s", args.out)


if __name__ == "__main__":
    main()
