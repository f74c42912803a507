"""Stage `nl_experiments`: the paper's Figure 2 (left), Table 4 and Table 8 on the completions set.

1. Projector pretraining: a Manticore[GPT-Neo, Mamba] with frozen components trains its projectors
   and embeddings on general text (the `general_text` stage's: stories at `tiny`, FineWeb at
   `paper`) for `projector_steps` batches, with uniform mixture weights. Every later run starts
   from these weights.
2. Sweep: for each fixed alpha on a grid (the weight of the second component per block), train
   everything for `train_steps` on the completions and record the validation loss: the landscape.
   The grid's ends are the components alone (a one-hot alpha turns the projectors off).
3. Search: for each method (DARTS = softmax, DASH = Gumbel-softmax, GAEA = exponentiated gradient
   on the simplex) and update rule (alternating, simultaneous), search the alphas for
   `search_steps` while everything trains, then rewind the weights to step 1's, freeze the
   searched alphas and retrain for `train_steps`.
4. Ensemble: the components' output distributions mixed by learned weights, trained likewise.

Claims checked: does search land in the sweep's best region, and does the ensemble fall below
Manticore? Writes `results/nl_experiments.json` and the landscape plot with the searched alphas.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "components", "completions", "general", "run-dir", "out", "plot")

import copy
import logging
from dataclasses import dataclass, field, replace

from common.config import bounded
from common.errors import ConfigError, exit_on_user_error
from common.io import write_json
from common.training.modules import CausalLMModule
from papers.manticore.ensemble import LearnedEnsemble
from papers.manticore.finetune import (
    METHODS,
    Runner,
    SweepConfig,
    hybrid_inputs,
    plot_landscape,
    val_loss,
)
from papers.manticore.search import ManticoreSearchModule, SearchConfig, alpha_trajectory

log = logging.getLogger("nl_experiments")


@dataclass
class NLExperimentsConfig(SweepConfig):
    methods: list[str] = field(default_factory=lambda: ["darts", "dash"])
    updates: list[str] = field(default_factory=lambda: ["alternating", "simultaneous"])
    search_steps: int = bounded(100, ge=1)
    search: SearchConfig = field(default_factory=SearchConfig)
    # Per-method mixture-weight learning rates, over `search.arch_lr`: GAEA's exponentiated
    # gradient moves the weights themselves, not AdamW-normalised logits, and needs its own scale.
    arch_lr: dict[str, float] = field(default_factory=dict)
    best_region_tolerance: float = bounded(0.02, ge=0)  # relative loss above the sweep's best

    def check(self) -> None:
        super().check()
        for m in self.methods:
            if m not in METHODS:
                raise ConfigError(f"methods: {m!r} unknown; allowed: {', '.join(METHODS)}")
        for m, lr in self.arch_lr.items():
            if m not in METHODS or lr <= 0:
                raise ConfigError(f"arch_lr.{m}: must name a method ({', '.join(METHODS)}) with a positive rate, "
                                  f"got {lr}")
        for u in self.updates:
            if u not in ("alternating", "simultaneous"):
                raise ConfigError(f"updates: {u!r} unknown; allowed: alternating, simultaneous")


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "nl_experiments", NLExperimentsConfig)
    components, tokenizer, general = hybrid_inputs(args, cfg, "nl_experiments", [args.completions])
    vocab_size = len(tokenizer)
    runner = Runner(cfg, components, vocab_size, args.run_dir)
    start, projector_history = runner.pretrain_projectors(general, cfg.projector_steps)
    sweep = runner.sweep(start, args.completions)

    # 3. Search, rewind, retrain.
    searched = {}
    for method in cfg.methods:
        for update in cfg.updates:
            label = f"{method}_{update}"
            search = replace(cfg.search, update=update, arch_lr=cfg.arch_lr.get(method, cfg.search.arch_lr))

            def search_module(mode: str = METHODS[method], search: SearchConfig = search) -> ManticoreSearchModule:
                return ManticoreSearchModule(runner.hybrid(mode, start), vocab_size, cfg.optim, search)

            run = runner.fit(f"search_{label}", search_module, args.completions, cfg.search_steps, manual=True)
            alphas = run.module.net.mixture_weights(sample=False).detach()
            searched[label] = {"alphas": alphas.tolist(), "search_val_loss": val_loss(run.history),
                               "val_loss": runner.retrain(f"retrain_{label}", alphas, start, args.completions),
                               "trajectory": alpha_trajectory(run.history, cfg.n_blocks, 2)}
            log.info("%s: alphas %s, retrained %.4f", label, alphas[:, 1].tolist(), searched[label]["val_loss"])

    # 4. The learned ensemble.
    run = runner.fit("ensemble", lambda: CausalLMModule(LearnedEnsemble(copy.deepcopy(components)), vocab_size,
                                                        cfg.optim), args.completions, cfg.train_steps)
    ensemble_result = {"weights": run.module.net.weights.detach().softmax(0).tolist(),
                       "val_loss": val_loss(run.history)}

    best = min(sweep, key=lambda s: s["val_loss"])
    # A one-hot alpha is the component alone (fine-tuned): the sweep's corners, when on the grid.
    component_alone = {name: s["val_loss"] for m, name in enumerate(cfg.components) for s in sweep
                       if all(row[1] == float(m) for row in s["alphas"])}
    threshold = best["val_loss"] * (1 + cfg.best_region_tolerance)
    best_manticore = min([best["val_loss"], *(r["val_loss"] for r in searched.values())])
    summary = {
        "sweep_best": best, "component_alone": component_alone,
        "search_in_best_region": {label: r["val_loss"] <= threshold for label, r in searched.items()},
        "best_region_threshold": threshold,
        "ensemble_below_manticore": ensemble_result["val_loss"] > best_manticore,
        "best_manticore_val_loss": best_manticore,
    }
    write_json(args.out, {"profile": profile, "components": cfg.components, "summary": summary, "sweep": sweep,
                          "searched": searched, "ensemble": ensemble_result,
                          "projector_pretraining": projector_history})
    plot_landscape(sweep, searched, cfg.components, args.plot)
    log.info("wrote %s: %s", args.out, summary)


if __name__ == "__main__":
    main()
