"""Stage `programmed`: the paper's Figure 2 (right), mixture weights programmed with MAD.

For each seed (jobs in parallel worker processes):

1. Projector pretraining, as in `nl_experiments`, for a Manticore[GPT-Neo, Mamba] with two blocks.
2. The 2-D landscape: every fixed alpha of the grid (the weight of the second component in each
   block), all weights fine-tuned on the completions for `train_steps`.
3. Programmed alphas: the mean of the alphas that `mad_experiments`' programming search found on
   each MAD task with a scaled-down, randomly initialised hybrid of the same two architectures and
   the same number of blocks (no projectors, mixture-weight rate 0.01: the paper's appendix E.3),
   frozen and fine-tuned like a grid point. No search runs on the completions. The programmed
   alphas are the same for every seed: the seed changes the projectors, embeddings and data order.

Claim checked: the programmed hybrid beats both naive frankenmerges, the grid corners that take
one block from each component (GPT-Neo then Mamba, and Mamba then GPT-Neo). Writes
`results/programmed.json` (each seed's runs, and the landscape and summary as means over seeds)
and the mean landscape with each task's search path and the programmed point.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "components", "completions", "general", "run-dir", "out", "plot", "mad")

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import mean

import torch

from common.config import bounded, check_distinct, seeds_field
from common.data.tokenized import load_tokenized
from common.errors import ConfigError, DataError, exit_on_user_error
from common.eval.chance import scored_unigram_loss
from common.io import load_json, write_json
from common.parallel import run_jobs
from papers.manticore.alphas import average
from papers.manticore.finetune import Runner, SweepConfig, hybrid_inputs, plot_landscape, write_not_trained
from papers.manticore.vocabulary import components_for_hybrid

log = logging.getLogger("programmed")


@dataclass
class ProgrammedConfig(SweepConfig):
    n_blocks: int = bounded(2, ge=1)
    sweep_points: list[float] = field(default_factory=lambda: [0.0, 0.5, 1.0])
    seeds: list[int] = seeds_field(0, 1, 2)
    workers: int | None = bounded(None, ge=1)  # None: one per core

    def check(self) -> None:
        super().check()
        check_distinct(self.seeds, "seeds", at_least=0)  # none: the stage trains nothing at this profile
        if self.seed != 0:  # the inherited single seed would be silently ignored
            raise ConfigError(f"seed: this stage trains every seed in `seeds`; list {self.seed} there instead")
        if self.n_blocks != 2:
            raise ConfigError(f"n_blocks: the frankenmerges and the 2-D landscape need 2, got {self.n_blocks}")
        if not {0.0, 1.0} <= set(self.sweep_points):
            raise ConfigError(f"sweep_points: must include 0 and 1 (the components and frankenmerges), "
                              f"got {self.sweep_points}")


def mad_alphas(path: Path, cfg: ProgrammedConfig, profile: str | None = None) -> dict[str, dict]:
    """Each MAD task's programming-search alphas and path, checked against this hybrid's layout and,
    given `profile`, made at this stage's profile."""
    mad = load_json(path, "run the mad_experiments stage first")
    if profile is not None and mad.get("profile") != profile:
        raise DataError(f"{path}: mad_experiments ran at profile {mad.get('profile')}, this stage at {profile}; "
                        "rerun mad_experiments at this profile")
    if mad.get("programming") is None:
        raise ConfigError("programmed: mad_experiments ran no programming search; "
                          "set mad_experiments.programming and rerun it")
    n_blocks = mad["programming"]["n_blocks"]
    if mad["components"] != cfg.components or n_blocks != cfg.n_blocks:
        raise ConfigError(f"programmed: mad_experiments' programming search used {mad['components']} with "
                          f"{n_blocks} blocks; programming needs the same components in the same order "
                          f"and n_blocks {cfg.n_blocks}")
    # The first seed's search of each task: the paper ran one per task.
    first = str(mad["seeds"][0])
    searches = {task: row["seeds"][first]["programming"] for task, row in mad["tasks"].items()}
    return {task: {"alphas": s["alphas"], "trajectory": s["trajectory"]} for task, s in searches.items()}


