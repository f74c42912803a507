"""Train one `LanguageModel` config on a tokenized corpus (the `tokenize` stage's layout): the loop
that every paper's from-scratch language-model stage shares."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from common.data.datamodule import LoaderConfig, TextDataModule
from common.models.lm import LanguageModel, LMConfig
from common.training.modules import CausalLMModule
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig, TrainingRun, run_training


def train_language_model(lm_cfg: LMConfig, data: Path, loader: LoaderConfig, optim: OptimConfig,
                         trainer: TrainerConfig, run_dir: Path, seed: int) -> tuple[LanguageModel, TrainingRun]:
    """Seeded causal-LM training with resume (a run restarts only if its config or data changed);
    returns the trained network and the run (`run.history` holds the curves)."""
    datamodule = TextDataModule(data, batch_size=loader.batch_size, num_workers=loader.num_workers, seed=seed,
                                n_ctx=loader.n_ctx)
    run = run_training(lambda: CausalLMModule(LanguageModel(lm_cfg), vocab_size=lm_cfg.vocab_size, optim=optim,
                                              full_window=True),
                       datamodule, trainer, run_dir, seed=seed,
                       run_config={"model": asdict(lm_cfg), "data": asdict(loader), "optim": asdict(optim)})
    return run.module.net, run
