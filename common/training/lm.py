"""Train one `LanguageModel` config on a tokenized corpus (the `tokenize` stage's layout): the loop
that every paper's from-scratch language-model stage shares."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import lightning as L

from common.data.datamodule import LoaderConfig, TextDataModule
from common.models.lm import LanguageModel, LMConfig
from common.training.callbacks import MetricsJSON
from common.training.modules import CausalLMModule
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig, train


def train_language_model(lm_cfg: LMConfig, data: Path, loader: LoaderConfig, optim: OptimConfig,
                         trainer: TrainerConfig, run_dir: Path, seed: int, profile: str
                         ) -> tuple[LanguageModel, MetricsJSON]:
    """Seeded causal-LM training with resume (a run restarts only if its config changed); returns
    the trained network and its metrics callback (`history` holds the curves)."""
    L.seed_everything(seed, workers=True, verbose=False)
    net = LanguageModel(lm_cfg)
    module = CausalLMModule(net, vocab_size=lm_cfg.vocab_size, optim=optim)
    datamodule = TextDataModule(data, batch_size=loader.batch_size, num_workers=loader.num_workers, seed=seed,
                                n_ctx=loader.n_ctx)
    metrics = train(module, datamodule, trainer, run_dir, run_config={
        "profile": profile, "model": asdict(lm_cfg), "seed": seed, "data": asdict(loader),
        "optim": asdict(optim), "trainer": asdict(trainer)})
    return net, metrics
