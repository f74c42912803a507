"""What a stage computes at the `paper` profile: the networks it trains or runs, at which shapes, for
how many steps and runs (`Work`), and the root pipeline's stages' own declarations (`STAGES`). Each
paper declares its stages' work beside its code, in `papers/<paper>/paper_work.py`; the readiness
tables (`rehearsal.readiness`) turn it into parameters, tokens per step and H100 hours.

Every stage of every `dvc.yaml` has an entry in its pipeline's `STAGES` (a test checks it): a
function to a list of `Work`, or one line saying why the stage has none to count. The configs come
from the stages' own loaders and model builders, reading the committed params files with the
profile switched to `paper`, so a change of a `paper` block changes the table.

Counted: training (forward and backward) of every network, and the long forward-only passes
(Llama-3-8B writing summaries, retrieval embeddings, routing statistics). Not counted: evaluation
passes inside training (validation batches), and stages whose cost is measured timings or data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from torch import nn

from common.config import stage_config
from common.data.mad import sequence_length

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Work:
    """One kind of network a stage trains (or only runs forward) at `paper`, and how much."""

    network: str                       # its name, as the stage calls it
    build: Callable[[], nn.Module]     # the network at the paper's shapes, randomly initialised
    n_ctx: int                         # positions per row
    rows_per_step: int
    steps: int
    runs: int = 1                      # networks of this kind: seeds, sweep points, tasks
    train: bool = True                 # False: forward passes only, no backward
    vocab: int | None = None           # token ids fed to the forward; None: float inputs of `width`
    width: int | None = None
    forward_flops_per_row: float | None = None  # given where the network is too large to build here
    params: int | None = None                   # likewise
    note: str = ""


def paper_params(path: str) -> dict:
    """A params file as loaded, its profile switched to `paper`."""
    return {**yaml.safe_load((ROOT / path).read_text()), "profile": "paper"}


def root_sizes() -> tuple[int, int, int]:
    """(vocabulary, packed row length, padded row length) of the root pipeline's data at `paper`."""
    params = paper_params("params.yaml")
    from common.stages.tokenize_corpus import TokenizeConfig
    from common.stages.train_tokenizer import TokenizerConfig

    vocab = stage_config(params, "tokenizer", TokenizerConfig).vocab_size
    tokenize = stage_config(params, "tokenize", TokenizeConfig)
    return vocab, tokenize.packed_n_ctx, tokenize.padded_n_ctx


# --- root pipeline ----------------------------------------------------------------------------


def lm_baseline() -> list[Work]:
    from common.models.hf import build_llama
    from common.stages.lm_baseline import LMBaselineConfig

    cfg = stage_config(paper_params("params.yaml"), "lm_baseline", LMBaselineConfig)
    vocab, n_ctx, _ = root_sizes()
    return [Work("llama", lambda: build_llama(cfg.model, vocab_size=vocab, n_ctx=n_ctx), n_ctx,
                 cfg.data.batch_size * cfg.trainer.accumulate_grad_batches, cfg.trainer.max_steps, vocab=vocab)]


def mad_suite() -> list[Work]:
    from common.stages.mad_suite import MADSuiteConfig
    from common.training.mad import build_mad_model

    cfg = stage_config(paper_params("params.yaml"), "mad_suite", MADSuiteConfig)
    return [Work(name, lambda task=task: build_mad_model(cfg.model, task), sequence_length(task), cfg.batch_size,
                 cfg.trainer.max_steps, vocab=task.vocab_size) for name, task in cfg.tasks().items()]


STAGES: dict[str, Callable[[], list[Work]] | str] = {
    "generate_stories": "data: reads or generates the stories",
    "train_tokenizer": "tokenizer training on CPU",
    "tokenize": "tokenization on CPU",
    "lm_baseline": lm_baseline,
    "mad_suite": mad_suite,
    "lra_generate": "data: writes the LRA tasks",
}
