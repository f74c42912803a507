"""Manifests of generated data: counts, seed, parameters and a content hash per file.

Every data stage writes `manifest.json` into its output directory. Loaders verify the hashes, so
a truncated or overwritten Arrow file is reported as corrupted instead of being half-read.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from common.errors import DataError
from common.io import write_json

MANIFEST = "manifest.json"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_manifest(directory: str | Path, *, stage: str, params: dict[str, Any], counts: dict[str, int],
                   seed: int | None = None) -> dict[str, Any]:
    """Hash every file under `directory` and write the manifest next to them."""
    directory = Path(directory)
    files = {
        str(p.relative_to(directory)): file_sha256(p)
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }
    manifest = {"stage": stage, "seed": seed, "params": params, "counts": counts, "files": files}
    write_json(directory / MANIFEST, manifest)
    return manifest


def config_fingerprint(obj: Any) -> str:
    """A short SHA-256 of `obj`'s canonical JSON: the identity of data generated from a config."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def manifest_fingerprint(directory: str | Path, extra: Any = None) -> str:
    """The identity of a data directory: a hash of its manifest (which holds a content hash per
    file), with `extra` (how the reader cuts it) mixed in. A directory without a manifest is an error."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise DataError(f"{directory}: no {MANIFEST}; data directories are written by the pipeline's data stages")
    return config_fingerprint({"manifest": hashlib.sha256(path.read_bytes()).hexdigest(), "extra": extra})


def verify_manifest(directory: str | Path, *, hint: str) -> dict[str, Any]:
    """Check that `directory` exists and matches its manifest; `hint` says how to rebuild it."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DataError(f"{directory}: data directory not found; {hint}")
    path = directory / MANIFEST
    if not path.is_file():
        raise DataError(f"{directory}: no {MANIFEST}, so the data is incomplete; {hint}")
    try:
        manifest = json.loads(path.read_text())
        files = manifest["files"]
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
        raise DataError(f"{path}: unreadable manifest; {hint}") from None
    if not isinstance(files, dict) or not files:
        raise DataError(f"{path}: the manifest lists no files; {hint}")
    for name, expected in files.items():
        target = directory / name
        if not target.is_file():
            raise DataError(f"{target}: file listed in the manifest is missing; {hint}")
        if file_sha256(target) != expected:
            raise DataError(f"{target}: corrupted (content hash differs from the manifest); {hint}")
    return manifest


def load_dataset_dir(directory: str | Path, *, splits: tuple[str, ...], columns: tuple[str, ...], hint: str):
    """The `datasets.DatasetDict` a data stage wrote to `directory`, verified against its manifest,
    with each of `splits` holding each of `columns`: a directory of other data (a tokenizer, tokenized
    rows where text is wanted) is a one-line error naming what is missing."""
    import datasets

    verify_manifest(directory, hint=hint)
    try:
        data = datasets.load_from_disk(str(directory))
    except Exception as err:  # Arrow raises many types for damaged or foreign files; all mean the same here
        raise DataError(f"{directory}: not a saved data set ({type(err).__name__}); {hint}") from None
    if not isinstance(data, datasets.DatasetDict):
        raise DataError(f"{directory}: expected splits {', '.join(splits)}, found one unsplit data set; {hint}")
    for split in splits:
        if split not in data:
            raise DataError(f"{directory}: split {split!r} missing (have {', '.join(data)}); {hint}")
        if missing := [c for c in columns if c not in data[split].column_names]:
            raise DataError(f"{directory}/{split}: no {', '.join(missing)} column (have "
                            f"{', '.join(data[split].column_names)}); {hint}")
    return data
