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
    seeds: list[int] = seeds_field(0, 1, 2)
    workers: int | None = bounded(None, ge=1)  # parallel training processes; None: one per core
    blackmamba: BlackMambaConfig = field(default_factory=BlackMambaConfig)
    # Baselines as LanguageModel configs without vocab_size and n_ctx (taken from the data).
    baselines: dict[str, dict[str, Any]] = field(default_factory=dict)
    routing_model: BlackMambaConfig | None = None
    # Learning rates tried at the first seed for every compared model, before its other seeds; each
    # model then trains at the rate that gave it the lowest final validation loss (the routing model
    # at BlackMamba's). One rate: every model at it, and no check; none: every model at `optim.lr`.
    lr_candidates: list[float] = field(default_factory=list)
    data: LoaderConfig = field(default_factory=LoaderConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)

    def check(self) -> None:
        check_distinct(self.seeds, "seeds")
        check_distinct(self.lr_candidates, "lr_candidates", at_least=0)
        if bad := [lr for lr in self.lr_candidates if not lr > 0]:
            raise ConfigError(f"lr_candidates: learning rates must be positive; got {bad}")
        for name, raw in self.baselines.items():
            check_lm_spec(raw, where=f"baselines.{name}")


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
