"""Stage `components`: the two pretrained models a Manticore hybrid starts from.

`tiny` / `smoke`: a GPT-Neo-style transformer (learned positions, GPT-Neo attention, GELU MLP,
LayerNorm) and a Mamba, both `LanguageModel`s from the block library, pretrained by this stage on
the packed story tokens. `paper`: EleutherAI/gpt-neo-125m and state-spaces/mamba-130m-hf from the
Hugging Face Hub, converted to `LanguageModel`s (their weights load into our blocks exactly).

Each component is written with `save_language_model` to `<out>/<name>/`, with the tokenizer it
was pretrained with in `<out>/<name>/tokenizer/` (the story tokenizer at `tiny`, the checkpoint's
own at `paper`), so later stages never depend on where a component came from.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from transformers import AutoTokenizer, PreTrainedTokenizerBase

from common.config import from_dict
from common.data.datamodule import LoaderConfig
from common.data.tokenized import load_tokenized
from common.data.tokenizer import load_tokenizer
from common.errors import HubUnavailable, exit_on_user_error
from common.io import atomic_dir, write_json
from common.models.lm import LanguageModel, LMConfig, check_lm_spec, save_language_model
from common.stages import load_stage, stage_args
from common.training.lm import train_language_model
from common.training.optim import OptimConfig
from common.training.trainer import TrainerConfig
from papers.manticore.vocabulary import TOKENIZER_DIR

log = logging.getLogger("components")


@dataclass
class ComponentsConfig:
    source: Literal["pretrain", "hub"] = "pretrain"
    seed: int = 0
    # source=pretrain: LanguageModel configs without vocab_size/n_ctx (taken from the data)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    # source=hub: name -> Hugging Face repository id
    hub: dict[str, str] = field(default_factory=dict)
    data: LoaderConfig = field(default_factory=LoaderConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)

    def check(self) -> None:
        for name, raw in self.models.items():
            check_lm_spec(raw, where=f"models.{name}")


def from_hub(name: str, repo: str) -> tuple[LanguageModel, PreTrainedTokenizerBase]:
    """The checkpoint `repo` (a Hub id or a local `save_pretrained` directory) and its tokenizer."""
    from common.models.hf import language_model_from_hf
    from common.models.mamba import mamba_lm_from_hf

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
    args = stage_args(argv, __doc__, "data", "tokenizer", "run-dir", "out", "metrics")
    cfg, profile, _ = load_stage(args.params, "components", ComponentsConfig)

    results = {}
    with atomic_dir(args.out) as tmp:
        if cfg.source == "hub":
            for name, repo in cfg.hub.items():
                model, tokenizer = from_hub(name, repo)
                save_language_model(model, tmp / name)
                tokenizer.save_pretrained(str(tmp / name / TOKENIZER_DIR))
                results[name] = {"source": repo, "params": sum(p.numel() for p in model.parameters()),
                                 "tokens": len(tokenizer)}
        else:
            tokenizer = load_tokenizer(args.tokenizer)
            stored = len(load_tokenized(args.data)["train"][0]["input_ids"])
            n_ctx = min(stored, cfg.data.n_ctx or stored)  # what training reads of each row
            for name, raw in cfg.models.items():
                lm_cfg = from_dict(LMConfig, {**raw, "vocab_size": len(tokenizer), "n_ctx": n_ctx},
                                   where=f"components.models.{name}")
                net, run = train_language_model(lm_cfg, args.data, cfg.data, cfg.optim, cfg.trainer,
                                                args.run_dir / name, cfg.seed)
                save_language_model(net, tmp / name)
                tokenizer.save_pretrained(str(tmp / name / TOKENIZER_DIR))
                val = [r for r in run.history if "val/loss" in r]
                results[name] = {"source": "pretrained here", "pattern": lm_cfg.pattern, "repeat": lm_cfg.repeat,
                                 "d_model": lm_cfg.d_model, "params": sum(p.numel() for p in net.parameters()),
                                 "tokens": len(tokenizer), "final_val_loss": val[-1]["val/loss"], "history": val}
    write_json(args.metrics, {"profile": profile, "components": results})
    log.info("wrote %s", args.metrics)


if __name__ == "__main__":
    main()
