"""Stage `lm_baseline`: a small Llama-style causal LM (Hugging Face `LlamaForCausalLM`) trained on
the packed story tokens. Writes final and best metrics as JSON and a loss-curve PNG.

Checkpoints go to the run directory; a run that was killed resumes from its last checkpoint when
the stage is started again with the same configuration.
"""

from __future__ import annotations

from common.config import seed_field
from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "data", "tokenizer", "run-dir", "metrics", "plot")

import logging
from dataclasses import asdict, dataclass, field

import torch

from common.data.datamodule import LoaderConfig, TextDataModule
from common.data.tokenized import load_tokenized
from common.data.tokenizer import load_tokenizer
from common.errors import exit_on_user_error
from common.eval.plots import plot_loss_curves
from common.models.hf import LlamaSpec, build_llama
from common.training.modules import CausalLMModule
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig, run_training

log = logging.getLogger("lm_baseline")


@dataclass
class LMBaselineConfig:
    seed: int = seed_field()
    model: LlamaSpec = field(default_factory=LlamaSpec)
    data: LoaderConfig = field(default_factory=LoaderConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "lm_baseline", LMBaselineConfig)

    # Validate every input before anything is written.
    vocab_size = len(load_tokenizer(args.tokenizer))
    stored = len(load_tokenized(args.data)["train"][0]["input_ids"])
    n_ctx = min(stored, cfg.data.n_ctx or stored)  # what training reads of each row

    datamodule = TextDataModule(args.data, batch_size=cfg.data.batch_size, num_workers=cfg.data.num_workers,
                                seed=cfg.seed, n_ctx=cfg.data.n_ctx)
    with torch.device("meta"):  # counted without allocating or drawing weights
        n_params = sum(p.numel() for p in build_llama(cfg.model, vocab_size=vocab_size, n_ctx=n_ctx).parameters())
    run = run_training(
        lambda: CausalLMModule(build_llama(cfg.model, vocab_size=vocab_size, n_ctx=n_ctx), vocab_size=vocab_size,
                               optim=cfg.optim),
        datamodule, cfg.trainer, args.run_dir, seed=cfg.seed, run_config=asdict(cfg), metrics_path=args.metrics,
        metrics_extra={"profile": profile, "n_params": n_params, "n_ctx": n_ctx, "vocab_size": vocab_size,
                       "batch_size": cfg.data.batch_size})

    if run.trainer.is_global_zero:
        plot_loss_curves(run.history, args.plot,
                         title=f"lm_baseline ({profile}): Llama, {n_params / 1e6:.2f}M parameters")
        log.info("wrote %s and %s", args.metrics, args.plot)


if __name__ == "__main__":
    main()