def corner(sweep: list[dict], alpha_of_second: tuple[float, ...]) -> float:
    return next(s["val_loss"] for s in sweep if tuple(row[1] for row in s["alphas"]) == alpha_of_second)


def completions_chance(data: Path, vocab_size: int) -> float:
    """The completions' unigram loss: the training tokens' frequencies, scored on the labels the models
    are scored on (every non-padding validation token but a row's first)."""
    rows = load_tokenized(data, splits=("train", "validation"))
    return scored_unigram_loss(rows["train"], rows["validation"], vocab_size)


def run_seed(cfg: ProgrammedConfig, seed: int, alphas: list, components_dir: Path, completions: Path,
             general: Path, run_root: Path) -> dict:
    """One seed's runs (one worker job): projector pretraining, the grid, the programmed point, and
    the arms the claim compares."""
    cfg = replace(cfg, seed=seed)
    components, tokenizer = components_for_hybrid(components_dir, cfg.components)
    runner = Runner(cfg, components, len(tokenizer), run_root / f"seed{seed}")
    start, projector_history = runner.pretrain_projectors(general, cfg.projector_steps)
    sweep = runner.sweep(start, completions)
    programmed = runner.retrain("programmed", torch.tensor(alphas), start, completions)
    log.info("seed %d: programmed %.4f", seed, programmed)
    first, second = cfg.components
    return {"seed": seed, "programmed_val_loss": programmed,
            "frankenmerges": {f"{first} then {second}": corner(sweep, (0.0, 1.0)),
                              f"{second} then {first}": corner(sweep, (1.0, 0.0))},
            "components_alone": {first: corner(sweep, (0.0, 0.0)), second: corner(sweep, (1.0, 1.0))},
            "sweep": sweep, "projector_pretraining": projector_history}


def mean_over_seeds(runs: list[dict]) -> tuple[list[dict], dict]:
    """The landscape (each grid point's mean loss, and each seed's) and the arms, as means over seeds."""
    sweep = [{"alphas": point["alphas"], "val_loss": mean(r["sweep"][k]["val_loss"] for r in runs),
              "val_losses": [r["sweep"][k]["val_loss"] for r in runs]} for k, point in enumerate(runs[0]["sweep"])]
    arms = {key: {name: mean(r[key][name] for r in runs) for name in runs[0][key]}
            for key in ("frankenmerges", "components_alone")}
    return sweep, {"programmed_val_loss": mean(r["programmed_val_loss"] for r in runs), **arms}


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "programmed", ProgrammedConfig)
    if not cfg.seeds:  # decides nothing at this profile: its claim reads the earlier run
        write_not_trained(args, profile, cfg.components, {"seeds": [], "runs": []})
        return
    searched = mad_alphas(args.mad, cfg, profile)
    _, tokenizer, general = hybrid_inputs(args, cfg, "programmed", [args.completions])
    alphas = average([torch.tensor(s["alphas"]) for s in searched.values()]).tolist()
    jobs = [{"cfg": cfg, "seed": seed, "alphas": alphas, "components_dir": args.components,
             "completions": args.completions, "general": general, "run_root": args.run_dir} for seed in cfg.seeds]
    runs = run_jobs(run_seed, jobs, cfg.trainer.job_workers(cfg.workers))

    sweep, means = mean_over_seeds(runs)
    beats = all(means["programmed_val_loss"] < v for v in means["frankenmerges"].values())
    summary = {**means, "chance": completions_chance(args.completions, len(tokenizer)),
               "sweep_best": min(sweep, key=lambda s: s["val_loss"]), "beats_both_frankenmerges": beats}
    programmed = {"alphas": alphas, "val_loss": means["programmed_val_loss"]}
    write_json(args.out, {"profile": profile, "components": cfg.components, "seeds": cfg.seeds, "summary": summary,
                          "sweep": sweep, "programmed": programmed, "mad_searched": searched, "runs": runs})
    # The search paths are MAD's (scaled-down, from scratch), drawn on the completions' landscape.
    paths = {f"MAD {task.split('/')[-1]}": s for task, s in searched.items()}
    plot_landscape(sweep, {**paths, "programmed (mean)": {**programmed, "trajectory": []}}, cfg.components,
                   args.plot)
    log.info("wrote %s: %s", args.out, summary)


if __name__ == "__main__":
    main()
