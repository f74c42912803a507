"""Stage `tokenize`: the story corpus as token ids, padded (one story per row) and packed."""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "stories", "tokenizer", "out")

import logging
from dataclasses import asdict, dataclass

import datasets

from common.config import bounded
from common.data.manifest import load_dataset_dir, write_manifest
from common.data.tokenized import tokenize_packed, tokenize_padded
from common.data.tokenizer import load_tokenizer
from common.errors import exit_on_user_error
from common.io import atomic_dir

log = logging.getLogger("tokenize")


@dataclass
class TokenizeConfig:
    padded_n_ctx: int = bounded(512, ge=2)
    packed_n_ctx: int = bounded(256, ge=2)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "tokenize", TokenizeConfig)
    stories = load_dataset_dir(args.stories, splits=("train", "validation"), columns=("text",),
                               hint="run `dvc repro generate_stories` first")
    tokenizer = load_tokenizer(args.tokenizer)
    layouts = {
        "padded": (cfg.padded_n_ctx, lambda ds: tokenize_padded(ds, tokenizer, cfg.padded_n_ctx)),
        "packed": (cfg.packed_n_ctx, lambda ds: tokenize_packed(ds, tokenizer, cfg.packed_n_ctx)),
    }
    with atomic_dir(args.out) as tmp:
        for layout, (n_ctx, encode) in layouts.items():
            encoded = datasets.DatasetDict({split: encode(ds) for split, ds in stories.items()})
            encoded.save_to_disk(str(tmp / layout))
            write_manifest(tmp / layout, stage="tokenize", params={"profile": profile, "layout": layout,
                                                                    "n_ctx": n_ctx, **asdict(cfg)},
                           counts={split: len(ds) for split, ds in encoded.items()})
            log.info("%s: %s rows of %d tokens", layout, {s: len(d) for s, d in encoded.items()}, n_ctx)


if __name__ == "__main__":
    main()
