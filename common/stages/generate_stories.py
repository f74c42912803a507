"""Stage `generate_stories`: the story corpus, as an Arrow `DatasetDict` with train and validation.

Profiles `smoke` and `tiny` generate stories with ground-truth summaries from our own grammar
(`common.data.stories`); `paper` loads TinyStories from the Hugging Face Hub (text only).
"""

from __future__ import annotations

from common.stages import load_stage, stage_cli

# Declared before the other imports, so that `--help` answers without loading torch and Lightning.
# ruff: noqa: E402
CLI = stage_cli(__name__, __doc__, "out")

import logging
from dataclasses import asdict, dataclass
from typing import Literal

import datasets

from common.config import bounded, seed_field
from common.data.hub import load_hub_text
from common.data.manifest import write_manifest
from common.data.stories import generate_stories
from common.errors import exit_on_user_error
from common.io import atomic_dir

log = logging.getLogger("generate_stories")


@dataclass
class StoriesConfig:
    source: Literal["generated", "hub"] = "generated"
    hub_name: str = "tinystories"
    n_train: int = bounded(20000, ge=1)
    n_validation: int = bounded(1000, ge=1)
    seed: int = seed_field()


def build(cfg: StoriesConfig) -> datasets.DatasetDict:
    if cfg.source == "hub":
        return datasets.DatasetDict({
            "train": load_hub_text(cfg.hub_name, "train", limit=cfg.n_train),
            "validation": load_hub_text(cfg.hub_name, "validation", limit=cfg.n_validation),
        })
    # Validation ids follow the training ids, so the two splits never share a story.
    return datasets.DatasetDict({
        "train": datasets.Dataset.from_dict(generate_stories(cfg.n_train, cfg.seed)),
        "validation": datasets.Dataset.from_dict(generate_stories(cfg.n_validation, cfg.seed, start=cfg.n_train)),
    })


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    args = CLI.parse(argv)
    cfg, profile, _ = load_stage(args.params, "stories", StoriesConfig)
    corpus = build(cfg)
    with atomic_dir(args.out) as tmp:
        corpus.save_to_disk(str(tmp))
        write_manifest(tmp, stage="generate_stories", params={"profile": profile, **asdict(cfg)},
                       counts={split: len(ds) for split, ds in corpus.items()}, seed=cfg.seed)
    log.info("wrote %s: %s", args.out, {split: len(ds) for split, ds in corpus.items()})


if __name__ == "__main__":
    main()
