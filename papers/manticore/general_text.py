"""Stage `general_text`: the general text that Manticore's projectors are pretrained on, tokenized for each hybrid.

A hybrid reads its first component's tokenizer (`papers.manticore.vocabulary`), so the text is
tokenized once per component named in `tokenizers`, packed into `block_size` blocks and written to
`<out>/<name>`, with a manifest that records the tokenizer. `train_tokens` and
`validation_tokens` cap each split; the rest of the source is never read.

`tiny` / `smoke`: the story corpus (training stories, then validation stories). `paper`: FineWeb's
sample-10BT, streamed, 100M training tokens in 1024-token blocks, as the paper's projector
pretraining (the official code read `train[:1%]`, about the same amount, with its character-spacing
bug; see the README).
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "components", "stories", "out", "summary")

import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import datasets

from common.config import bounded, check_distinct
from common.data.hub import load_hub_text
from common.data.manifest import load_dataset_dir, write_manifest
from common.data.tokenized import tokenize_packed
from common.data.tokenizer import tokenizer_fingerprint
from common.errors import ConfigError, DataError, exit_on_user_error
from common.io import atomic_dir, write_json
from papers.manticore.vocabulary import load_component_tokenizers

log = logging.getLogger("general_text")


@dataclass
class GeneralTextConfig:
    source: Literal["stories", "fineweb"] = "stories"
    tokenizers: list[str] = field(default_factory=lambda: ["gpt_neo"])  # components whose tokenizer to use
    block_size: int = bounded(128, ge=2)
    train_tokens: int = bounded(2_000_000, ge=1)
    validation_tokens: int = bounded(100_000, ge=1)

    def check(self) -> None:
        check_distinct(self.tokenizers, "tokenizers")
        if min(self.train_tokens, self.validation_tokens) < self.block_size:
            raise ConfigError(f"train_tokens and validation_tokens must each fill a block of {self.block_size}")


def documents(cfg: GeneralTextConfig, split: str, stories: Path) -> Iterable[str]:
    if cfg.source == "fineweb":
        return (row["text"] for row in load_hub_text("fineweb", split, streaming=True))
    corpus = load_dataset_dir(stories, splits=(split,), columns=("text",),
                              hint="run `dvc repro generate_stories` first")
    return corpus[split]["text"]


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "general_text", GeneralTextConfig)
    tokenizers = dict(zip(cfg.tokenizers, load_component_tokenizers(args.components, cfg.tokenizers)))
    budgets = {"train": cfg.train_tokens, "validation": cfg.validation_tokens}

    counts = {}
    with atomic_dir(args.out) as tmp:
        for name, tokenizer in tokenizers.items():
            packed = datasets.DatasetDict({
                split: tokenize_packed(documents(cfg, split, args.stories), tokenizer, cfg.block_size,
                                       max_tokens=budget)
                for split, budget in budgets.items()})
            for split, rows in packed.items():
                if len(rows) == 0:
                    raise DataError(f"general_text: {cfg.source} gives no {split} block of {cfg.block_size} tokens")
            packed.save_to_disk(str(tmp / name))
            counts[name] = {split: len(rows) * cfg.block_size for split, rows in packed.items()}
            write_manifest(tmp / name, stage="general_text", counts={s: len(r) for s, r in packed.items()},
                           params={"profile": profile, **asdict(cfg), "tokenizer": tokenizer_fingerprint(tokenizer)})
            log.info("%s: %s tokens", name, counts[name])
    write_json(args.summary, {"profile": profile, "source": cfg.source, "block_size": cfg.block_size, "tokens": counts})


if __name__ == "__main__":
    main()
