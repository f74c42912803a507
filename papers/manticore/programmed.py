"""Stage `programmed`: the paper's Figure 2 (right), mixture weights programmed with MAD.

1. Projector pretraining, as in `nl_experiments`, for a Manticore[GPT-Neo, Mamba] with two blocks.
2. The 2-D landscape: every fixed alpha of the grid (the weight of the second component in each
   block), all weights fine-tuned on the completions for `train_steps`.
3. Programmed alphas: the mean of the alphas that `mad_experiments`' programming search found on
   each MAD task with a scaled-down, randomly initialised hybrid of the same two architectures and
   the same number of blocks (no projectors, mixture-weight rate 0.01: the paper's appendix E.3),
   frozen and fine-tuned like a grid point. No search runs on the completions.

Claim checked: the programmed hybrid beats both naive frankenmerges, the grid corners that take
one block from each component (GPT-Neo then Mamba, and Mamba then GPT-Neo). Writes
`results/programmed.json` and the landscape with each task's search path and the programmed point.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "components", "completions", "general", "run-dir", "out", "plot", "mad")

import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch

from common.config import bounded
from common.data.tokenized import load_tokenized
from common.errors import ConfigError, exit_on_user_error
from common.eval.chance import scored_unigram_loss
from common.io import load_json, write_json
from papers.manticore.alphas import average
from papers.manticore.finetune import Runner, SweepConfig, hybrid_inputs, plot_landscape

log = logging.getLogger("programmed")


@dataclass
class ProgrammedConfig(SweepConfig):
    n_blocks: int = bounded(2, ge=1)
    sweep_points: list[float] = field(default_factory=lambda: [0.0, 0.5, 1.0])

    def check(self) -> None:
        super().check()
        if self.n_blocks != 2:
            raise ConfigError(f"n_blocks: the frankenmerges and the 2-D landscape need 2, got {self.n_blocks}")
        if not {0.0, 1.0} <= set(self.sweep_points):
            raise ConfigError(f"sweep_points: must include 0 and 1 (the components and frankenmerges), "
                              f"got {self.sweep_points}")


def mad_alphas(path: Path, cfg: ProgrammedConfig) -> dict[str, dict]:
    """Each MAD task's programming-search alphas and path, checked against this hybrid's layout."""
    mad = load_json(path, "run the mad_experiments stage first")
    if mad.get("programming") is None:
        raise ConfigError("programmed: mad_experiments ran no programming search; "
                          "set mad_experiments.programming and rerun it")
    n_blocks = mad["programming"]["n_blocks"]
    if mad["components"] != cfg.components or n_blocks != cfg.n_blocks:
        raise ConfigError(f"programmed: mad_experiments' programming search used {mad['components']} with "
                          f"{n_blocks} blocks; programming needs the same components in the same order "
                          f"and n_blocks {cfg.n_blocks}")
    return {task: {"alphas": row["programming"]["alphas"], "trajectory": row["programming"]["trajectory"]}
            for task, row in mad["tasks"].items()}


def corner(sweep: list[dict], alpha_of_second: tuple[float, ...]) -> float:
    return next(s["val_loss"] for s in sweep if tuple(row[1] for row in s["alphas"]) == alpha_of_second)


def completions_chance(data: Path, vocab_size: int) -> float:
    """The completions' unigram loss: the training tokens' frequencies, scored on the labels the models
    are scored on (every non-padding validation token but a row's first)."""
    rows = load_tokenized(data, splits=("train", "validation"))
    return scored_unigram_loss(rows["train"], rows["validation"], vocab_size)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "programmed", ProgrammedConfig)
    searched = mad_alphas(args.mad, cfg)
    components, tokenizer, general = hybrid_inputs(args, cfg, "programmed", [args.completions])
    runner = Runner(cfg, components, len(tokenizer), args.run_dir)

    start, projector_history = runner.pretrain_projectors(general, cfg.projector_steps)
    sweep = runner.sweep(start, args.completions)
    alphas = average([torch.tensor(s["alphas"]) for s in searched.values()])
    programmed = {"alphas": alphas.tolist(), "val_loss": runner.retrain("programmed", alphas, start, args.completions)}
    log.info("programmed %s: %.4f", alphas[:, 1].tolist(), programmed["val_loss"])

    first, second = cfg.components
    frankenmerges = {f"{first} then {second}": corner(sweep, (0.0, 1.0)),
                     f"{second} then {first}": corner(sweep, (1.0, 0.0))}
    summary = {
        "programmed_val_loss": programmed["val_loss"], "frankenmerges": frankenmerges,
        "chance": completions_chance(args.completions, len(tokenizer)),
        "components_alone": {first: corner(sweep, (0.0, 0.0)), second: corner(sweep, (1.0, 1.0))},
        "sweep_best": min(sweep, key=lambda s: s["val_loss"]),
        "beats_both_frankenmerges": all(programmed["val_loss"] < v for v in frankenmerges.values()),
    }
    write_json(args.out, {"profile": profile, "components": cfg.components, "summary": summary, "sweep": sweep,
                          "programmed": programmed, "mad_searched": searched,
                          "projector_pretraining": projector_history})
    # The search paths are MAD's (scaled-down, from scratch), drawn on the completions' landscape.
    paths = {f"MAD {task.split('/')[-1]}": s for task, s in searched.items()}
    plot_landscape(sweep, {**paths, "programmed (mean)": {**programmed, "trajectory": []}}, cfg.components,
                   args.plot)
    log.info("wrote %s: %s", args.out, summary)


if __name__ == "__main__":
    main()
