"""Stage `train_tokenizer`: byte-level BPE on the training stories, saved for `transformers`."""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "stories", "out")

import logging
from dataclasses import asdict, dataclass

from common.config import bounded
from common.data.manifest import load_dataset_dir, write_manifest
from common.data.tokenizer import train_tokenizer
from common.errors import exit_on_user_error
from common.io import atomic_dir

log = logging.getLogger("train_tokenizer")


@dataclass
class TokenizerConfig:
    # at most what int32 token ids hold (the tokenized data's type); the BPE trainer aborted above 2^32
    vocab_size: int = bounded(4096, ge=259, le=2**31 - 1)
    max_texts: int | None = bounded(None, ge=1)  # train on the first N stories only; None = all


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "tokenizer", TokenizerConfig)
    train = load_dataset_dir(args.stories, splits=("train",), columns=("text",),
                             hint="run `dvc repro generate_stories` first")["train"]
    if cfg.max_texts is not None:
        train = train.select(range(min(cfg.max_texts, len(train))))
    tokenizer = train_tokenizer((row["text"] for row in train), vocab_size=cfg.vocab_size)
    with atomic_dir(args.out) as tmp:
        tokenizer.save_pretrained(str(tmp))
        write_manifest(tmp, stage="train_tokenizer", params={"profile": profile, **asdict(cfg)},
                       counts={"texts": len(train), "vocab_size": len(tokenizer)})
    log.info("wrote %s: vocabulary of %d from %d stories", args.out, len(tokenizer), len(train))


if __name__ == "__main__":
    main()
