"""Stage `components`: the two pretrained models a Manticore hybrid starts from.

`tiny` / `smoke`: GPT-Neo-style transformers (learned positions, GPT-Neo attention, GELU MLP,
LayerNorm) and Mambas, `LanguageModel`s from the block library, each pretrained by this stage on
its corpus (`corpora`): the packed story tokens, or the packed generated instructions
(`instruction_text`). Every pretrained component is then scored on every corpus's held-out blocks,
and the stage checks that each corpus's own components beat every other component there by
`min_margin` nats: a hybrid of specialists has something to gain from both only if they differ in
skill. `paper`: EleutherAI/gpt-neo-125m and state-spaces/mamba-130m-hf from the Hugging Face Hub,
converted to `LanguageModel`s (their weights load into our blocks exactly).

Each component is written with `save_language_model` to `<out>/<name>/`, with the tokenizer it
was pretrained with in `<out>/<name>/tokenizer/` (the story tokenizer at `tiny`, the checkpoint's
own at `paper`), so later stages never depend on where a component came from.
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "data", "instructions", "tokenizer", "run-dir", "out", "metrics")

import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from transformers import AutoTokenizer, PreTrainedTokenizerBase

from common.config import bounded, check_names, from_dict, seed_field
from common.data.datamodule import LoaderConfig
from common.data.tokenized import load_tokenized
from common.data.tokenizer import load_tokenizer
from common.errors import ConfigError, DataError, HubUnavailable, exit_on_user_error
from common.eval.heldout import heldout_loss
from common.io import atomic_dir, write_json
from common.models.lm import LanguageModel, LMConfig, check_lm_spec, save_language_model
from common.standins import model_source
from common.training.lm import train_language_model
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig
from papers.manticore.vocabulary import TOKENIZER_DIR

log = logging.getLogger("components")


@dataclass
class ComponentsConfig:
    source: Literal["pretrain", "hub"] = "pretrain"
    seed: int = seed_field()
    # source=pretrain: LanguageModel configs without vocab_size/n_ctx (taken from the data)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    # source=pretrain: the corpus each model pretrains on (models not named here: stories)
    corpora: dict[str, Literal["stories", "instructions"]] = field(default_factory=dict)
    # how much lower (nats) each corpus's own components must score there than every other
    # component; None records the scores without checking them (smoke runs learn nothing)
    min_margin: float | None = bounded(None, ge=0)
    eval_rows: int = bounded(160, ge=1)  # held-out blocks per corpus for those scores
    # source=hub: name -> Hugging Face repository id
    hub: dict[str, str] = field(default_factory=dict)
    data: LoaderConfig = field(default_factory=LoaderConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)

    def check(self) -> None:
        check_names(self.models, "models")
        for name, raw in self.models.items():
            check_lm_spec(raw, where=f"models.{name}")
        for name in self.corpora:
            if name not in self.models:
                raise ConfigError(f"corpora.{name}: no such model; models: {', '.join(self.models)}")

    def corpus(self, name: str) -> str:
        return self.corpora.get(name, "stories")


def genre_margins(scores: dict[str, dict[str, float]], corpus_of: dict[str, str]) -> dict[str, float]:
    """For each corpus, how much lower its own components score there than the best other
    component (the smallest such gap; negative when some outsider does as well)."""
    margins = {}
    for corpus in sorted(set(corpus_of.values())):
        own = [scores[m][corpus] for m, c in corpus_of.items() if c == corpus]
        others = [scores[m][corpus] for m, c in corpus_of.items() if c != corpus]
        if others:
            margins[corpus] = min(others) - max(own)
    return margins


def from_hub(name: str, repo: str) -> tuple[LanguageModel, PreTrainedTokenizerBase]:
    """The checkpoint `repo` (a Hub id or a local `save_pretrained` directory) and its tokenizer."""
    from common.models.hf import language_model_from_hf
    from common.models.mamba import mamba_lm_from_hf

    repo = model_source(repo)
    try:
        model = mamba_lm_from_hf(repo) if "mamba" in name else language_model_from_hf(repo)
        tokenizer = AutoTokenizer.from_pretrained(str(repo))
    except OSError as err:
        raise HubUnavailable(f"components.hub.{name}: cannot load {repo!r} from the Hugging Face Hub ({err}); "
                             f"use the tiny profile offline") from None
    if tokenizer.pad_token is None:  # GPT-2's BPE has none; padding is masked out of the loss anyway
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "components", ComponentsConfig)

    results = {}
    with atomic_dir(args.out) as tmp:
        if cfg.source == "hub":
            args.run_dir.mkdir(parents=True, exist_ok=True)  # a DVC output of the stage; nothing trains here
            for name, repo in cfg.hub.items():
                model, tokenizer = from_hub(name, repo)
                save_language_model(model, tmp / name)
                tokenizer.save_pretrained(str(tmp / name / TOKENIZER_DIR))
                results[name] = {"source": repo, "params": sum(p.numel() for p in model.parameters()),
                                 "tokens": len(tokenizer)}
        else:
            tokenizer = load_tokenizer(args.tokenizer)
            paths = {"stories": args.data, "instructions": args.instructions}
            corpora = {c: load_tokenized(paths[c]) for c in sorted({cfg.corpus(n) for n in cfg.models})}
            stored = min(len(rows["train"][0]["input_ids"]) for rows in corpora.values())
            n_ctx = min(stored, cfg.data.n_ctx or stored)  # what training reads of each row
            scores = {}
            for name, raw in cfg.models.items():
                lm_cfg = from_dict(LMConfig, {**raw, "vocab_size": len(tokenizer), "n_ctx": n_ctx},
                                   where=f"components.models.{name}")
                net, run = train_language_model(lm_cfg, paths[cfg.corpus(name)], cfg.data, cfg.optim, cfg.trainer,
                                                args.run_dir / name, cfg.seed)
                save_language_model(net, tmp / name)
                tokenizer.save_pretrained(str(tmp / name / TOKENIZER_DIR))
                scores[name] = {c: heldout_loss(net, rows["validation"], cfg.data.batch_size, n_ctx, cfg.eval_rows)
                                for c, rows in corpora.items()}
                val = [r for r in run.history if "val/loss" in r]
                results[name] = {"source": "pretrained here", "corpus": cfg.corpus(name), "pattern": lm_cfg.pattern,
                                 "repeat": lm_cfg.repeat, "d_model": lm_cfg.d_model,
                                 "params": sum(p.numel() for p in net.parameters()), "tokens": len(tokenizer),
                                 "final_val_loss": val[-1]["val/loss"], "heldout_loss": scores[name], "history": val}
                log.info("%s (pretrained on %s): held-out loss %s", name, cfg.corpus(name), scores[name])
            margins = genre_margins(scores, {n: cfg.corpus(n) for n in cfg.models})
            specialists = {"margins": margins, "min_margin": cfg.min_margin, "eval_rows": cfg.eval_rows}
            short = {c: m for c, m in margins.items() if cfg.min_margin is not None and m < cfg.min_margin}
            if short:
                # Checked before the outputs land: nothing downstream builds on components that are not specialists.
                raise DataError(f"components: on {', '.join(short)} the components pretrained there beat the others "
                                f"by only {', '.join(f'{m:.3f}' for m in short.values())} nats, under min_margin "
                                f"{cfg.min_margin}; pretrain longer or lower min_margin")
    summary = {"profile": profile, "components": results}
    if cfg.source == "pretrain":
        summary["specialists"] = specialists
    write_json(args.metrics, summary)
    log.info("wrote %s", args.metrics)


if __name__ == "__main__":
    main()
