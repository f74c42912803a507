"""Stage `projector_budget`: the paper's Figure 4, the sweep's optimum against the amount of
projector pretraining.

For every budget (optimizer steps of projector pretraining on general text, reported as tokens),
a one-block Manticore[GPT-Neo, Mamba] gets its projectors and embeddings pretrained from scratch
for that budget (components frozen), then the fixed-alpha sweep of `nl_experiments` runs from
those weights on the completions. Reported per budget: the landscape and its best alpha.

Claim checked: the best alpha stabilises as the budget grows (the paper: at about 70M of its
100M tokens). At `tiny` the budgets are at most 1,600 sequences (64,000 tokens), so only the direction compares.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "components", "completions", "general", "run-dir", "out", "plot")

import logging
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt

from common.config import bounded
from common.data.tokenized import load_tokenized
from common.errors import ConfigError, exit_on_user_error
from common.eval.plots import save_figure
from common.io import write_json
from papers.manticore.finetune import Runner, SweepConfig, hybrid_inputs, write_not_trained

log = logging.getLogger("projector_budget")


@dataclass
class ProjectorBudgetConfig(SweepConfig):
    budgets: list[int] = field(default_factory=lambda: [0, 30, 100])  # projector-pretraining steps
    train_steps: int = bounded(60, ge=1)

    def check(self) -> None:
        super().check()
        if self.n_blocks != 1:
            raise ConfigError(f"n_blocks: Figure 4 sweeps one block, got {self.n_blocks}")
        # none: the stage trains nothing at this profile (its claim reads the earlier run)
        if any(b < 0 for b in self.budgets) or self.budgets != sorted(set(self.budgets)):
            raise ConfigError(f"budgets: distinct non-negative step counts in increasing order, got {self.budgets}")


def plot_budgets(rows: list[dict], second: str, path: Path) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for row in rows:
        left.plot([s["alphas"][0][1] for s in row["sweep"]], [s["val_loss"] for s in row["sweep"]], "o-",
                  label=f"{row['tokens']:,} tokens")
    left.set_xlabel(f"alpha of {second}")
    left.set_ylabel("validation loss after fine-tuning")
    left.legend(fontsize=7)
    right.plot([r["tokens"] for r in rows], [r["best_alpha"] for r in rows], "o-", color="black")
    right.set_xlabel("projector-pretraining tokens")
    right.set_ylabel(f"best alpha of {second}")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    save_figure(fig, path)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "projector_budget", ProjectorBudgetConfig)
    if not cfg.budgets:
        write_not_trained(args, profile, cfg.components, {"budgets": []})
        return
    components, tokenizer, general = hybrid_inputs(args, cfg, "projector_budget", [args.completions])
    runner = Runner(cfg, components, len(tokenizer), args.run_dir)
    stored = len(load_tokenized(general, splits=("train",))["train"][0]["input_ids"])
    sequence_length = min(stored, cfg.general_n_ctx or stored)  # what pretraining reads of each row

    rows = []
    for budget in cfg.budgets:
        start, history = runner.pretrain_projectors(general, budget, name=f"projectors_{budget}")
        sweep = runner.sweep(start, args.completions, prefix=f"budget_{budget}_sweep")
        best = min(sweep, key=lambda s: s["val_loss"])
        rows.append({"steps": budget, "tokens": budget * cfg.batch_size * sequence_length, "sweep": sweep,
                     "best_alpha": best["alphas"][0][1], "best_val_loss": best["val_loss"],
                     "projector_val_loss": history[-1]["val/loss"] if history else None})
        log.info("budget %d steps: best alpha %.2f (%.4f)", budget, rows[-1]["best_alpha"], best["val_loss"])

    best_alphas = [r["best_alpha"] for r in rows]
    # The first budget from which the best alpha no longer moves (the last budget if it still moved there).
    stable_from = next(r["tokens"] for k, r in enumerate(rows) if len(set(best_alphas[k:])) == 1)
    summary = {"best_alpha_by_tokens": {str(r["tokens"]): r["best_alpha"] for r in rows},
               "stable_from_tokens": stable_from, "largest_budget_tokens": rows[-1]["tokens"],
               "stabilises_before_largest_budget": stable_from < rows[-1]["tokens"]}
    write_json(args.out, {"profile": profile, "components": cfg.components, "sequence_length": sequence_length,
                          "summary": summary, "budgets": rows})
    plot_budgets(rows, cfg.components[1], args.plot)
    log.info("wrote %s: %s", args.out, summary)


if __name__ == "__main__":
    main()
