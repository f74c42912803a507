"""Stage `instruction_text`: a second genre to pretrain a specialist component on.

The paper's components differ in skill; two components pretrained on the same stories do not, so
one of them is the best point of every landscape. At `tiny` one component of the specialist pair
pretrains on the stories and the other on these generated Alpaca-style instructions
(`papers.manticore.instructions`), tokenized with the story tokenizer and packed into
`block_size` blocks as the stories are (`data/tokenized/packed`).

Train: documents `start .. start + n_train - 1` of the generator's `seed`; validation: distinct
documents from the next ids on that are not in train (short templated tasks repeat, and a repeat
on both sides would flatter the margin check). `start` keeps them apart from the ids the
fine-tuning stages draw from (0 on); `specialists` also leaves every train document out of its
held-out instructions (`instructions.pretraining_documents`).
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "tokenizer", "out", "summary")

import logging
from dataclasses import asdict

import datasets

from common.data.manifest import write_manifest
from common.data.tokenized import tokenize_packed
from common.data.tokenizer import load_tokenizer, tokenizer_fingerprint
from common.errors import DataError, exit_on_user_error
from common.io import atomic_dir, write_json
from papers.manticore.instructions import InstructionTextConfig, pretraining_documents

log = logging.getLogger("instruction_text")


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "instruction_text", InstructionTextConfig)
    tokenizer = load_tokenizer(args.tokenizer)
    splits = pretraining_documents(cfg)
    with atomic_dir(args.out) as tmp:
        packed = datasets.DatasetDict({split: tokenize_packed(rows, tokenizer, cfg.block_size)
                                       for split, rows in splits.items()})
        for split, rows in packed.items():
            if len(rows) == 0:
                raise DataError(f"instruction_text: {len(splits[split])} {split} documents fill no block of "
                                f"{cfg.block_size} tokens; raise n_{split}")
        packed.save_to_disk(str(tmp))
        write_manifest(tmp, stage="instruction_text", counts={s: len(r) for s, r in packed.items()}, seed=cfg.seed,
                       params={"profile": profile, **asdict(cfg), "tokenizer": tokenizer_fingerprint(tokenizer)})
    tokens = {split: len(rows) * cfg.block_size for split, rows in packed.items()}
    write_json(args.summary, {"profile": profile, "documents": {s: len(r) for s, r in splits.items()},
                              "block_size": cfg.block_size, "tokens": tokens})
    log.info("wrote %s: %s tokens", args.out, tokens)


if __name__ == "__main__":
    main()
