"""The landscape of a two-component Manticore on one fine-tuning set: the sweep of fixed alphas, and
beside it each search method and update rule (searched, rewound, retrained) and the learned
ensemble of the components' outputs. The paper's Figure 2 (left), Figure 3, Tables 4 and 8;
`nl_experiments` runs it on the completions and `finetune_tasks` on Figure 3's sets."""

from __future__ import annotations

import copy
import gc
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

from torch import Tensor

from common.config import bounded, check_distinct
from common.errors import ConfigError
from common.training.modules import CausalLMModule
from papers.manticore.ensemble import LearnedEnsemble
from papers.manticore.finetune import METHODS, Runner, SweepConfig, val_loss
from papers.manticore.search import ManticoreSearchModule, SearchConfig, alpha_trajectory

log = logging.getLogger(__name__)


@dataclass
class LandscapeConfig(SweepConfig):
    """The sweep, and beside it each search method and update rule (searched, rewound, retrained)
    and the learned ensemble."""
    methods: list[str] = field(default_factory=lambda: ["darts", "dash"])
    updates: list[str] = field(default_factory=lambda: ["alternating", "simultaneous"])
    search_steps: int = bounded(100, ge=1)
    search: SearchConfig = field(default_factory=SearchConfig)
    # Per-method mixture-weight learning rates, over `search.arch_lr`: GAEA's exponentiated
    # gradient moves the weights themselves, not AdamW-normalised logits, and needs its own scale.
    arch_lr: dict[str, float] = field(default_factory=dict)
    best_region_tolerance: float = bounded(0.02, ge=0)  # relative loss above the sweep's best
    # False: the stage trains nothing at this profile, where no claim reads it (its tables say so)
    train: bool = True

    def check(self) -> None:
        super().check()
        if not self.methods or not self.updates:
            raise ConfigError(f"methods and updates: name at least one of each (methods: {', '.join(METHODS)}; "
                              "updates: alternating, simultaneous)")
        check_distinct(self.methods, "methods")
        check_distinct(self.updates, "updates")
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


def search_alphas(runner: Runner, cfg, method: str, update: str, start: dict, data: Path,
                  name: str) -> tuple[Tensor, list[dict]]:
    """`method` with `update` searched on `data` from `start` for `cfg.search_steps` (`cfg`: any
    stage config with `search`, `arch_lr`, `search_steps` and `optim`): the mixture weights it ends
    at and the search's history. The search run is freed before the caller retrains."""
    settings = replace(cfg.search, update=update, arch_lr=cfg.arch_lr.get(method, cfg.search.arch_lr))

    def search_module() -> ManticoreSearchModule:
        return ManticoreSearchModule(runner.hybrid(METHODS[method], start), runner.vocab_size, cfg.optim, settings)

    run = runner.fit(name, search_module, data, cfg.search_steps, manual=True)
    alphas, history = run.module.net.mixture_weights(sample=False).detach(), run.history
    # At `paper` a hybrid with its AdamW state is about 14 GB.
    del run
    gc.collect()  # Lightning's trainer and module refer to each other
    return alphas, history


def landscape(runner: Runner, cfg: LandscapeConfig, start: dict, data: Path, prefix: str = "") -> dict:
    """On `data`, from `start`: the sweep of fixed alphas; each method and update rule searched for
    `search_steps`, rewound to `start` and retrained with its alphas frozen; the learned ensemble of
    the components' outputs; and a summary (does search land in the sweep's best region, does the
    ensemble fall below Manticore). Run names start with `prefix`."""
    sweep = runner.sweep(start, data, prefix=f"{prefix}sweep")
    searched = {}
    for method in cfg.methods:
        for update in cfg.updates:
            label = f"{method}_{update}"
            alphas, history = search_alphas(runner, cfg, method, update, start, data, f"{prefix}search_{label}")
            searched[label] = {"alphas": alphas.tolist(), "search_val_loss": val_loss(history),
                               "val_loss": runner.retrain(f"{prefix}retrain_{label}", alphas, start, data),
                               "trajectory": alpha_trajectory(history, cfg.n_blocks, 2)}
            log.info("%s: alphas %s, retrained %.4f", label, alphas[:, 1].tolist(), searched[label]["val_loss"])

    run = runner.fit(f"{prefix}ensemble", lambda: CausalLMModule(LearnedEnsemble(copy.deepcopy(runner.components)),
                                                                 runner.vocab_size, cfg.optim), data, cfg.train_steps)
    ensemble = {"weights": run.module.net.weights.detach().softmax(0).tolist(), "val_loss": val_loss(run.history)}

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
        "ensemble_below_manticore": ensemble["val_loss"] > best_manticore,
        "best_manticore_val_loss": best_manticore,
    }
    return {"summary": summary, "sweep": sweep, "searched": searched, "ensemble": ensemble}
