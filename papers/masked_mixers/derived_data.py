"""Tokenized data sets a stage derives from the root pipeline's (a subset of the training stories,
a loss mask over part of each row), written into the stage's run directory with a manifest and read
back like any tokenized data set, so training resumes and fingerprints work on them unchanged.

A derived set is written again only when its source or its derivation changed: the manifest holds
the source's manifest and the derivation's parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import datasets

from common.data.manifest import MANIFEST, verify_manifest, write_manifest
from common.data.tokenized import load_tokenized
from common.errors import DataError
from common.io import atomic_dir


def derived_tokenized(source: Path, out: Path, stage: str, params: dict[str, Any],
                      derive: Callable[[datasets.DatasetDict], datasets.DatasetDict]) -> Path:
    """`derive(source's splits)` saved at `out`, unless `out` already holds it."""
    made = {"source_manifest": (source / MANIFEST).read_text() if (source / MANIFEST).is_file() else None,
            **params}
    if (out / MANIFEST).is_file():
        try:
            if verify_manifest(out, hint="")["params"] == made:
                return out
        except DataError:
            pass  # damaged or partial: written again below
    derived = derive(load_tokenized(source))
    datasets.disable_progress_bars()  # one bar per split, for a save that takes a fraction of a second
    with atomic_dir(out) as tmp:
        derived.save_to_disk(str(tmp))
        write_manifest(tmp, stage=stage, params=made, counts={split: len(d) for split, d in derived.items()})
    return out
