"""What each stage of the Masked Mixers pipeline computes at the `paper` profile (`common.paper_work`),
declared beside the stages, for the readiness tables of `make rehearse`."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import yaml

from common.config import stage_config
from common.paper_work import Work, paper_params, root_sizes

MM_PARAMS = "papers/masked_mixers/params.yaml"


def _mm_sizes():
    from papers.masked_mixers.models import ModelsConfig

    return stage_config(paper_params(MM_PARAMS), "models", ModelsConfig)


def _mm_trained(section: str) -> list[Work]:
    from papers.masked_mixers.compare import CompareConfig, load_norms_section
    from papers.masked_mixers.context_length import load_section as load_context_section
    from papers.masked_mixers.models import build_model
    from papers.masked_mixers.one_step import load_section as load_one_step_section
    from papers.masked_mixers.train_test_gap import load_section as load_gap_section
    from papers.masked_mixers.variants import load_section as load_variants_section

    vocab, _, _ = root_sizes()
    # Sections trained with the clm section's recipe: their loaders read a file, so a copy that names the profile.
    loaders = {"norms": load_norms_section, "mixer_variants": load_variants_section, "train_test_gap": load_gap_section,
               "one_step": load_one_step_section, "context_length": load_context_section}
    if section in loaders:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "params.yaml"
            path.write_text(yaml.safe_dump(paper_params(MM_PARAMS)))
            cfg, sizes = loaders[section](path)[:2]
    else:
        cfg, sizes = stage_config(paper_params(MM_PARAMS), section, CompareConfig), _mm_sizes()
    return [Work(name, lambda name=name: build_model(sizes.spec(name), sizes, vocab), sizes.n_ctx,
                 cfg.batch_size * cfg.trainer.accumulate_grad_batches, cfg.trainer.max_steps, len(cfg.seeds),
                 vocab=vocab) for name in cfg.models]


def mm_generation() -> list[Work]:
    from papers.masked_mixers.generation import GenerationConfig

    cfg = stage_config(paper_params(MM_PARAMS), "generation", GenerationConfig)
    # The model that ends lower is retrained until it reaches the other's loss: at most one clm run.
    clm = {w.network: w for w in _mm_trained("clm")}
    return [replace(clm[cfg.mixer], network=f"{cfg.mixer} or {cfg.transformer}", runs=1,
                    note="at most: the retraining stops at the other's final loss")]


def mm_summaries() -> list[Work]:
    from papers.masked_mixers.summaries import SummariesConfig

    cfg = stage_config(paper_params(MM_PARAMS), "summaries", SummariesConfig)
    _, _, padded = root_sizes()
    # Llama-3-8B-Instruct: 8.03e9 parameters (Meta's model card), 2 FLOPs per parameter and token.
    # Each story is a prompt of at most the padded window plus the new tokens.
    n_tokens = padded + cfg.max_new_tokens
    return [Work(cfg.model, lambda: None, n_tokens, cfg.batch_size, -(-(cfg.n_train + cfg.n_test) // cfg.batch_size),
                 train=False, forward_flops_per_row=2 * 8.03e9 * n_tokens, params=8_030_000_000,
                 note="at most: prompts taken as the full padded window")]


def mm_retrieval() -> list[Work]:
    from papers.masked_mixers.models import build_model
    from papers.masked_mixers.retrieval import RetrievalConfig, RetrievalMixer

    cfg = stage_config(paper_params(MM_PARAMS), "retrieval", RetrievalConfig)
    sizes = _mm_sizes()
    vocab, _, _ = root_sizes()
    texts = 2 * (cfg.n_train + cfg.n_test)  # every story and every summary, each padded to the window
    embed_batch = 64  # `embed_texts`' batch; forward-only work costs the same in any batch size
    work = [Work(f"{name} embeddings", lambda model=src.model: build_model(sizes.spec(model), sizes, vocab),
                 sizes.n_ctx, embed_batch, -(-texts // embed_batch), len(cfg.seeds), train=False, vocab=vocab)
            for name, src in cfg.sources.items()]
    d = sizes.d_model
    work += [Work(f"retrieval model, c = {c}", lambda c=c: RetrievalMixer(d, c + 1, cfg.training.depth), c + 1,
                  cfg.training.batch_size, cfg.training.steps, len(cfg.sources) * len(cfg.seeds), width=d)
             for c in cfg.candidates]
    work += [Work(f"timed retrieval model, c = {c}", lambda c=c: RetrievalMixer(d, c + 1, cfg.training.depth), c + 1,
                  cfg.training.batch_size, cfg.throughput.steps, len(cfg.seeds), width=d)
             for c in cfg.throughput.candidates]
    infonce = sizes.spec(cfg.sources[cfg.infonce_source].model)
    work.append(Work(f"InfoNCE {cfg.infonce_source}", lambda: build_model(infonce, sizes, vocab), sizes.n_ctx,
                     2 * cfg.infonce.batch_size, cfg.infonce.steps, len(cfg.seeds), vocab=vocab))
    return work


STAGES: dict[str, Callable[[], list[Work]] | str] = {
    "clm": lambda: _mm_trained("clm"),
    "norms": lambda: _mm_trained("norms"),
    "mixer_variants": lambda: _mm_trained("mixer_variants"),
    "train_test_gap": lambda: _mm_trained("train_test_gap"),
    "one_step": lambda: _mm_trained("one_step"),
    "context_length": lambda: _mm_trained("context_length"),
    "representation": "gradient steps on inputs of untrained and clm models (minutes)",
    "generation": mm_generation,
    "autoencoders": lambda: _mm_trained("autoencoders"),
    "bidirectional": lambda: _mm_trained("bidirectional"),
    "lr_check": "no rates checked at this profile (the official code's rates)",
    "summaries": mm_summaries,
    "retrieval": mm_retrieval,
    "memory": "timed forward and backward passes, not a budget",
    "expansion": "one backward pass per block and input recovery (minutes)",
    "report": "tables and ledger",
}
