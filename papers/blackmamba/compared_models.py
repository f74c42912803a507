"""The models of the training comparison (Figure 4): BlackMamba and its baselines, from the
`train_compare` section. The `latency` stage builds the same architectures, so both read them here."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from common.config import from_dict
from common.data.datamodule import LoaderConfig
from common.errors import ConfigError
from common.models.lm import LMConfig, check_lm_spec
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig
from papers.blackmamba.model import BlackMambaConfig, lm_config


@dataclass
class TrainCompareConfig:
    seed: int = 0
    blackmamba: BlackMambaConfig = field(default_factory=BlackMambaConfig)
    # Baselines as LanguageModel configs without vocab_size and n_ctx (taken from the data).
    baselines: dict[str, dict[str, Any]] = field(default_factory=dict)
    data: LoaderConfig = field(default_factory=LoaderConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)

    def check(self) -> None:
        for name, raw in self.baselines.items():
            check_lm_spec(raw, where=f"baselines.{name}")


def model_configs(cfg: TrainCompareConfig, vocab_size: int, n_ctx: int) -> dict[str, LMConfig]:
    models = {"blackmamba": lm_config(replace(cfg.blackmamba, vocab_size=vocab_size, n_ctx=n_ctx))}
    for name, raw in cfg.baselines.items():
        if name in models:
            raise ConfigError(f"train_compare.baselines.{name}: the name is taken by the BlackMamba model")
        if "vocab_size" in raw or "n_ctx" in raw:
            raise ConfigError(f"train_compare.baselines.{name}: vocab_size and n_ctx come from the data; remove them")
        models[name] = from_dict(LMConfig, {**raw, "vocab_size": vocab_size, "n_ctx": n_ctx},
                                 where=f"train_compare.baselines.{name}")
    return models
