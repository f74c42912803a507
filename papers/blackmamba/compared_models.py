"""The models of the training comparison (Figure 4): BlackMamba and its baselines, from the
`train_compare` section. The `latency` stage builds the same architectures, so both read them here.

`routing_model` is one more BlackMamba, deeper and narrower, trained beside them for the routing
stage: Figures 6-7's per-layer pattern needs more MoE layers than the matched-size comparison has.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from common.config import bounded, check_distinct, from_dict, seeds_field
from common.data.datamodule import LoaderConfig
from common.errors import ConfigError
from common.models.lm import LMConfig, check_lm_spec
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig
from papers.blackmamba.model import ROUTING_MODEL, BlackMambaConfig, lm_config


@dataclass
class TrainCompareConfig:
    seeds: list[int] = seeds_field(0, 1, 2)  # every model's
    # Seeds beyond `seeds` for the named models, where a claim reads more of them (claims.yaml).
    extra_seeds: dict[str, list[int]] = field(default_factory=dict)
    workers: int | None = bounded(None, ge=1)  # parallel training processes; None: one per core
    blackmamba: BlackMambaConfig = field(default_factory=BlackMambaConfig)
    # Baselines as LanguageModel configs without vocab_size and n_ctx (taken from the data).
    baselines: dict[str, dict[str, Any]] = field(default_factory=dict)
    routing_model: BlackMambaConfig | None = None
    # A compared model's learning rate where it is not `optim.lr` (the routing model takes
    # BlackMamba's); the `lr_check` stage shows whether each is the model's best.
    model_lr: dict[str, float] = field(default_factory=dict)
    data: LoaderConfig = field(default_factory=LoaderConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)

    def check(self) -> None:
        check_distinct(self.seeds, "seeds")
        for name, extra in self.extra_seeds.items():
            check_distinct(self.seeds + extra, f"extra_seeds.{name} (with seeds)")
            if bad := [seed for seed in extra if seed < 0]:
                raise ConfigError(f"extra_seeds.{name}: seeds are non-negative integers; got {bad}")
        if bad := {name: lr for name, lr in self.model_lr.items() if not lr > 0}:
            raise ConfigError(f"model_lr: learning rates must be positive; got {bad}")
        for name, raw in self.baselines.items():
            check_lm_spec(raw, where=f"baselines.{name}")

    def seeds_of(self, name: str) -> list[int]:
        return self.seeds + self.extra_seeds.get(name, [])

    def lr_of(self, name: str) -> float:
        if name == ROUTING_MODEL:
            return self.model_lr.get(name, self.lr_of("blackmamba"))
        return self.model_lr.get(name, self.optim.lr)


# The section the lr_check stage reads besides its own (`common.config.stage_config`'s `shared`).
TRAIN_COMPARE = ("train_compare", TrainCompareConfig)


def check_model_names(cfg: TrainCompareConfig, models: dict) -> None:
    """`extra_seeds` and `model_lr` name models that exist: one of `models`, or the routing model
    when the section has one (a stage that trains only the compared models, as lr_check, still
    reads a section that names it)."""
    allowed = [*models, *([ROUTING_MODEL] if cfg.routing_model is not None and ROUTING_MODEL not in models else [])]
    for key in ("extra_seeds", "model_lr"):
        if unknown := sorted(set(getattr(cfg, key)) - set(allowed)):
            raise ConfigError(f"train_compare.{key}.{unknown[0]}: no such model; allowed: {', '.join(allowed)}")


def model_configs(cfg: TrainCompareConfig, vocab_size: int, n_ctx: int) -> dict[str, LMConfig]:
    """The compared models of Figure 4, BlackMamba first."""
    models = {"blackmamba": lm_config(replace(cfg.blackmamba, vocab_size=vocab_size, n_ctx=n_ctx))}
    for name, raw in cfg.baselines.items():
        if name in models or name == ROUTING_MODEL:
            raise ConfigError(f"train_compare.baselines.{name}: the name is taken by a BlackMamba model")
        if "vocab_size" in raw or "n_ctx" in raw:
            raise ConfigError(f"train_compare.baselines.{name}: vocab_size and n_ctx come from the data; remove them")
        models[name] = from_dict(LMConfig, {**raw, "vocab_size": vocab_size, "n_ctx": n_ctx},
                                 where=f"train_compare.baselines.{name}")
    return models


def routing_model_config(cfg: TrainCompareConfig, vocab_size: int, n_ctx: int) -> dict[str, LMConfig]:
    """The deeper BlackMamba of the routing stage, if configured."""
    if cfg.routing_model is None:
        return {}
    return {ROUTING_MODEL: lm_config(replace(cfg.routing_model, vocab_size=vocab_size, n_ctx=n_ctx))}
